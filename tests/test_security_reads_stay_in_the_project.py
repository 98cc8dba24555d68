"""Red team, second round, review of the new code paths: the ROCm chroot builds, native upload,
provenance, the kernel card, folder marks and the configure-time scans.

Each test plants what a stranger's clone can hold and checks that nothing of it runs (planted
code leaves a marker if it does), nothing outside the project changes (a sentinel tree stays
byte-identical) and every hang case runs under a time limit.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from build2cmake.config import load_project
from tests.conftest import FIXTURES, REPO, requires_rocm_toolchain
from tests.hub_standin import StandInHub
from tests.security import Scene, assert_one_user_error, cli, state
from tests.test_upload import REPO_ID, _cli

# test_upload's fixtures, by name (request.getfixturevalue): a built project and the stand-in.
from tests.test_upload import hub as hub
from tests.test_upload import project as project

CHROOT_SCRIPT = REPO / "scripts" / "rocm-chroot.sh"


def _rocm72_chroot() -> None:
    """Skip (saying why) unless the cached ROCm 7.2 chroot of scripts/rocm-chroot.sh is usable."""
    if sys.platform != "linux" or os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("the ROCm chroot needs root on Linux and unshare")
    info = subprocess.run(
        ["bash", str(CHROOT_SCRIPT), "info", "rocm72"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if info.returncode != 0:
        pytest.skip(f"no cached ROCm 7.2 chroot: {info.stderr.strip()}")


@pytest.mark.rocm
@pytest.mark.compile
def test_chroot_build_runs_no_build2cmake_package_planted_in_the_project(tmp_path: Path) -> None:
    """`build --variants` of a ROCm variant whose ROCm is in a chroot runs build2cmake again in
    there, as root, from the project folder. `python -m build2cmake` puts the current folder first
    on sys.path, so a `build2cmake/` package in the clone ran instead of ours (as root, with the
    host's /dev and /sys mounted in the chroot, and the cached chroot writable)."""
    _rocm72_chroot()
    from tests.test_gemm_project import copy_gemm

    root = copy_gemm(tmp_path)
    planted = root / "build2cmake"
    planted.mkdir()
    marker = root / "PLANTED-RAN"
    code = f"open({str(marker)!r}, 'w').write('ran')\nimport os\nos._exit(0)\n"
    (planted / "__init__.py").write_text(code)
    (planted / "__main__.py").write_text(code)
    # An empty local index: the real build in the chroot fails fast (no torch) once it starts.
    empty_index = tmp_path / "empty-index"
    empty_index.mkdir()
    result = subprocess.run(
        [sys.executable, "-P", "-m", "build2cmake", "build", str(root / "build.toml"),
         "--variants", "torch2.13-rocm72", "-j", "1", "--index-url", str(empty_index)],
        cwd="/", capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert not marker.exists(), result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    # Ours ran in the chroot and failed for want of a torch (no variant was built).
    assert result.returncode == 1, result.stdout + result.stderr
    assert "in the chroot rocm72" in result.stdout, result.stdout


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


def _planted_torch_wheel(folder: Path, marker: Path) -> None:
    """A 'torch 2.13.99' wheel whose .pth file leaves `marker` whenever the environment's Python
    starts (what a wheel from the clone could run, in every later build using that env)."""
    folder.mkdir()
    info = "torch-2.13.99.dist-info"
    files = {
        "torch/__init__.py": "__version__ = '2.13.99'\n",
        "planted.pth": f"import os; open({str(marker)!r}, 'w').write('ran')\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: torch\nVersion: 2.13.99\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    with zipfile.ZipFile(folder / "torch-2.13.99-py3-none-any.whl", "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
        wheel.writestr(f"{info}/RECORD", "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n")


def test_variant_environment_takes_no_uv_configuration_from_the_clone(
    scene: Scene, tmp_path: Path
) -> None:
    """`build --variants` makes each variant's environment with uv, which reads uv.toml (and
    pyproject.toml's [tool.uv]) from the folder it runs in and its parents. Run in the project
    folder (the chroot's build always is), a clone's uv.toml added its own wheels: a planted
    torch was installed into the cached environment, which every later project with the same
    variant reuses, and its .pth file ran at every start of that environment's Python."""
    marker = scene.sentinel / "PLANTED-RAN"
    _planted_torch_wheel(scene.project / "wheels", marker)
    (scene.project / "uv.toml").write_text(f'find-links = ["{scene.project / "wheels"}"]\n')
    empty_index = tmp_path / "empty-index"
    empty_index.mkdir()
    cache = tmp_path / "cache"
    result = subprocess.run(
        [sys.executable, "-P", "-m", "build2cmake", "build", "build.toml",
         "--variants", "torch2.13-cpu", "--index-url", str(empty_index)],
        cwd=scene.project, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "BUILD2CMAKE_CACHE": str(cache)},
    )  # fmt: skip
    assert not marker.exists(), result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    # No torch in the (empty) index named on the command line: the variant fails, saying so.
    assert result.returncode == 1, result.stdout + result.stderr
    log = (scene.project / "build" / "cmake-torch2.13-cpu.log").read_text()
    assert "torch was not found in the package registry" in log, log[-2000:]
    scene.assert_sentinel_untouched()


def test_build_with_a_card_that_links_to_itself_is_one_error(scene: Scene) -> None:
    """A CARD.md symlink loop: pathlib's resolve() raises RuntimeError before Python 3.13, which
    reached the user as `build2cmake: internal error` (exit 3)."""
    from tests.test_security_build import make_universal

    make_universal(scene)
    (scene.project / "CARD.md").symlink_to("CARD.md")
    result = cli("build", scene.build_toml, timeout=120)
    assert_one_user_error(result, "CARD.md")
    scene.assert_sentinel_untouched()


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
    from build2cmake.provenance import kernel_git_status

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


@pytest.mark.parametrize("name", ["win\\dows.h", "nul\x00.h"])
def test_gpu_header_scan_passes_over_an_include_that_names_no_project_path(
    scene: Scene, name: str
) -> None:
    """The check that a stand-in torch can build a ROCm kernel follows the project headers its
    sources include. An include naming no path of the project (a backslash, a NUL) made the
    project folder refuse the lookup, and that refusal became the variant's error ("not a
    normalized path inside the project") instead of the include being passed over as the
    compiler's business."""
    from build2cmake.variant_builds import gpu_torch_includes

    project = load_project(scene.build_toml)
    kernel = project.kernels_for("rocm")[0]
    source = scene.project / kernel.sources[0]
    (source.parent / "gpu.h").write_text("#include <ATen/hip/HIPContext.h>\n")
    source.write_text(f'#if 0\n#include "{name}"\n#endif\n#include "gpu.h"\n' + source.read_text())
    found = gpu_torch_includes(project, scene.project)
    header = (kernel.sources[0].parent / "gpu.h").as_posix()
    assert (header, "ATen/hip/HIPContext.h") in found, found
