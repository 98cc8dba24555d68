"""What may be read: files of the project, as regular files, bounded in size, depth and time.

Records and metadata.json that are FIFOs, devices, folders or huge; a build.toml that costs the
TOML parser minutes; include folders, build folders and package trees too deep or with names that
are not UTF-8; package Python too deep for the parser; headers, cards, git folders and files of
build/ planted as links or FIFOs; the rebuild note the generated `_ops.py` prints. Each is one
clear error or passed over, never a hang, a traceback, a read outside the project or a byte of
it sent to the Hub. Each test plants what a stranger's clone can hold next to a sentinel tree
that must stay byte-identical; every hang case runs under a time limit.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from build2cmake.api import generate_torch
from build2cmake.config import load_project
from build2cmake.generate.fileset import MANIFEST_NAME
from build2cmake.ground.errors import Build2CMakeError
from build2cmake.ground.safefs import RECORD_LIMIT_BYTES, read_regular_file
from tests.conftest import FIXTURES, requires_rocm_toolchain
from tests.hub_standin import StandInHub
from tests.security import (
    Scene,
    assert_one_user_error,
    cli,
    load_provider,
    make_universal,
    state,
)
from tests.test_upload import REPO_ID, _cli

# test_upload's fixtures, by name (request.getfixturevalue): a built project and the stand-in.
from tests.test_upload import hub as hub
from tests.test_upload import project as project

# Records build2cmake wrote, read back: the manifest, the variants record --------------------------


VARIANTS = "build/.build2cmake-variants.json"


def plant(path: Path, kind: str, sentinel: Path) -> None:
    """Put a hostile non-file at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    elif kind == "outside-link":
        path.symlink_to(sentinel / "precious.txt")
    elif kind == "huge":
        with open(path, "wb") as f:
            f.truncate(RECORD_LIMIT_BYTES + 1)  # sparse: costs no disk


@pytest.mark.parametrize("kind", ["fifo", "zero", "folder", "outside-link", "huge"])
def test_hostile_manifest_is_one_error_without_hanging(scene: Scene, kind: str) -> None:
    plant(scene.project / MANIFEST_NAME, kind, scene.sentinel)
    before = state(scene.project)
    for command in ("clean", "generate-torch"):
        result = cli(command, scene.build_toml, timeout=30)  # a hang fails here
        assert_one_user_error(result, MANIFEST_NAME)
        if kind == "huge":
            assert f"the limit is {RECORD_LIMIT_BYTES} bytes" in result.stderr
        assert state(scene.project) == before  # refused before any write
    scene.assert_sentinel_untouched()


@pytest.mark.parametrize("kind", ["fifo", "zero", "folder", "outside-link", "huge"])
def test_hostile_variants_record_is_ignored_with_a_warning(scene: Scene, kind: str) -> None:
    generate_torch(scene.build_toml)
    plant(scene.project / VARIANTS, kind, scene.sentinel)
    result = cli("clean", scene.build_toml, timeout=30)
    assert result.returncode == 0, result.stderr
    assert "warning: ignoring the variants record" in result.stderr
    scene.assert_sentinel_untouched()
    assert not (scene.project / "CMakeLists.txt").exists()


def test_read_regular_file_refuses_what_is_not_a_small_regular_file(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    outside = tmp_path / "secret"
    outside.write_text("secret")
    (project / "ok").write_bytes(b"x" * 10)
    (project / "inside-link").symlink_to("ok")
    (project / "outside-link").symlink_to(outside)
    os.mkfifo(project / "fifo")
    (project / "folder").mkdir()
    assert read_regular_file(project / "ok", 10, "build.toml") == b"x" * 10
    assert read_regular_file(project / "inside-link", 10, "build.toml") == b"x" * 10
    cases = {
        "ok": ("limit is 9 bytes", 9),
        "outside-link": ("outside", 100),
        "fifo": ("a FIFO", 100),
        "folder": ("a folder", 100),
        "missing": ("cannot read build.toml", 100),
    }
    for name, (message, limit) in cases.items():
        with pytest.raises(Build2CMakeError, match=message) as caught:
            read_regular_file(project / name, limit, "build.toml")
        assert str(caught.value).startswith(str(project / name))
    with pytest.raises(Build2CMakeError, match="a device"):
        read_regular_file(Path("/dev/zero"), 100, "build.toml", root=Path("/dev"))
    with pytest.raises(Build2CMakeError, match="cannot read"):
        read_regular_file(project / "a\0b", 100, "build.toml")


def test_a_manifest_of_a_wrong_shape_is_not_a_traceback(scene: Scene) -> None:
    for content in ("[]", '{"files": null}', "nul\0l", "{" * 100000, json.dumps({"files": []})):
        (scene.project / MANIFEST_NAME).write_text(content)
        result = cli("clean", scene.build_toml)
        assert_one_user_error(result, "unreadable")


# build.toml, its sources and include folders ------------------------------------------------------


@pytest.mark.usefixtures("own_key_folder")
def test_a_fifo_listed_as_a_source_is_one_error_not_a_hang(scene: Scene) -> None:
    source = scene.project / "cpu" / "ops_cpu.cpp"
    source.unlink()
    os.mkfifo(source)
    for command in ("validate", "generate-torch"):
        result = cli(command, scene.build_toml, timeout=20)
        assert_one_user_error(result, "[kernel.ops_cpu].src[0]", "is not a regular file")


def dotted_keys_build_toml(scene: Scene, keys: int = 400, depth: int = 20) -> None:
    """31 KB of long dotted keys: tomlkit took 244 s over it."""
    text = scene.build_toml.read_text()
    lines = [".".join(f"k{j}" for j in range(depth)) + f".x{i} = 1" for i in range(keys)]
    scene.build_toml.write_text(text.replace("[torch]", "[general.extra]\n" + "\n".join(lines)
                                             + "\n\n[torch]", 1))  # fmt: skip


@pytest.mark.usefixtures("own_key_folder")
def test_a_build_toml_of_dotted_keys_is_read_in_seconds(scene: Scene) -> None:
    dotted_keys_build_toml(scene)
    start = time.monotonic()
    result = cli("validate", scene.build_toml, timeout=30)
    assert result.returncode == 2, result.stderr
    assert "extra" in result.stderr and "Traceback" not in result.stderr
    assert time.monotonic() - start < 30


@pytest.mark.usefixtures("own_key_folder")
def test_update_build_refuses_a_build_toml_of_dotted_keys_in_seconds(scene: Scene) -> None:
    """A valid file may spell its kernels as dotted keys (kernel.k0.src = ...): 300 kernels so
    spelled (29 KB) took tomlkit, with which update-build keeps comments, 127 s. It is refused
    before tomlkit reads it; validate and generate read it with tomllib, in well under a second."""
    lines = []
    for i in range(300):
        lines += [f'kernel.k{i}.backend = "cpu"', f'kernel.k{i}.depends = ["torch"]',
                  f'kernel.k{i}.src = ["cpu/ops_cpu.cpp"]']  # fmt: skip
    lines += ["[general]", 'name = "scale-add"', "[torch]",
              'src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]']  # fmt: skip
    scene.build_toml.write_text("\n".join(lines) + "\n")
    start = time.monotonic()
    assert cli("validate", scene.build_toml, timeout=30).returncode == 0
    result = cli("update-build", scene.build_toml, timeout=30)
    assert_one_user_error(result, "900 dotted keys", "more than 64")
    assert time.monotonic() - start < 30


@pytest.mark.usefixtures("own_key_folder")
def test_a_name_that_is_not_utf8_in_an_include_folder_is_hashed_not_a_crash(scene: Scene) -> None:
    """The ops id hashes every header under `include` folders by name and content."""
    hip = os.fsencode(scene.project / "hip")
    with open(os.path.join(hip, b"odd-\xff.h"), "wb") as header:
        header.write(b"// a header\n")
    result = cli("generate-torch", scene.build_toml, timeout=60)
    assert result.returncode == 0, result.stderr


def deep_tree(top: Path, depth: int) -> None:
    """`top`/d/d/... `depth` levels deep, made by descriptor one level at a time (the path
    soon exceeds PATH_MAX)."""
    top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


@pytest.fixture
def deep_cleanup(scene: Scene) -> Iterator[None]:
    yield
    subprocess.run(["rm", "-rf", str(scene.project)], check=True, timeout=120)


@pytest.mark.usefixtures("own_key_folder")
@pytest.mark.parametrize("depth", [40, 1100])
def test_an_include_folder_too_deep_is_one_error_not_a_crash(
    scene: Scene, depth: int, deep_cleanup: None
) -> None:
    deep_tree(scene.project / "hip", depth)
    result = cli("generate-torch", scene.build_toml, timeout=60)
    assert_one_user_error(result, "nests more than 32 folders")


@pytest.mark.usefixtures("own_key_folder")
def test_a_build_folder_too_deep_is_one_error_everywhere(scene: Scene, deep_cleanup: None) -> None:
    """Walks of build folders are bounded: a planted tree 1100 levels deep is one error from
    generate, build and the pip hook, never a RecursionError; clean's removal is iterative, so
    it removes the whole tree with the generated files (it used to remove those, then stop at
    the tree: a half-clean project)."""
    generate_torch(scene.build_toml)
    deep_tree(scene.project / "build" / "cmake", 1100)
    for command in ("generate-torch", "build"):
        result = cli(command, scene.build_toml, timeout=60)
        assert_one_user_error(result, "more than 64 levels deep")
    loaded = load_provider(scene.project)
    assert loaded.returncode != 0
    assert "is a folder more than 64 levels deep" in loaded.stderr
    assert "RecursionError" not in loaded.stderr
    cleaned = cli("clean", scene.build_toml, timeout=60)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert not (scene.project / "build" / "cmake").exists()
    assert not (scene.project / "CMakeLists.txt").exists()


@requires_rocm_toolchain
@pytest.mark.rocm
@pytest.mark.compile
def test_configure_scan_of_includes_reads_no_device_fifo_or_file_outside(scene: Scene) -> None:
    """The configure-time scan for ROCm libraries reads the headers a kernel's sources include
    (whether or not the preprocessor skips the include). It took "inside the project" from the
    path's spelling: a header linked to /dev/zero made the configure read forever, a FIFO
    blocked it, and one linked to a file outside the project was read (its includes named in a
    warning). The compiler reads none of them: they sit in a skipped #if 0 branch."""
    root = scene.project.parent / "rocm_libs"
    shutil.copytree(FIXTURES / "rocm_libs", root)
    folder = root / "wmma_info"
    outside = scene.sentinel / "outside.h"
    outside.write_text("#include <hipcub/hipcub.hpp>\n")
    scene.before = state(scene.sentinel)
    (folder / "zero.h").symlink_to("/dev/zero")
    os.mkfifo(folder / "fifo.h")
    (folder / "outside.h").symlink_to(outside)
    source = folder / "wmma_info.hip"
    source.write_text(
        '#if 0\n#include "fifo.h"\n#include "zero.h"\n#include "outside.h"\n#endif\n'
        + source.read_text()
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HIP_PATH", "ROCM_PATH", "CPATH")}
    # A session of its own: on a hang, the blocked CMake is killed with it.
    with subprocess.Popen(
        [sys.executable, "-m", "build2cmake", "build", "build.toml", "--backend", "rocm"],
        cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    ) as process:  # fmt: skip
        try:
            stdout, stderr = process.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            pytest.fail("the configure hung reading a planted header")
    result = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    said = " ".join((result.stdout + result.stderr).split())
    assert "Traceback" not in result.stderr
    assert "configure" in said or "CMake" in said, said[-2000:]  # it got to the configure
    assert "outside.h includes" not in said and "(hipCUB)" not in said, said[-3000:]
    scene.assert_sentinel_untouched()


@pytest.mark.parametrize("name", ["win\\dows.h", "nul\x00.h"])
def test_gpu_header_scan_passes_over_an_include_that_names_no_project_path(
    scene: Scene, name: str
) -> None:
    """The check that a stand-in torch can build a ROCm kernel follows the project headers its
    sources include. An include naming no path of the project (a backslash, a NUL) made the
    project folder refuse the lookup, and that refusal became the variant's error ("not a
    normalized path inside the project") instead of the include being passed over as the
    compiler's business."""
    from build2cmake.builds.variant_builds import gpu_torch_includes

    project = load_project(scene.build_toml)
    kernel = project.kernels_for("rocm")[0]
    source = scene.project / kernel.sources[0]
    (source.parent / "gpu.h").write_text("#include <ATen/hip/HIPContext.h>\n")
    source.write_text(f'#if 0\n#include "{name}"\n#endif\n#include "gpu.h"\n' + source.read_text())
    found = gpu_torch_includes(project, scene.project)
    header = (kernel.sources[0].parent / "gpu.h").as_posix()
    assert (header, "ATen/hip/HIPContext.h") in found, found


# The package, the card and the built variant: build, upload, test ---------------------------------


def test_build_does_not_ship_a_package_file_linked_from_outside(scene: Scene) -> None:
    package = make_universal(scene)
    (package / "secret.py").symlink_to(scene.sentinel / "precious.txt")
    result = cli("build", scene.build_toml)
    assert_one_user_error(result, "secret.py", "outside")
    assert not (scene.project / "build" / "torch-universal").exists()
    scene.assert_sentinel_untouched()


@pytest.mark.parametrize(
    "source",
    [
        "x = " + "-" * 200_000 + "1\n",  # MemoryError in Python's parser
        "x = 1" + " + 1" * 300_000 + "\n",  # RecursionError building the AST
    ],
    ids=["unary-chain", "binop-chain"],
)
def test_package_python_too_deep_for_the_parser_is_one_error(scene: Scene, source: str) -> None:
    package = make_universal(scene)
    (package / "deep.py").write_text(source)
    result = cli("build", scene.build_toml)
    assert_one_user_error(result, "deep.py", "nest too deeply")
    assert not (scene.project / "build" / "torch-universal").exists()


def test_package_python_files_are_read_bounded(scene: Scene) -> None:
    package = make_universal(scene)
    with open(package / "huge.py", "wb") as f:
        f.truncate(1 << 40)
    result = cli("build", scene.build_toml, timeout=30)
    assert_one_user_error(result, "huge.py", "limit")


def test_a_deep_package_tree_is_one_error(scene: Scene) -> None:
    package = make_universal(scene)
    deep = package
    for _ in range(200):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "x.py").write_text("X = 1\n")
    result = cli("build", scene.build_toml, timeout=60)
    assert_one_user_error(result, "nests deeper than")


def assert_no_crash(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode in (0, 2), (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


def test_non_utf8_names_in_the_package_never_crash(scene: Scene) -> None:
    package = make_universal(scene)
    os.close(os.open(os.fsencode(package) + b"/\xff\x1b[2J.py", os.O_CREAT | os.O_WRONLY))
    result = cli("build", scene.build_toml)
    assert_no_crash(result)
    assert "\x1b" not in result.stdout + result.stderr
    scene.assert_sentinel_untouched()


def test_build_with_a_card_that_links_to_itself_is_one_error(scene: Scene) -> None:
    """A CARD.md symlink loop: pathlib's resolve() raises RuntimeError before Python 3.13, which
    reached the user as `build2cmake: internal error` (exit 3)."""
    make_universal(scene)
    (scene.project / "CARD.md").symlink_to("CARD.md")
    result = cli("build", scene.build_toml, timeout=120)
    assert_one_user_error(result, "CARD.md")
    scene.assert_sentinel_untouched()


def _built_universal(scene: Scene) -> Path:
    make_universal(scene)
    result = cli("build", scene.build_toml)
    assert result.returncode == 0, result.stderr
    return scene.project / "build" / "torch-universal" / "metadata.json"


@pytest.mark.parametrize("attack", ["deep", "sparse", "fifo"])
def test_hostile_metadata_json_is_one_error_for_upload_and_test(scene: Scene, attack: str) -> None:
    metadata = _built_universal(scene)
    metadata.unlink()
    if attack == "deep":
        metadata.write_text("[" * 200_000)
    elif attack == "sparse":
        with open(metadata, "wb") as f:
            f.truncate(1 << 40)
    else:
        os.mkfifo(metadata)
    for args in (("upload", "--dry-run", "--repo-id", "me/uni"), ("test", "--variant", "x")):
        result = cli(args[0], scene.build_toml, *args[1:], timeout=30)
        assert_one_user_error(result, "metadata.json")
    scene.assert_sentinel_untouched()


def test_upload_sends_no_file_reached_through_a_symlink(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Upload to the local Hub STAND-IN (tests/hub_standin.py) of a built project where the clone
    planted symlinks to a secret outside it: in build/<variant>/ (a file and a folder), as
    benchmarks/benchmark_*.py, as build/CARD.md and build/README.md (the card's place before
    2026-11-28) and under a name with a line break. The secret's
    bytes reach the stand-in nowhere; the dry run lists no linked file, one line per file."""
    secret_folder = tmp_path / "secret"
    secret_folder.mkdir()
    secret = b"hf_SECRET_TOKEN_never_uploaded\n"
    (secret_folder / "token").write_bytes(secret)
    root: Path = request.getfixturevalue("project")  # test_upload's built noarch project
    hub: StandInHub = request.getfixturevalue("hub")
    variant = root / "build" / "torch-cpu"
    (variant / "token.py").symlink_to(secret_folder / "token")
    (variant / "linked").symlink_to(secret_folder)
    (variant / "line\nbreak.py").symlink_to(secret_folder / "token")
    (root / "benchmarks" / "benchmark_token.py").symlink_to(secret_folder / "token")
    (root / "build" / "CARD.md").unlink()
    (root / "build" / "CARD.md").symlink_to(secret_folder / "token")
    (root / "build" / "README.md").symlink_to(secret_folder / "token")

    dry = _cli(root, "upload", "--dry-run", hub=hub)
    result = _cli(root, "upload", hub=hub)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "token" not in dry.stdout and "linked" not in dry.stdout and "CARD" not in dry.stdout
    assert "README" not in dry.stdout
    assert all(line.startswith(("create-", "add ", "delete ", "dry run")) for line in
               dry.stdout.splitlines()), dry.stdout  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    sent = {path: data for commit in hub.commits for path, data in commit.added.items()}
    assert sent and REPO_ID
    assert all(secret not in data for data in sent.values()), sorted(sent)
    assert not any("token" in path or "linked" in path for path in sent), sorted(sent)


# The checkout's git folder (provenance) and the generated `_ops.py`'s rebuild note ----------------


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    command = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args]
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_provenance_is_not_taken_from_a_bare_repository_planted_in_the_project(
    tmp_path: Path,
) -> None:
    """A clone can commit the files of a bare repository (HEAD, config, objects/, refs/) into
    the kernel's folder; git run there takes that folder for the repository. metadata.json then
    recorded the commit (and clean state) the planted repository names, not the checkout's:
    a stranger's pull request could claim any commit as its provenance. The user's own
    safe.bareRepository setting, which refuses such repositories, was dropped with the rest of
    the user's configuration."""
    from build2cmake.builds.provenance import kernel_git_status

    other = tmp_path / "other"
    other.mkdir()
    _git(other, "init", "-q")
    (other / "f").write_text("x\n")
    _git(other, "add", "f")
    _git(other, "commit", "-qm", "claimed")
    claimed = _git(other, "rev-parse", "HEAD")

    checkout = tmp_path / "checkout"
    project = checkout / "kernel"
    shutil.copytree(FIXTURES / "scale_add", project)
    _git(checkout, "init", "-q")
    _git(checkout, "add", ".")
    _git(checkout, "commit", "-qm", "real")
    real = _git(checkout, "rev-parse", "HEAD")
    # The planted repository: the other one's git folder, as files of the kernel's folder,
    # with its work tree set to the kernel's folder and an index matching nothing there.
    for entry in (other / ".git").iterdir():
        target = project / entry.name
        if entry.is_dir():
            shutil.copytree(entry, target)
        else:
            shutil.copy2(entry, target)
    with (project / "config").open("a") as config:
        config.write("[core]\n\tbare = false\n\tworktree = .\n")
    (project / "build.toml").write_text((project / "build.toml").read_text() + "# edited\n")

    status = kernel_git_status(project)
    assert status is None or status["commit"] == real, (status, claimed, real)
    assert status is None or status["dirty"] is True


_IMPORT_OPS = """
import pathlib, runpy, sys
path = pathlib.Path(sys.argv[1])
source = path.read_text().replace("_NAMESPACE = _load_extension()",
                                  "_NAMESPACE = next(iter(_EXTENSIONS))")
code = compile(source, str(path), "exec")
exec(code, {"__file__": str(path), "__name__": "ops_probe", "__package__": "scale_add"})
print("imported")
"""


@pytest.mark.parametrize("attack", ["escapes", "fifo", "genuine"])
def test_generated_ops_prints_only_its_own_rebuild_note(scene: Scene, attack: str) -> None:
    generate_torch(scene.build_toml)
    note = scene.project / "build" / "cmake" / "build2cmake-rebuilt"
    note.parent.mkdir(parents=True)
    ops = scene.project / "torch-ext" / "scale_add" / "_ops.py"
    extension = next(
        line.split('"')[1] for line in ops.read_text().splitlines() if '": "cpu"' in line
    )
    if attack == "escapes":
        note.write_text("\x1b]0;owned\x07\nbuild2cmake: error: forged")
    elif attack == "fifo":
        os.mkfifo(note)
    else:
        note.write_text(extension)
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_OPS, str(ops)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0 and result.stdout == "imported\n", result.stderr
    if attack == "genuine":
        assert result.stderr == f"build2cmake: {extension} was rebuilt since the last import\n"
    else:
        assert result.stderr == ""
    assert not note.exists()
