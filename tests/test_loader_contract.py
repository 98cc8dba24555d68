"""The `kernels` loader's contract, held where build2cmake decides (#49).

python-depends: build.toml is held to the installed kernels package's own list (else to the copy
build2cmake carries), so that nothing the loader refuses is built. metadata.json: every backend
build2cmake builds (cpu, cuda, rocm, tvm-ffi, noarch) is checked with kernels' OWN arch and
dependency checks (its functions, imported, not reimplemented), on the devices it targets and on
others, the device made by telling torch what kernels asks it.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from build2cmake.builds.builder import metadata_for
from build2cmake.config import load_project, loader_rules
from build2cmake.ground.errors import BuildConfigErrors
from tests.conftest import FIXTURES, REPO, requires_nvcc, requires_rocm_toolchain, run_cli

python_deps = pytest.importorskip("kernels.python_deps")
torch = pytest.importorskip("torch")

from kernels._rust import Metadata  # noqa: E402
from kernels.backends import CPU, CUDA, ROCm  # noqa: E402
from kernels.validate import ArchValidator  # noqa: E402
from packaging.version import Version  # noqa: E402

# kernels' own list, as the loader holds it in memory.
KERNELS_GENERAL = sorted(python_deps._DEPENDENCY_DATA.general)
KERNELS_BACKENDS = {b: sorted(d) for b, d in python_deps._DEPENDENCY_DATA.backends.items()}
LOADER_BACKENDS = {
    "cpu": CPU(),
    "cuda": CUDA(version=Version("13.0")),
    "rocm": ROCm(Version("6.4")),
}


def loader_verdict(name: str, depends: list[str], backend: str) -> str:
    """kernels' own dependency check of a variant's python-depends on `backend`: "accepted",
    or its refusals. Each name is checked alone: after accepting a name the loader checks that
    its package is installed here, and an ImportError for that (einops is not installed on
    every machine) would hide the names after it."""
    refusals = []
    for dependency in depends:
        try:
            python_deps.validate_dependencies(name, [dependency], LOADER_BACKENDS[backend])
        except ImportError as error:
            assert "requires Python dependency" in str(error), error
        except ValueError as error:
            assert "unsupported kernel dependency" in str(error), error
            refusals.append(str(error))
    return "; ".join(refusals) or "accepted"


@contextlib.contextmanager
def device(monkeypatch: pytest.MonkeyPatch, which: str) -> Iterator[None]:
    """torch reports one device, as kernels' arch check asks it: "cuda 9.0" or "rocm gfx942"
    (a ROCm device's arch with target features, as real devices report it)."""
    kind, arch = which.split()
    with monkeypatch.context() as patch:
        patch.setattr(torch.cuda, "is_available", lambda: True)
        if kind == "cuda":
            major, minor = (int(part) for part in arch.split("."))
            patch.setattr(torch.version, "cuda", "13.0")
            patch.setattr(torch.version, "hip", None)
            patch.setattr(torch.cuda, "get_device_capability", lambda device=None: (major, minor))
        else:
            patch.setattr(torch.version, "cuda", None)
            patch.setattr(torch.version, "hip", "6.4")
            patch.setattr(torch.cuda, "current_device", lambda: 0)
            properties = SimpleNamespace(gcnArchName=f"{arch}:sramecc+:xnack-")
            patch.setattr(torch.cuda, "get_device_properties", lambda device=None: properties)
        yield


def arch_accepted(monkeypatch: pytest.MonkeyPatch, variant: Path, which: str) -> bool:
    """Whether kernels' own arch check (the loader's ArchValidator) accepts the variant's
    metadata.json, read by kernels' own parser, on device `which`."""
    metadata = Metadata.read_from_file(variant / "metadata.json")
    with device(monkeypatch, which):
        try:
            ArchValidator().validate_metadata(metadata=metadata, variant=variant.name)
        except RuntimeError as error:
            assert "does not support the current device" in str(error), error
            return False
    return True


def write_project(root: Path, general: str, tail: str = "[torch-noarch]\n") -> Path:
    """A [torch-noarch]-style kernel project (nothing to compile) with this [general] text."""
    (root / "torch-ext" / "dep_kernel").mkdir(parents=True, exist_ok=True)
    (root / "torch-ext" / "dep_kernel" / "__init__.py").write_text("X = 1\n")
    (root / "build.toml").write_text(general + "\n" + tail)
    return root / "build.toml"


# The [general] of each format that has python-depends, with a [general.<backend>] table
# where the format has one.
GENERAL = {
    "edition 5": '[general]\nname = "dep-kernel"\nversion = 1\nedition = 5\nlicense = "MIT"\n'
    'backends = ["cpu", "cuda", "rocm", "xpu", "neuron", "tpu"]\n',
    "v4": '[general]\nname = "dep-kernel"\nversion = 1\nlicense = "MIT"\n'
    'backends = ["cpu", "cuda", "rocm", "xpu", "neuron"]\n',
    "v3": '[general]\nname = "dep-kernel"\nbackends = ["cpu", "cuda", "rocm", "xpu", "neuron"]\n'
    "universal = true\n",
}
BACKEND_TABLES = {"edition 5": ("cuda", "neuron", "tpu", "xpu"), "v4": ("cuda", "neuron", "xpu")}
BACKEND_TABLES["v3"] = BACKEND_TABLES["v4"]


def project_with(tmp_path: Path, form: str, general: list[str], **backends: list[str]) -> Path:
    text = GENERAL[form] + f"python-depends = {json.dumps(general)}\n"
    for backend, names in backends.items():
        text += f"[general.{backend}]\npython-depends = {json.dumps(names)}\n"
    return write_project(tmp_path / "kernel", text, "" if form == "v3" else "[torch-noarch]\n")


def refusal(build_toml: Path) -> list[str]:
    """The lines `build2cmake validate` prints for a refused build.toml (exit 2, no traceback)."""
    result = run_cli("validate", build_toml)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()


# -- python-depends held to kernels' list ------------------------------------------------------


def test_python_depends_numpy_is_refused_with_every_dependency_kernels_accepts(
    tmp_path: Path,
) -> None:
    build_toml = project_with(tmp_path, "edition 5", ["einops", "numpy"])
    (line,) = refusal(build_toml)
    assert line.startswith(f"build2cmake: error: {build_toml}: [general].python-depends[1]: ")
    assert "'numpy' is not a dependency kernels " in line
    for name in KERNELS_GENERAL:
        assert name in line.split("per backend")[0]
    for backend, names in KERNELS_BACKENDS.items():
        if names:
            assert f"{backend}: {names[0]}" in line.split("per backend")[1]
    assert "tvm-ffi (pip apache-tvm-ffi)" in line
    # The loader itself refuses what we refuse.
    assert "numpy" in loader_verdict("dep_kernel", ["numpy"], "cpu")


def test_einops_is_accepted_by_every_format_and_by_the_loader_on_every_backend(
    tmp_path: Path,
) -> None:
    for form in GENERAL:
        project = load_project(project_with(tmp_path / form, form, ["einops"]))
        assert project.python_depends == ("einops",), form
        for backend in LOADER_BACKENDS:
            depends = metadata_for(project, "_x", backend, [])["python-depends"]
            assert isinstance(depends, list) and depends == ["einops"]
            assert loader_verdict("dep_kernel", depends, backend) == "accepted"
    v2 = write_project(
        tmp_path / "v2" / "kernel",
        '[general]\nname = "dep-kernel"\nuniversal = true\npython-depends = ["einops"]\n',
        "",
    )
    assert load_project(v2).python_depends == ("einops",)


@pytest.mark.parametrize("form", ["edition 5", "v4", "v3"])
def test_nvidia_cutlass_dsl_is_accepted_for_cuda_only(tmp_path: Path, form: str) -> None:
    cutlass = "nvidia-cutlass-dsl"
    project = load_project(project_with(tmp_path, form, ["einops"], cuda=[cutlass]))
    assert project.source_format == form
    cuda = metadata_for(project, "_x", "cuda", ["9.0"])["python-depends"]
    assert cuda == ["einops", cutlass]
    assert loader_verdict("dep_kernel", cuda, "cuda") == "accepted"
    for backend in ("cpu", "rocm"):
        depends = metadata_for(project, "_x", backend, [])["python-depends"]
        assert depends == ["einops"]
        assert loader_verdict("dep_kernel", depends, backend) == "accepted"
        # Why it must stay in cuda's variant: the loader refuses it on any other backend.
        assert cutlass in loader_verdict("dep_kernel", cuda, backend)

    shutil.rmtree(tmp_path / "kernel")
    (line,) = refusal(project_with(tmp_path, form, [cutlass]))
    assert (
        f"[general].python-depends[0]: '{cutlass}' is a dependency kernels " in line
        and "accepts for cuda only; list it in [general.cuda].python-depends" in line
    )
    shutil.rmtree(tmp_path / "kernel")
    (line,) = refusal(project_with(tmp_path, form, [], xpu=[cutlass]))
    assert f"[general.xpu].python-depends[0]: '{cutlass}' is a dependency kernels " in line
    assert "for cuda only, not for xpu; list it in [general.cuda].python-depends" in line


def test_there_is_no_cpu_table_for_python_depends(tmp_path: Path) -> None:
    # kernels' cpu list is empty and no format has [general.cpu]: a cpu-only dependency cannot
    # be written, and [general] is checked against the names for every backend.
    lines = refusal(project_with(tmp_path, "edition 5", [], cpu=["nvidia-cutlass-dsl"]))
    assert any("[general].cpu: unknown key" in line for line in lines), lines


def test_a_dependency_for_every_backend_is_refused_in_a_backend_table(tmp_path: Path) -> None:
    (line,) = refusal(project_with(tmp_path, "edition 5", [], cuda=["einops"]))
    assert "[general.cuda].python-depends[0]: 'einops' is a dependency for every backend" in line
    assert line.endswith("list it in [general].python-depends")


def test_a_backend_without_a_list_in_kernels_accepts_no_dependency(tmp_path: Path) -> None:
    # kernels' list has no tpu table: kernel-builder and the loader know no tpu dependency.
    assert "tpu" not in KERNELS_BACKENDS
    (line,) = refusal(project_with(tmp_path, "edition 5", [], tpu=["jax"]))
    assert "[general.tpu].python-depends[0]: 'jax' is not a dependency kernels " in line
    assert "for tpu: none (its list has no tpu table)" in line


def test_every_dependency_kernels_lists_is_accepted_where_it_belongs(tmp_path: Path) -> None:
    for form, tables in BACKEND_TABLES.items():
        listed = {b: KERNELS_BACKENDS[b] for b in tables if KERNELS_BACKENDS.get(b)}
        build_toml = project_with(tmp_path / form, form, KERNELS_GENERAL, **listed)
        project = load_project(build_toml)
        assert project.python_depends == tuple(KERNELS_GENERAL)
        assert dict(project.backend_python_depends) == {b: tuple(n) for b, n in listed.items()}
        for backend in ("cuda", "cpu", "rocm"):
            depends = list(project.python_depends_for(backend))
            assert loader_verdict("dep_kernel", depends, backend) == "accepted"


def test_v2_reads_a_cuda_dependency_in_general_as_cudas_and_update_build_moves_it(
    tmp_path: Path,
) -> None:
    # kernel-builder's v2 took python-depends = ["einops", "nvidia-cutlass-dsl"] in [general]
    # (it had no per-backend tables); the loader accepts nvidia-cutlass-dsl for cuda only.
    root = tmp_path / "kernel"
    (root / "cpu").mkdir(parents=True)
    (root / "cpu" / "k.cpp").write_text("")
    (root / "torch-ext").mkdir()
    (root / "torch-ext" / "b.cpp").write_text("")
    (root / "build.toml").write_text(
        '[general]\nname = "dep-kernel"\nlicense = "MIT"\ncuda-minver = "12.0"\n'
        'python-depends = ["einops", "nvidia-cutlass-dsl"]  # kept\n\n'
        '[torch]\nsrc = ["torch-ext/b.cpp"]\n\n'
        '[kernel.k]\nbackend = "cpu"\ndepends = ["torch"]\nsrc = ["cpu/k.cpp"]\n'
    )
    project = load_project(root / "build.toml")
    assert project.source_format == "v2"
    assert project.python_depends == ("einops",)
    assert project.backend_python_depends == (("cuda", ("nvidia-cutlass-dsl",)),)
    assert metadata_for(project, "_x", "cpu", [])["python-depends"] == ["einops"]
    result = run_cli("update-build", root / "build.toml")
    assert result.returncode == 0, result.stderr
    rewritten = load_project(root / "build.toml")
    assert rewritten.source_format == "edition 5"
    assert rewritten.python_depends == ("einops",)
    assert rewritten.backend_python_depends == (("cuda", ("nvidia-cutlass-dsl",)),)
    assert 'python-depends = ["einops"]  # kept' in (root / "build.toml").read_text()
    with pytest.raises(BuildConfigErrors, match="'numpy' is not a dependency"):
        (root / "build.toml").write_text(
            '[general]\nname = "dep-kernel"\npython-depends = ["numpy"]\n\n'
            '[torch]\nsrc = ["torch-ext/b.cpp"]\n\n'
            '[kernel.k]\nbackend = "cpu"\ndepends = ["torch"]\nsrc = ["cpu/k.cpp"]\n'
        )
        load_project(root / "build.toml")


def test_wheel_requirements_are_the_pip_packages_the_names_stand_for() -> None:
    rules = loader_rules.python_dependencies()
    assert rules.pip_packages(["einops", "tvm-ffi"]) == ("einops", "apache-tvm-ffi")
    assert rules.pip_packages(["onednn"], "xpu") == ("onednn-devel",)
    assert rules.pip_packages(["nvidia-cutlass-dsl"], "cuda") == ("nvidia-cutlass-dsl",)


# -- which list: the installed kernels', else the carried copy ---------------------------------


def run_validate(build_toml: Path, *, prelude: str = "", pythonpath: Path | None = None) -> Any:
    """`build2cmake validate` in a fresh interpreter that first runs `prelude` (and finds
    `pythonpath` first on its path): the process whose kernels import is made to fail."""
    code = (
        f"{prelude}\nimport sys\nfrom build2cmake.cli import main\n"
        f"sys.exit(main(['validate', {str(build_toml)!r}]))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(pythonpath or ""), str(REPO)])),
    }
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd="/", env=env, check=False
    )


def test_the_carried_copy_is_used_when_kernels_cannot_be_imported(tmp_path: Path) -> None:
    numpy = project_with(tmp_path / "numpy", "edition 5", ["numpy"])
    einops = project_with(tmp_path / "einops", "edition 5", ["einops"], cuda=["nvidia-cutlass-dsl"])
    blocked = "import sys\nsys.modules['kernels'] = None"  # `import kernels` raises ImportError
    check = run_validate(tmp_path, prelude=blocked + "\nimport kernels")
    assert "ImportError" in check.stderr or "ModuleNotFoundError" in check.stderr
    refused = run_validate(numpy, prelude=blocked)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert "'numpy' is not a dependency kernels 0.17.2 accepts; " in line
    assert "einops, helion, tvm-ffi" in line
    assert line.endswith("(build2cmake's copy of kernels' list: kernels is not importable here)")
    accepted = run_validate(einops, prelude=blocked)
    assert accepted.returncode == 0, accepted.stderr

    # A kernels whose import fails (a broken install) and that has no list: the copy too.
    fake = tmp_path / "path" / "kernels"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('broken kernels')\n")
    refused = run_validate(numpy, pythonpath=fake.parent)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert f"({fake}) has no python_depends.json)" in refused.stderr
    assert run_validate(einops, pythonpath=fake.parent).returncode == 0


def test_a_folder_named_kernels_is_no_kernels_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A folder named kernels without __init__.py on the path (this repository's own kernels/,
    # from its root, where kernels is not installed) is what import finds: a namespace package.
    (tmp_path / "kernels").mkdir()
    spec = importlib.machinery.PathFinder.find_spec("kernels", [str(tmp_path)])
    assert spec is not None and spec.submodule_search_locations is not None
    monkeypatch.setattr(loader_rules, "find_spec", lambda name: spec)
    assert loader_rules.installed_list() == "kernels is not importable here"


def test_the_installed_list_is_the_one_build_toml_is_held_to(tmp_path: Path) -> None:
    fake = tmp_path / "path" / "kernels"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "python_depends.json").write_text(
        json.dumps({"general": {"numpy": {"python": [{"pkg": "numpy"}]}}, "backends": {}})
    )
    numpy = project_with(tmp_path / "numpy", "edition 5", ["numpy"])
    assert run_validate(numpy, pythonpath=fake.parent).returncode == 0
    einops = project_with(tmp_path / "einops", "edition 5", ["einops"])
    refused = run_validate(einops, pythonpath=fake.parent)
    assert refused.returncode == 2, refused.stderr
    # Not the distribution's release: this package is not the one pip recorded.
    assert "'einops' is not a dependency kernels (release unknown) accepts" in refused.stderr


HOSTILE_LISTS = {
    "too big": b'{"general": {}, "pad": "' + b"x" * (loader_rules.LIST_LIMIT_BYTES + 1) + b'"}',
    "nested too deep": b"[" * 30_000 + b"]" * 30_000,
    "not an object": b"[]",
    "wrong types": b'{"general": ["einops"]}',
    "escape sequence in a name": json.dumps({"general": {"\x1b[31mnumpy": {}}}).encode(),
    "not UTF-8": b'{"general": {"\xff": {}}}',
    "bad package": json.dumps({"general": {"numpy": {"python": [{"pkg": "a b"}]}}}).encode(),
    "too many names": json.dumps(
        {"general": {f"n{i}": {} for i in range(loader_rules.NAMES_LIMIT + 1)}}
    ).encode(),
}


def test_a_broken_installed_list_falls_back_to_the_carried_copy_without_traceback(
    tmp_path: Path,
) -> None:
    numpy = project_with(tmp_path / "numpy", "edition 5", ["numpy"])
    einops = project_with(tmp_path / "einops", "edition 5", ["einops"])
    cases: dict[str, Path] = {}
    for case, content in HOSTILE_LISTS.items():
        fake = tmp_path / case.replace(" ", "-") / "kernels"
        fake.mkdir(parents=True)
        (fake / "python_depends.json").write_bytes(content)
        cases[case] = fake
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"general": {"numpy": {}}}))
    for case in ("symlink out of the package", "fifo"):
        cases[case] = tmp_path / case.replace(" ", "-") / "kernels"
        cases[case].mkdir(parents=True)
    (cases["symlink out of the package"] / "python_depends.json").symlink_to(outside)
    os.mkfifo(cases["fifo"] / "python_depends.json")
    for case, fake in cases.items():
        (fake / "__init__.py").write_text("")
        refused = run_validate(numpy, pythonpath=fake.parent)
        assert refused.returncode == 2, (case, refused.stderr)
        assert "Traceback" not in refused.stderr and "\x1b" not in refused.stderr, case
        (line,) = refused.stderr.strip().splitlines()
        assert line.startswith(f"build2cmake: error: {numpy}: [general].python-depends[0]: ")
        assert "'numpy' is not a dependency kernels 0.17.2 accepts; " in line, (case, line)
        note = "(build2cmake's copy of kernels' list: the installed kernels' list is unusable: "
        assert f"{note}{fake / 'python_depends.json'}: " in line, (case, line)
        assert run_validate(einops, pythonpath=fake.parent).returncode == 0, case


def test_the_carried_copy_names_its_source_and_matches_the_installed_kernels() -> None:
    data = json.loads(loader_rules.CARRIED_LIST.read_text())
    provenance = data["provenance"]
    assert (
        provenance["kernels-release"] and "huggingface/kernels commit " in provenance["copied-from"]
    )
    assert "2026-11-28" in provenance["copied"]
    carried = loader_rules.carried_list("test")
    installed = loader_rules.installed_list()
    assert isinstance(installed, loader_rules.PythonDependencies), installed
    if installed.origin != f"kernels {provenance['kernels-release']}":
        pytest.skip(f"{installed.origin} is installed; the copy is of another release")
    assert dict(carried.general) == dict(installed.general)
    assert {b: dict(n) for b, n in carried.backends.items()} == {
        b: dict(n) for b, n in installed.backends.items()
    }
    assert sorted(installed.general) == KERNELS_GENERAL


# -- metadata.json of every backend, through kernels' own checks -------------------------------


def build(build_toml: Path, *args: str) -> Path:
    """`build2cmake build`; the variant folder it reports."""
    result = run_cli("build", build_toml, *args)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    line = result.stdout.strip().splitlines()[-1]
    assert line.startswith("built "), line
    return build_toml.parent / line.split()[1]


def build_noarch(tmp_path: Path, backend: str, archs_key: str, archs: list[str]) -> Path:
    build_toml = write_project(
        tmp_path / "noarch",
        '[general]\nname = "dep-kernel"\nversion = 1\nedition = 5\nlicense = "MIT"\n'
        'backends = ["cpu", "cuda", "rocm"]\npython-depends = ["einops"]\n'
        '[general.cuda]\npython-depends = ["nvidia-cutlass-dsl"]\n',
        f"[torch-noarch]\n{archs_key} = {json.dumps(archs)}\n",
    )
    return build(build_toml, "--backend", backend)


@pytest.mark.parametrize(
    ("archs", "accepted", "refused"),
    [
        (["9.0a"], ["cuda 9.0"], ["cuda 8.0", "cuda 10.0", "cuda 12.0"]),
        (["10.0f"], ["cuda 10.0", "cuda 10.3"], ["cuda 9.0", "cuda 12.0"]),
        (["8.0", "9.0+PTX"], ["cuda 8.0", "cuda 8.6", "cuda 9.0", "cuda 12.0"], ["cuda 7.5"]),
    ],
)
def test_noarch_cuda_metadata_passes_kernels_arch_check_on_its_devices_only(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    archs: list[str],
    accepted: list[str],
    refused: list[str],
) -> None:
    variant = build_noarch(tmp_path, "cuda", "cuda-capabilities", archs)
    assert variant.name == "torch-cuda"
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["backend"] == {"type": "cuda", "archs": archs}
    assert loader_verdict("dep-kernel", metadata["python-depends"], "cuda") == "accepted"
    assert "nvidia-cutlass-dsl" in loader_verdict("dep-kernel", metadata["python-depends"], "rocm")
    for which in accepted:
        assert arch_accepted(monkeypatch, variant, which), which
    for which in refused:
        assert not arch_accepted(monkeypatch, variant, which), which


def test_noarch_rocm_metadata_declares_archs_as_kernels_compares_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rocm-archs may carry target features; kernels compares the device's arch without them,
    # so metadata.json declares the processor alone (with the features, no device matched).
    variant = build_noarch(
        tmp_path, "rocm", "rocm-archs", ["gfx942:sramecc+:xnack-", "gfx942", "gfx90a:xnack+"]
    )
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["backend"] == {"type": "rocm", "archs": ["gfx942", "gfx90a"]}
    assert metadata["python-depends"] == ["einops"]
    assert loader_verdict("dep-kernel", metadata["python-depends"], "rocm") == "accepted"
    assert arch_accepted(monkeypatch, variant, "rocm gfx942")
    assert arch_accepted(monkeypatch, variant, "rocm gfx90a")
    assert not arch_accepted(monkeypatch, variant, "rocm gfx1100")
    assert not arch_accepted(monkeypatch, variant, "rocm gfx950")
    # Declared as written, the loader would refuse the very device the build.toml names.
    metadata["backend"]["archs"] = ["gfx942:sramecc+:xnack-"]
    (variant / "metadata.json").write_text(json.dumps(metadata))
    assert not arch_accepted(monkeypatch, variant, "rocm gfx942")


def test_noarch_cpu_and_universal_metadata_pass_kernels_checks_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    variant = build_noarch(tmp_path, "cpu", "cuda-capabilities", ["9.0a"])
    universal = build(
        write_project(
            tmp_path / "universal",
            '[general]\nname = "dep-kernel"\nuniversal = true\nversion = 1\n'
            'python-depends = ["einops", "tvm-ffi"]\n',
            "",
        )
    )
    assert universal.name == "torch-universal"
    for built in (variant, universal):
        metadata = json.loads((built / "metadata.json").read_text())
        assert "archs" not in metadata["backend"]
        for backend in LOADER_BACKENDS:
            assert loader_verdict("dep-kernel", metadata["python-depends"], backend) == "accepted"
        for which in ("cuda 7.5", "cuda 12.0", "rocm gfx1100"):
            assert arch_accepted(monkeypatch, built, which)


# Compiled variants: each built once per module (copies of the fixtures with python-depends).


@pytest.fixture(scope="module")
def scale_add(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("loader") / "scale_add"
    shutil.copytree(FIXTURES / "scale_add", root)
    text = (root / "build.toml").read_text()
    text = text.replace(
        "version = 1\n",
        'version = 1\npython-depends = ["einops"]\n\n'
        '[general.cuda]\npython-depends = ["nvidia-cutlass-dsl"]\n',
        1,
    )
    (root / "build.toml").write_text(text)
    return root / "build.toml"


@pytest.fixture(scope="module")
def relu_tvm_ffi(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("loader") / "relu_tvm_ffi"
    shutil.copytree(FIXTURES / "relu_tvm_ffi", root)
    text = (root / "build.toml").read_text()
    text = text.replace(
        'backends = ["cpu", "cuda"]\n', 'backends = ["cpu", "cuda"]\npython-depends = ["tvm-ffi"]\n'
    )
    (root / "build.toml").write_text(text)
    return root / "build.toml"


_BUILT: dict[tuple[Path, str], Path] = {}


def built(build_toml: Path, backend: str) -> Path:
    """The variant of `backend`, built the first time a test asks for it."""
    if (build_toml, backend) not in _BUILT:
        _BUILT[build_toml, backend] = build(build_toml, "--backend", backend, "-j", "2")
    return _BUILT[build_toml, backend]


def check_compiled(
    monkeypatch: pytest.MonkeyPatch,
    variant: Path,
    backend: str,
    depends: list[str],
    accepted: list[str],
    refused: list[str],
) -> None:
    metadata = Metadata.read_from_file(variant / "metadata.json")
    assert list(metadata.python_depends) == depends
    assert loader_verdict(str(metadata.name), depends, backend) == "accepted"
    for which in accepted:
        assert arch_accepted(monkeypatch, variant, which), which
    for which in refused:
        assert not arch_accepted(monkeypatch, variant, which), which


@pytest.mark.compile
def test_compiled_cpu_metadata_passes_kernels_checks(
    scale_add: Path, relu_tvm_ffi: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for build_toml, depends in ((scale_add, ["einops"]), (relu_tvm_ffi, ["tvm-ffi"])):
        variant = built(build_toml, "cpu")
        assert json.loads((variant / "metadata.json").read_text())["backend"] == {"type": "cpu"}
        check_compiled(monkeypatch, variant, "cpu", depends, ["cuda 9.0", "rocm gfx942"], [])


@pytest.mark.compile
@pytest.mark.cuda
@requires_nvcc
def test_compiled_cuda_metadata_passes_kernels_checks_on_its_devices_only(
    scale_add: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ops_cuda: cuda-capabilities = ["8.0+PTX", "9.0a"]: SASS for 8.0 and 9.0a, PTX of 8.0.
    variant = built(scale_add, "cuda")
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["backend"] == {"type": "cuda", "archs": ["8.0+PTX", "9.0a"]}
    check_compiled(
        monkeypatch,
        variant,
        "cuda",
        ["einops", "nvidia-cutlass-dsl"],
        ["cuda 8.0", "cuda 8.6", "cuda 9.0", "cuda 10.0", "cuda 12.0"],
        ["cuda 7.5"],
    )
    assert "nvidia-cutlass-dsl" in loader_verdict("scale-add", metadata["python-depends"], "cpu")


@pytest.mark.compile
@pytest.mark.cuda
@requires_nvcc
def test_compiled_tvm_ffi_cuda_metadata_passes_kernels_checks_on_its_devices_only(
    relu_tvm_ffi: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # relu_cuda: cuda-capabilities = ["8.0", "9.0"], no PTX: each runs on its own major only.
    variant = built(relu_tvm_ffi, "cuda")
    assert json.loads((variant / "metadata.json").read_text())["backend"]["archs"] == ["8.0", "9.0"]
    check_compiled(
        monkeypatch,
        variant,
        "cuda",
        ["tvm-ffi"],
        ["cuda 8.0", "cuda 8.9", "cuda 9.0"],
        ["cuda 7.5", "cuda 10.0", "cuda 12.0"],
    )


@pytest.mark.compile
@pytest.mark.rocm
@requires_rocm_toolchain
def test_compiled_rocm_metadata_passes_kernels_checks_on_its_devices_only(
    scale_add: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    variant = built(scale_add, "rocm")
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["backend"] == {"type": "rocm", "archs": ["gfx90a", "gfx940"]}
    check_compiled(
        monkeypatch,
        variant,
        "rocm",
        ["einops"],
        ["rocm gfx90a", "rocm gfx940"],
        ["rocm gfx942", "rocm gfx1100"],
    )


def test_generated_requirements_name_the_pip_packages_and_metadata_the_loader_names(
    tmp_path: Path,
) -> None:
    """build.toml's `tvm-ffi` is the pip package `apache-tvm-ffi` (the loader's list says so): the
    generated pyproject.toml requires the package, as kernel-builder's wheels do, while
    metadata.json keeps the name the loader checks."""
    build_toml = write_project(
        tmp_path / "kernel",
        GENERAL["edition 5"] + 'python-depends = ["tvm-ffi", "einops"]\n',
    )
    result = run_cli("generate-torch", build_toml)
    assert result.returncode == 0, result.stderr
    pyproject = (build_toml.parent / "pyproject.toml").read_text()
    assert '"apache-tvm-ffi"' in pyproject and '"einops"' in pyproject, pyproject
    assert '"tvm-ffi"' not in pyproject, pyproject
    project = load_project(build_toml)
    depends = metadata_for(project, "_x", "cpu", [])["python-depends"]
    assert depends == ["tvm-ffi", "einops"]
