"""kernel-builder's workflow around the build: init, the kernel card, kernels_ci tests, upload,
and the checks before sharing (op registrations, kernel-abi-check).

The compile tests run the real thing: init a project, build it (pip and `build2cmake build`),
run its generated tests, load it with `kernels`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from build2cmake.config import load_project
from build2cmake.ground.errors import Build2CMakeError
from build2cmake.share import card
from build2cmake.share.checks import op_registration_violations
from build2cmake.toolchains.offload import rocm_targets
from tests.conftest import REPO, BuildEnv, requires_nvcc, requires_rocm_toolchain, run_cli
from tests.hub_standin import StandInHub

NAME = "my-org/add-one"
PACKAGE = "add_one"
# Debian's ROCm 5.2 cannot build init's default gfx942; the README's override for it.
ROCM_ARCHS_HERE = "gfx90a;gfx940"


def init(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = run_cli("init", root, "--name", NAME, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def run_generated_tests(python: Path | str, root: Path) -> str:
    """The project's own tests/ with pytest, as a developer runs them after pip install -e."""
    result = subprocess.run(
        [str(python), "-m", "pytest", "tests", "-p", "no:cacheprovider", "-q"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # "3 passed in 7.08s" -> "3 passed"
    return result.stdout.strip().splitlines()[-1].rsplit(" in ", 1)[0]


# --- init ------------------------------------------------------------------------------------


def test_init_writes_the_project_layout_and_its_build_toml_validates(tmp_path: Path) -> None:
    root = tmp_path / "add-one"
    result = init(root, "--backends", "all")
    files = sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()
    )
    assert files == sorted(
        [
            ".gitattributes",
            ".gitignore",
            "CARD.md",
            "benchmarks/benchmark.py",
            "build.toml",
            "example.py",
            f"{PACKAGE}_cpu/{PACKAGE}_cpu.cpp",
            f"{PACKAGE}_cuda/{PACKAGE}.cu",
            f"{PACKAGE}_rocm/{PACKAGE}.hip",
            "tests/__init__.py",
            "tests/conftest.py",
            f"tests/test_{PACKAGE}.py",
            f"torch-ext/{PACKAGE}/__init__.py",
            "torch-ext/torch_binding.cpp",
            "torch-ext/torch_binding.h",
        ]
    )
    assert f"initialized {NAME} (cpu, cuda, rocm)" in result.stdout
    project = load_project(root / "build.toml")
    assert project.source_format == "edition 5"
    assert project.hub_repo_id == NAME
    assert project.backends == ("cpu", "cuda", "rocm")
    assert project.license == "Apache-2.0"
    (rocm,) = project.kernels_for("rocm")
    assert rocm.rocm_archs == ("gfx90a", "gfx942")
    assert "*.so filter=lfs" in (root / ".gitattributes").read_text()
    assert "/build/" in (root / ".gitignore").read_text().splitlines()
    assert "@pytest.mark.kernels_ci" in (root / f"tests/test_{PACKAGE}.py").read_text()
    # The rocm kernel is HIP, not a hipified .cu.
    assert "hipLaunchKernelGGL" in (root / f"{PACKAGE}_rocm/{PACKAGE}.hip").read_text()


def test_init_defaults_to_a_cuda_kernel_in_a_folder_named_after_it(tmp_path: Path) -> None:
    result = run_cli("init", "--name", NAME, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    project = load_project(tmp_path / "add-one" / "build.toml")
    assert project.backends == ("cuda",)
    assert not (tmp_path / "add-one" / f"{PACKAGE}_cpu").exists()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("add-one", "use <owner>/<kernel name>"),
        ("my-org/Add_One", "(did you mean my-org/add-one?)"),
        ("my-org/add-", "is not a valid kernel name"),
        ("my-org/1x", "is not a valid kernel name"),
        ("-org/add-one", "is not a Hub user or organisation name"),
        ("my-org/a/b", "use <owner>/<kernel name>"),
        ('my-org/x"\n[evil]', "is not a valid kernel name"),
    ],
)
def test_init_rejects_names_the_hub_does_not_accept_with_one_error(
    tmp_path: Path, name: str, message: str
) -> None:
    result = run_cli("init", tmp_path / "k", f"--name={name}")
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "k").exists()


def test_init_rejects_unknown_backends_and_licenses_before_writing(tmp_path: Path) -> None:
    result = run_cli("init", tmp_path / "k", "--name", NAME, "--backends", "metal")
    assert result.returncode == 2
    assert "build2cmake builds cpu, cuda, rocm" in result.stderr
    result = run_cli("init", tmp_path / "k", "--name", NAME, "--license", 'MIT"\nx = 1')
    assert result.returncode == 2
    assert "SPDX" in result.stderr
    assert not (tmp_path / "k").exists()


def test_init_refuses_a_non_empty_folder_and_with_force_keeps_other_files(tmp_path: Path) -> None:
    root = tmp_path / "k"
    root.mkdir()
    (root / "notes.txt").write_text("mine")
    (root / "build.toml").write_text("# mine\n")
    result = run_cli("init", root, "--name", NAME)
    assert result.returncode == 2
    assert "folder is not empty" in result.stderr and "--force" in result.stderr
    assert (root / "build.toml").read_text() == "# mine\n"

    init(root, "--force")
    assert (root / "notes.txt").read_text() == "mine"
    assert load_project(root / "build.toml").hub_repo_id == NAME


@pytest.mark.parametrize("named", [".", "DIR"])
def test_init_fills_an_existing_empty_folder_in_place(tmp_path: Path, named: str) -> None:
    """`mkdir add-one && cd add-one && build2cmake init .` (or `init add-one`): the folder keeps
    its inode, mode and owner, and a shell standing in it sees the project. Before (#60) init
    wrote a new folder and renamed it over the user's, leaving the shell in a deleted one."""
    root = tmp_path / "add-one"
    root.mkdir()
    os.chmod(root, 0o750)
    if os.geteuid() == 0:  # a folder of another user, that root inits into
        os.chown(root, 4321, 4321)
    before = os.stat(root)
    shell = subprocess.Popen(
        [sys.executable, "-c", "import os, sys; sys.stdin.readline(); print(sorted(os.listdir()))"],
        cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    if named == ".":
        result = run_cli("init", ".", "--name", NAME, "--backends", "cpu", cwd=root)
    else:
        result = run_cli("init", "add-one", "--name", NAME, "--backends", "cpu", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    seen, _ = shell.communicate("\n", timeout=60)
    assert "'build.toml'" in seen and "'torch-ext'" in seen, seen
    after = os.stat(root)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
    assert (after.st_mode, after.st_uid, after.st_gid) == (
        before.st_mode,
        before.st_uid,
        before.st_gid,
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["add-one"]  # nothing beside it
    assert not (root / ".build2cmake-init.json").exists()
    assert load_project(root / "build.toml").hub_repo_id == NAME


def test_init_force_never_writes_through_a_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    root = tmp_path / "k"
    root.mkdir()
    (root / "build.toml").symlink_to(outside)
    result = run_cli("init", root, "--name", NAME, "--force")
    assert result.returncode == 2
    assert "symlink" in result.stderr
    assert outside.read_text() == "keep"

    (root / "build.toml").unlink()
    (root / "tests").symlink_to(tmp_path, target_is_directory=True)
    result = run_cli("init", root, "--name", NAME, "--force")
    assert result.returncode == 2
    assert not (tmp_path / "conftest.py").exists()


@pytest.mark.parametrize(
    "record", ["[" * 200_000, "\xff{", "{not json"], ids=["deep", "bytes", "text"]
)
def test_init_reads_a_record_it_did_not_write_as_none_whatever_it_holds(
    tmp_path: Path, record: str
) -> None:
    # A record nested too deeply for Python's parser (RecursionError: an internal error
    # before), not UTF-8 or not JSON lists nothing: init fills the folder, the record replaced.
    root = tmp_path / "k"
    root.mkdir()
    (root / ".build2cmake-init.json").write_bytes(record.encode("latin-1"))
    (root / "notes.txt").write_text("mine")
    refused = run_cli("init", root, "--name", NAME)
    assert refused.returncode == 2 and "folder is not empty" in refused.stderr, refused.stderr
    init(root, "--force")
    assert (root / "notes.txt").read_text() == "mine"
    assert not (root / ".build2cmake-init.json").exists()


# --- checks before sharing -------------------------------------------------------------------


def test_op_registration_check_rejects_a_literal_namespace_as_kernel_builder_does() -> None:
    bad = (
        "import torch\n"
        "from ._ops import add_op_namespace_prefix\n"
        '@torch.library.register_fake("relu::relu_fwd")\n'
        "def relu_fwd_fake(input):\n"
        "    return torch.empty_like(input)\n"
        '@torch.library.custom_op(add_op_namespace_prefix("ok"), mutates_args=())\n'
        "def ok(x: torch.Tensor) -> torch.Tensor:\n"
        "    return x\n"
        "def later():\n"
        '    torch.library.register_kernel(f"{NS}::relu", "cpu", lambda x: x)\n'
    )
    violations = op_registration_violations(Path("ops.py"), bad)
    assert [(v.line, v.what.split("(")[0]) for v in violations] == [
        (3, "@register_fake"),
        (10, "register_kernel"),
    ]
    assert "relu_fwd_fake" in str(violations[0])


def test_build_refuses_a_literal_op_namespace_before_compiling(tmp_path: Path) -> None:
    root = tmp_path / "k"
    init(root, "--backends", "cpu")
    package = root / "torch-ext" / PACKAGE / "__init__.py"
    package.write_text(
        package.read_text().replace(f'add_op_namespace_prefix("{PACKAGE}")', f'"x::{PACKAGE}"')
    )
    result = run_cli("build", root / "build.toml", "--backend", "cpu")
    assert result.returncode == 2
    assert f"{package}:" in result.stderr and "add_op_namespace_prefix" in result.stderr
    assert not (root / "build").exists()


def test_card_is_rendered_in_a_sandbox(tmp_path: Path) -> None:
    root = tmp_path / "k"
    init(root, "--backends", "cpu")
    project = load_project(root / "build.toml")
    (root / "CARD.md").write_text("{{ name.__class__.__mro__[1].__subclasses__() }}\n")
    with pytest.raises(Build2CMakeError, match=r"CARD\.md: cannot be filled in"):
        card.render_card(project, root)
    (root / "CARD.md").write_text("{% for x in %}\n")
    with pytest.raises(Build2CMakeError, match=r"CARD\.md:1: template error"):
        card.render_card(project, root)
    (root / "CARD.md").unlink()
    (root / "CARD.md").symlink_to(tmp_path / "elsewhere.md")
    (tmp_path / "elsewhere.md").write_text("secret")
    with pytest.raises(Build2CMakeError, match="inside the project folder"):
        card.render_card(project, root)


# --- the real thing: compile, install, test, load ---------------------------------------------


@pytest.mark.compile
def test_init_cpu_project_installs_with_pip_and_its_tests_pass(
    tmp_path: Path, build_env: BuildEnv
) -> None:
    root = tmp_path / "add-one"
    init(root, "--backends", "cpu", "cuda", "rocm")
    generated = run_cli("generate-torch", root / "build.toml", "--backend", "cpu")
    assert generated.returncode == 0, generated.stderr
    build_env.pip_install(root)
    assert run_generated_tests(build_env.python, root) == "3 passed"


@pytest.mark.compile
@pytest.mark.rocm
@requires_rocm_toolchain
def test_init_rocm_project_compiles_for_the_archs_asked_and_its_tests_skip_without_gpu(
    tmp_path: Path, build_env: BuildEnv
) -> None:
    root = tmp_path / "add-one"
    init(root, "--backends", "rocm")
    generated = run_cli("generate-torch", root / "build.toml", "--backend", "rocm")
    assert generated.returncode == 0, generated.stderr
    build_env.pip_install(root, f"cmake.define.BUILD2CMAKE_ROCM_ARCHS={ROCM_ARCHS_HERE}")
    libraries = sorted((root / "build" / "cmake").rglob(f"_{PACKAGE}_rocm_*.so"))
    assert libraries
    # Each kernel keeps the intersection of its rocm-archs (init's gfx90a, gfx942) and the
    # override: gfx90a. gfx942 is what ROCm >= 5.7 adds.
    assert {t.split(":")[0] for t in rocm_targets(libraries[0])} == {"gfx90a"}
    # The package imports (the op is registered) and the tests skip: there is no GPU here.
    check = build_env.run(f"import {PACKAGE}; print({PACKAGE}._ops.backend)")
    # (the editable install's rebuild-on-import prints its CMake run first)
    assert check.stdout.strip().splitlines()[-1] == "rocm", check.stderr
    assert run_generated_tests(build_env.python, root) == "3 skipped"


@pytest.mark.compile
@pytest.mark.cuda
@requires_nvcc
def test_init_cuda_project_compiles_with_nvcc_and_its_tests_skip_without_gpu(
    tmp_path: Path, build_env: BuildEnv
) -> None:
    root = tmp_path / "add-one"
    init(root, "--backends", "cuda")
    generated = run_cli("generate-torch", root / "build.toml", "--backend", "cuda")
    assert generated.returncode == 0, generated.stderr
    # Two capabilities keep the compile short; the default list is tested elsewhere.
    build_env.pip_install(root, "cmake.define.BUILD2CMAKE_CUDA_CAPABILITIES=8.0;9.0")
    check = build_env.run(f"import {PACKAGE}; print({PACKAGE}._ops.backend)")
    assert check.stdout.strip().splitlines()[-1] == "cuda", check.stderr
    assert run_generated_tests(build_env.python, root) == "3 skipped"


@pytest.mark.compile
def test_build_writes_the_card_test_runs_kernels_ci_and_upload_refuses_a_stale_build(
    tmp_path: Path,
) -> None:
    root = tmp_path / "add-one"
    init(root, "--backends", "cpu", "rocm")
    # A kernels_ci test that proves where the kernel came from: build/<variant>/, via kernels.
    (root / "tests" / "test_where.py").write_text(
        "import pytest\n\n\n@pytest.mark.kernels_ci\ndef test_loaded_from_the_variant(kernel):\n"
        "    assert '/build/torch' in kernel.__file__, kernel.__file__\n"
    )
    built = run_cli("build", root / "build.toml", "--backend", "cpu")
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    lines = built.stdout.strip().splitlines()
    assert lines[-1].startswith("built ")
    variant = Path(lines[-1].split()[1]).name
    assert any(
        line.startswith("kernel-abi-check: ") and line.endswith("manylinux_2_28 ok")
        for line in lines
    ), lines
    readme = (root / "build" / "CARD.md").read_text()
    assert f'get_kernel("{NAME}", version=1)' in readme
    assert f"| `{variant}` | cpu | - |" in readme
    assert f"- `{PACKAGE}(Tensor! out, Tensor input) -> ()`" in readme
    assert "license: apache-2.0" in readme

    tested = run_cli("test", root / "build.toml")
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-3000:]
    assert "3 passed, 1 deselected" in tested.stdout

    # Published to a local stand-in for the Hub (tests/hub_standin.py), never the real one.
    hub = StandInHub().start()
    try:
        upload = subprocess.run(
            [sys.executable, "-m", "build2cmake", "upload", str(root / "build.toml")],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "HF_ENDPOINT": hub.url, "HF_TOKEN": "hf_stand_in_token"},
        )
    finally:
        hub.stop()
    assert upload.returncode == 0, upload.stderr
    assert hub.created[0]["name"] == NAME.split("/")[-1]
    committed = {path for commit in hub.commits for path in commit.added}
    assert "README.md" in committed and f"build/{variant}/metadata.json" in committed
    assert any(p.startswith(f"build/{variant}/") and p.endswith(".so") for p in committed)

    # A source edited after the build: the variant is stale.
    source = root / f"{PACKAGE}_cpu" / f"{PACKAGE}_cpu.cpp"
    source.write_text(source.read_text() + "\n")
    os.utime(source, (source.stat().st_atime + 10, source.stat().st_mtime + 10))
    stale = run_cli("upload", root / "build.toml", "--dry-run")
    assert stale.returncode == 2
    assert f"build/{variant}/: {PACKAGE}_cpu/{PACKAGE}_cpu.cpp changed" in stale.stderr
    # build.toml's version moved on: the metadata no longer matches.
    toml = root / "build.toml"
    toml.write_text(toml.read_text().replace("version = 1", "version = 2"))
    stale = run_cli("upload", root / "build.toml", "--dry-run")
    assert stale.returncode == 2
    assert "metadata.json has version 1, build.toml says 2" in stale.stderr


@pytest.mark.compile
def test_build_strict_fails_on_a_kernel_abi_check_violation(tmp_path: Path) -> None:
    root = tmp_path / "add-one"
    init(root, "--backends", "cpu")
    source = root / f"{PACKAGE}_cpu" / f"{PACKAGE}_cpu.cpp"
    # PyUnicode_AsUTF8 joined the stable ABI in Python 3.10: an abi3 (cp39) wheel must not use it.
    source.write_text(
        source.read_text()
        + '\nextern "C" const char* PyUnicode_AsUTF8(void*);\n'
        + "const char* add_one_name(void* s) { return PyUnicode_AsUTF8(s); }\n"
    )
    lenient = run_cli("build", root / "build.toml", "--backend", "cpu")
    assert lenient.returncode == 0, lenient.stderr
    assert "not in the Python 3.9 stable ABI: PyUnicode_AsUTF8" in lenient.stdout
    strict = run_cli("build", root / "build.toml", "--backend", "cpu", "--strict")
    assert strict.returncode == 2
    assert "--strict" in strict.stderr and "PyUnicode_AsUTF8" in strict.stderr


@pytest.mark.compile
def test_wheel_ships_the_project_templates_and_init_works_from_it(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("build2cmake-*.whl")
    unpacked = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(unpacked)
    assert "build2cmake/_data/project_templates/gitignore.j2" in names
    assert "build2cmake/_data/project_templates/tests/__init__.py" in names
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from build2cmake.cli import main; sys.exit(main())",
         "init", "k", "--name", NAME, "--backends", "all"],
        capture_output=True, text=True, cwd=tmp_path, check=False,
        env={"PYTHONPATH": str(unpacked), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "k" / ".gitignore").is_file()
    assert load_project(tmp_path / "k" / "build.toml").hub_repo_id == NAME
