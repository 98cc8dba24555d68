"""ROCm 7.2 Hub variants for real: `build2cmake build --variants` finds ROCm 7.2 only in the
rocm-7.2 toolchain (`build2cmake toolchain install rocm-7.2`: Debian sid and experimental's ROCm
7.2.4, hipcc, clang-22; scripts/rocm-chroot.sh ensure rocm72 makes the same), builds the variant
there, and fails the ROCm 7.1 variant alone (Debian has no 7.1). A one-variant `build` compiles
there when the host's ROCm cannot build the declared archs; the ROCm guide's project builds with
rocWMMA headers from a folder named to build2cmake.

PyTorch's ROCm index cannot be reached from this machine: PyPI's torch of the same release (a
CUDA build) stands in for its headers and libraries, which gemm's ROCm kernel allows (it includes
none of torch's GPU headers), and metadata.json records it.

The chroot is made once per machine (minutes) and cached under /var/cache/build2cmake; these tests
skip, saying why, where it cannot be made (not root, no network to the Debian mirror, ...).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from build2cmake.config.hub_variants import parse_variant
from build2cmake.ground.errors import Build2CMakeError
from build2cmake.toolchains import store
from build2cmake.toolchains.offload import rocm_targets
from build2cmake.toolchains.programs import ninja_program
from build2cmake.toolchains.rocm_installs import discover
from tests.conftest import FIXTURES, REPO
from tests.test_gemm_project import copy_gemm

pytestmark = [pytest.mark.rocm, pytest.mark.compile]

SCRIPT = REPO / "scripts" / "rocm-chroot.sh"
GEMM_ARCHS = {"gfx90a", "gfx940", "gfx942"}  # kernels/gemm/build.toml's rocm-archs


@pytest.fixture(scope="module")
def rocm72_chroot() -> str:
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("the ROCm 7.2 chroot needs root on Linux (mmdebstrap, chroot, mount)")
    if shutil.which("unshare") is None:
        pytest.skip("the ROCm chroot needs unshare (util-linux)")
    result = subprocess.run(
        ["bash", str(SCRIPT), "ensure", "rocm72"],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"no ROCm 7.2 chroot could be made here: {result.stderr.strip()[-600:]}")
    return result.stdout.strip().splitlines()[-1]


def test_rocm72_variant_builds_in_the_chroot_and_rocm71_fails_alone(
    rocm72_chroot: str, tmp_path: Path
) -> None:
    assert "(rocm72, ROCm 7.2." in rocm72_chroot
    if any(i.release == (7, 1) for i in discover()):
        pytest.skip("this machine has a ROCm 7.1: the rocm71 variant would build")
    root = copy_gemm(tmp_path)
    command = [sys.executable, "-m", "build2cmake", "build", "build.toml",
               "--variants", "torch2.13-rocm72,torch2.13-rocm71", "-j", "2"]  # fmt: skip
    result = subprocess.run(
        command, cwd=root, capture_output=True, text=True, timeout=3000, check=False
    )
    out = result.stdout
    assert result.returncode == 1, out[-4000:] + result.stderr[-4000:]
    # rocm71: one line naming the release and where it was looked for.
    failed = re.search(r"^\[2/2\] torch2\.13-rocm71: FAILED: (.*)$", out, re.MULTILINE)
    assert failed, out
    assert failed[1].startswith("needs ROCm 7.1.x, which is not installed (ROCm found: ")
    assert "build2cmake toolchain rocm-7.2" in failed[1] and "looked in: $ROCM_PATH" in failed[1]
    hint = "; no build2cmake toolchain holds ROCm 7.1 (toolchains: rocm-5.7, rocm-6.4, rocm-7.2)"
    assert hint in failed[1]
    # rocm72: built in the toolchain, with a stand-in torch, said in its line and the table.
    done = re.search(r"^\[1/2\] torch2\.13-rocm72: ok \(\d+ s\); (.*)$", out, re.MULTILINE)
    assert done, out
    assert "built in toolchain rocm-7.2 (ROCm 7.2." in done[1]
    assert "stood in for ROCm torch" in done[1]
    assert re.search(r"^torch213-cxx11-rocm72-x86_64-linux\s+ok, torch stand-in", out, re.M)
    assert "1 of 2 variants built" in out

    variant = root / "build" / "torch213-cxx11-rocm72-x86_64-linux"
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["backend"]["type"] == "rocm"
    libraries = sorted(variant.rglob("_gemm_rocm_*.so"))
    assert len(libraries) == 1, sorted(variant.rglob("*"))
    # The archs the library really holds code for, read back from its offload bundles.
    built = sorted({target.split(":")[0] for target in rocm_targets(libraries[0])})
    assert "gfx942" in built and set(built) <= GEMM_ARCHS, built
    assert metadata["backend"]["archs"] == built
    # An arch of build.toml that ROCm 7.2's compiler no longer builds is dropped with a line.
    log = (root / "build" / "cmake-torch2.13-rocm72.log").read_text()
    for arch in GEMM_ARCHS - set(built):
        assert arch in log
    stand_in = metadata["torch-stand-in"]
    assert stand_in["torch"].startswith("2.13.") and stand_in["torch-backend"] in ("cpu", "cuda")
    assert "https://download.pytorch.org/whl/rocm7.2" in stand_in["instead-of"]
    # kernels still reads the variant's metadata.json (it ignores keys it does not know).
    from kernels._rust import Metadata  # type: ignore[import-untyped,import-not-found,unused-ignore]

    Metadata.read_from_file(variant / "metadata.json")


def test_build_compiles_in_the_toolchain_when_the_host_cannot_build_the_declared_archs(
    rocm72_chroot: str, tmp_path: Path
) -> None:
    # rocm_torch_headers declares gfx90a and gfx942; Debian 12's ROCm 5.2 compiles gfx90a only,
    # both toolchains compile both: `build` chooses the newest, says so in one line, and makes
    # the variant of this torch's release with the toolchain's ROCm.
    root = tmp_path / "rocm_torch_headers"
    shutil.copytree(FIXTURES / "rocm_torch_headers", root)
    env = {k: v for k, v in os.environ.items() if k != "BUILD2CMAKE_TOOLCHAIN"}
    result = subprocess.run(
        [sys.executable, "-m", "build2cmake", "build", "build.toml", "--backend", "rocm",
         "-j", "2"],
        cwd=root, capture_output=True, text=True, timeout=3000, env=env, check=False,
    )  # fmt: skip
    out = result.stdout
    if "cannot compile" not in out and result.returncode == 0:
        pytest.skip("this machine's ROCm compiles gfx942: the host builds")
    assert result.returncode == 0, out[-4000:] + result.stderr[-4000:]
    said = [line for line in out.splitlines() if "building in toolchain" in line]
    assert len(said) == 1, out
    assert said[0].startswith("build2cmake: building in toolchain rocm-7.2 (ROCm 7.2.")
    assert "cannot compile gfx942;" in said[0]
    assert "BUILD2CMAKE_TOOLCHAIN=host|" in said[0] and "|rocm-7.2 chooses" in said[0]
    built = out.strip().splitlines()[-1]
    assert built == (
        "built build/torch213-cxx11-rocm72-x86_64-linux (backend rocm, archs gfx90a, gfx942)"
    )
    variant = root / "build" / "torch213-cxx11-rocm72-x86_64-linux"
    (library,) = variant.glob("_complex_scale_rocm_*.so")
    assert sorted(rocm_targets(library)) == ["gfx90a", "gfx942"]
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["backend"] == {"type": "rocm", "archs": ["gfx90a", "gfx942"]}


# The folder scripts/fetch-corpus.sh fills: the guide's project (Build_RadeonFlow_Kernels/gemm)
# and ROCm/rocWMMA's headers (rocwmma/include).
GUIDE_SETTING = "BUILD2CMAKE_ROCM_GUIDE"


@pytest.mark.parametrize(
    ("toolchain", "variant"), [("rocm-6.4", "torch2.13-rocm64"), ("rocm-7.2", "torch2.13-rocm72")]
)
def test_the_rocm_guides_project_builds_with_rocwmma_headers_from_a_named_folder(
    toolchain: str, variant: str, tmp_path: Path
) -> None:
    """The guide's project (its own clone, build.toml unchanged) includes rocWMMA, which the
    toolchains have only in part (Debian experimental's librocwmma-dev lacks rocwmma/internal/):
    the variant builds once a folder of complete headers is named (BUILD2CMAKE_INCLUDE_DIRS),
    mounted read-only into the toolchain, and fails without it, the log naming the fix."""
    if not os.environ.get(GUIDE_SETTING):
        pytest.skip(
            f"needs the ROCm guide's project and rocWMMA's headers: set {GUIDE_SETTING} to the "
            "folder `bash scripts/fetch-corpus.sh DIR` fills"
        )
    inputs = Path(os.environ[GUIDE_SETTING])
    guide = inputs / "Build_RadeonFlow_Kernels" / "gemm"
    assert (guide / "build.toml").is_file(), (
        f"{GUIDE_SETTING}={inputs} holds no {guide}/build.toml (scripts/fetch-corpus.sh fills it)"
    )
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("building in the toolchains needs root on Linux and unshare")
    try:
        installed = store.find(toolchain)
    except Build2CMakeError as error:
        pytest.skip(str(error))
    shutil.copytree(guide, tmp_path / "gemm", symlinks=True)
    headers = Path(os.environ.get("B2C_ROCWMMA_INCLUDE") or inputs / "rocwmma" / "include")
    if installed.release >= (7, 0) and not (headers / "rocwmma/internal/io_scheduler.hpp").exists():
        pytest.skip(
            f"the rocWMMA at {headers} predates ROCm 7 (ROCm/rocWMMA's last commit, 2024-10, is "
            "ROCm 6.3's): it uses HIP_vector_type's .data, which ROCm 7's HIP removed; rocWMMA "
            "for ROCm 7 lives in ROCm/rocm-libraries (B2C_ROCWMMA_INCLUDE names its include "
            "folder)"
        )
    project = tmp_path / "gemm"
    command = [sys.executable, "-m", "build2cmake", "build", "build.toml", "--variants", variant,
               "-j", "2"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("CPATH", "BUILD2CMAKE_INCLUDE_DIRS")}
    without = subprocess.run(
        command, cwd=project, capture_output=True, text=True, timeout=3000, env=env, check=False
    )
    assert without.returncode == 1, without.stdout[-3000:]
    log = (project / "build" / f"cmake-{variant}.log").read_text()
    assert "rocwmma" in log and "BUILD2CMAKE_INCLUDE_DIRS=DIR" in log, log[-3000:]

    env["BUILD2CMAKE_INCLUDE_DIRS"] = str(headers)
    result = subprocess.run(
        command, cwd=project, capture_output=True, text=True, timeout=3000, env=env, check=False
    )
    out = result.stdout
    log = (project / "build" / f"cmake-{variant}.log").read_text()
    assert result.returncode == 0, out[-3000:] + log[-4000:]
    assert f"built in toolchain {toolchain} (ROCm " in out
    (library,) = (project / "build" / parse_variant(variant).folder()).glob("_gemm_rocm_*.so")
    assert sorted({t.split(":")[0] for t in rocm_targets(library)}) == ["gfx942"]
    # Its headers were the named folder's: the compiler's dependency list (Ninja keeps it,
    # relative to the build folder) says so.
    build_dir = project / "build" / f"cmake-{variant}"
    deps = subprocess.run(
        [ninja_program(), "-C", str(build_dir), "-t", "deps"],
        capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    used = {
        (build_dir / line.strip()).resolve() for line in deps.splitlines() if "rocwmma.hpp" in line
    }
    assert used == {(headers / "rocwmma" / "rocwmma.hpp").resolve()}, used
