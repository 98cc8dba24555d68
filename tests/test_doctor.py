"""build2cmake doctor on this machine: with the Debian ROCm packages, and with them hidden."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, requires_nvcc, requires_rocm_toolchain, run_cli

GEMM_TOML = REPO / "kernels" / "gemm" / "build.toml"


def test_doctor_without_build_toml_reports_torch_and_the_variant_kernels_would_load() -> None:
    result = run_cli("doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "torch:   2.13.0 (cpu build, cxx11 ABI)" in result.stdout
    assert "kernels loads build/torch213-cxx11-cpu-x86_64-linux/ for it" in result.stdout


@requires_rocm_toolchain
@requires_nvcc
def test_doctor_names_the_compilers_and_the_arch_this_rocm_cannot_build() -> None:
    result = run_cli("doctor", GEMM_TOML)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr  # gfx942 is a problem on ROCm 5.2
    assert "HIP:     /usr/bin/clang++-15 (clang 15." in out
    hip_targets = out.split("HIP:")[1].split("targets:")[1].splitlines()[0]
    assert "gfx90a" in hip_targets and "gfx940" in hip_targets and "gfx942" not in hip_targets
    assert "rocm: archs gfx90a, gfx940, gfx942; buildable here: gfx90a, gfx940" in out
    assert "PROBLEM gfx942: clang 15." in out
    assert "-D BUILD2CMAKE_ROCM_ARCHS='gfx90a;gfx940'" in out
    assert "cmake.define.BUILD2CMAKE_ROCM_ARCHS='gfx90a;gfx940'" in out
    assert "cuda: capabilities 8.9, 9.0a; nvcc 13." in out and "builds 8.9, 9.0a" in out
    assert out.strip().endswith("1 problem(s)")


def _hidden_rocm(command: list[str]) -> subprocess.CompletedProcess[str]:
    """Run `command` with the Debian ROCm packages' headers, bitcode and hipcc hidden."""
    hide = (
        "mount -t tmpfs none /usr/include/hip && "
        "mount -t tmpfs none /usr/lib/x86_64-linux-gnu/amdgcn && "
        "mount --bind /dev/null /usr/bin/hipcc && "
        'exec "$@"'
    )
    return subprocess.run(
        ["unshare", "--mount", "sh", "-c", hide, "sh", *command],
        capture_output=True,
        text=True,
        check=False,
    )


@requires_rocm_toolchain
def test_doctor_without_the_rocm_packages_says_what_to_install() -> None:
    if shutil.which("unshare") is None or not Path("/usr/lib/x86_64-linux-gnu/amdgcn").is_dir():
        pytest.skip("needs unshare and the Debian ROCm layout to hide")
    probe = _hidden_rocm(["true"])
    if probe.returncode != 0:
        pytest.skip(f"cannot hide the ROCm packages here (unshare/mount): {probe.stderr.strip()}")
    result = _hidden_rocm([sys.executable, "-m", "build2cmake", "doctor", str(GEMM_TOML)])
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "HIP:     not found (searched /opt/rocm, /usr)" in out
    assert "PROBLEM no HIP compiler: the rocm backend cannot be built here" in out
    assert (
        "fix: apt-get install hipcc libamdhip64-dev rocm-device-libs libamd-comgr-dev "
        "libhsa-runtime-dev" in out
    )
    # One problem for the missing compiler, not one per arch it would have had to build.
    assert out.count("PROBLEM") == 1
