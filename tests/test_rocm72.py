"""ROCm 7.2 Hub variants for real: `build2cmake build --variants` finds ROCm 7.2 only in the
chroot scripts/rocm-chroot.sh makes from Debian sid and experimental's ROCm 7.2.4 (hipcc,
clang-22), builds the variant there, and fails the ROCm 7.1 variant alone (Debian has no 7.1).

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

from build2cmake.offload import rocm_targets
from build2cmake.rocm_installs import discover
from tests.conftest import REPO
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
    assert "build2cmake chroot rocm72" in failed[1] and "looked in: $ROCM_PATH" in failed[1]
    # rocm72: built in the chroot, with a stand-in torch, said in its line and the table.
    done = re.search(r"^\[1/2\] torch2\.13-rocm72: ok \(\d+ s\); (.*)$", out, re.MULTILINE)
    assert done, out
    assert "built in the chroot rocm72" in done[1] and "stood in for ROCm torch" in done[1]
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
