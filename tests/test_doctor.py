"""build2cmake doctor on this machine: with the Debian ROCm packages, and with them hidden; with
no toolchain of build2cmake's (an empty store), and with the ones installed here beside them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from build2cmake.toolchains import store
from tests.conftest import FIXTURES, REPO, requires_nvcc, requires_rocm_toolchain, run_cli

GEMM_TOML = REPO / "kernels" / "gemm" / "build.toml"


def test_doctor_without_build_toml_reports_torch_and_the_variant_kernels_would_load() -> None:
    result = run_cli("doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "torch:   2.13.0 (cpu build, cxx11 ABI)" in result.stdout
    assert "kernels loads build/torch213-cxx11-cpu-x86_64-linux/ for it" in result.stdout


@pytest.fixture
def no_toolchains(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty toolchain store: doctor sees the host's ROCm alone."""
    monkeypatch.setenv("BUILD2CMAKE_TOOLCHAINS", str(tmp_path))
    return tmp_path


@requires_rocm_toolchain
@requires_nvcc
def test_doctor_names_the_compilers_and_the_arch_this_rocm_cannot_build(
    no_toolchains: Path,
) -> None:
    result = run_cli("doctor", GEMM_TOML)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr  # gfx942 is a problem on ROCm 5.2
    assert "HIP:     /usr/bin/clang++-15 (clang 15." in out
    hip_targets = out.split("HIP:")[1].split("targets:")[1].splitlines()[0]
    assert "gfx90a" in hip_targets and "gfx940" in hip_targets and "gfx942" not in hip_targets
    assert "rocm: archs gfx90a, gfx940, gfx942; buildable here: gfx90a, gfx940" in out
    assert "PROBLEM gfx942: clang 15." in out
    assert "(build2cmake toolchain install rocm-7.2 is one)" in out
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
def test_doctor_without_the_rocm_packages_says_what_to_install(no_toolchains: Path) -> None:
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
    assert "; or build2cmake toolchain install rocm-7.2" in out
    # One problem for the missing compiler, not one per arch it would have had to build.
    assert out.count("PROBLEM") == 1


def _installed_toolchains() -> list[str]:
    names = [t.name for t in store.installed()]
    if os.geteuid() != 0 or not {"rocm-6.4", "rocm-7.2"} <= set(names):
        pytest.skip("needs the rocm-6.4 and rocm-7.2 toolchains (build2cmake toolchain install)")
    return names


@pytest.mark.rocm
def test_doctor_lists_the_toolchains_beside_the_host_and_names_who_compiles_each_arch() -> None:
    _installed_toolchains()
    guide = run_cli("doctor", FIXTURES / "rocm_guide" / "build.toml")
    out = guide.stdout
    assert guide.returncode == 0, out + guide.stderr
    toolchains = out.split("\ntoolchains (")[1]
    for name, clang in (("rocm-6.4", "clang 21."), ("rocm-7.2", "clang 22.")):
        line = next(x for x in toolchains.splitlines() if x.startswith(f"  {name}  ROCm "))
        assert f"({clang}" in line, line
    assert re.search(r"^            targets: .*\bgfx942\b", toolchains, re.MULTILINE)
    assert re.search(r"^            libraries: .*incomplete: .*rocWMMA", toolchains, re.MULTILINE)
    assert re.search(r"^    gfx942 +compiled by: rocm-6\.4, rocm-7\.2$", out, re.MULTILINE), out
    assert "    build2cmake build compiles in toolchain rocm-7.2 (ROCm 7.2." in out
    assert "  rocm libraries of toolchain rocm-7.2:" in out
    assert re.search(
        r"^    rocWMMA +incomplete: /usr/include/rocwmma/rocwmma.hpp includes .*"
        r"BUILD2CMAKE_INCLUDE_DIRS=/path/to/include", out, re.MULTILINE,
    )  # fmt: skip

    # kernels/gemm: the host keeps gfx940, which the toolchains' clang 21 and 22 dropped, so it
    # builds there; gfx942 is a warning naming the toolchain that compiles it, not a problem.
    gemm = run_cli("doctor", GEMM_TOML)
    assert re.search(r"^    gfx940 +compiled by: host$", gemm.stdout, re.MULTILINE), gemm.stdout
    assert "    build2cmake build compiles on the host; BUILD2CMAKE_TOOLCHAIN=host|" in gemm.stdout
    assert "WARNING gfx942: clang 15." in gemm.stdout
    assert "fix: BUILD2CMAKE_TOOLCHAIN=rocm-7.2 build2cmake build " in gemm.stdout
    assert "PROBLEM gfx942" not in gemm.stdout
