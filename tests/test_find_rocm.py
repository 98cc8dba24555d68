"""ROCm discovery (cmake_templates/rocm/build2cmake_find_rocm.cmake) on each layout it knows,
laid out in a temporary folder and pointed to with $ROCM_PATH; doctor reads the same module."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from build2cmake import doctor
from build2cmake.builder import cmake_program
from build2cmake.render import rocm_discovery_module


def _touch(path: Path, text: str = "", executable: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _hip_headers(root: Path, major: int, minor: int) -> None:
    _touch(root / "include/hip/hip_runtime.h")
    _touch(
        root / "include/hip/hip_version.h",
        f"#define HIP_VERSION_MAJOR {major}\n#define HIP_VERSION_MINOR {minor}\n"
        "#define HIP_VERSION_PATCH 1234\n",
    )


def _rocm_release(root: Path) -> Path:  # AMD's ROCm 6.x tree
    _hip_headers(root, 6, 3)
    return _touch(root / "lib/llvm/bin/clang++", executable=True)


def _rocm5_release(root: Path) -> Path:  # AMD's ROCm 5.x tree
    _hip_headers(root, 5, 7)
    return _touch(root / "llvm/bin/clang++", executable=True)


def _debian12(root: Path) -> Path:
    _hip_headers(root, 5, 2)
    _touch(root / "lib/x86_64-linux-gnu/cmake/hip/hip-config.cmake")
    (root / "lib/x86_64-linux-gnu/amdgcn/bitcode").mkdir(parents=True)
    _touch(root / "bin/hipcc.pl", 'my $HIPCC = "clang++-15";\n')
    return _touch(root / "bin/clang++-15", executable=True)


def _debian_trixie(root: Path) -> Path:  # also Ubuntu 24.04; sid is the same with 21 and 6.4
    _hip_headers(root, 5, 7)
    _touch(root / "lib/x86_64-linux-gnu/cmake/hip/hip-config.cmake")
    for major in (15, 17):  # an older LLVM without device libraries is not chosen
        _touch(root / f"lib/llvm-{major}/bin/clang++", executable=True)
    (root / "lib/llvm-17/lib/clang/17/amdgcn/bitcode").mkdir(parents=True)
    return root / "lib/llvm-17/bin/clang++"


def _debian_sid(root: Path) -> Path:
    _hip_headers(root, 6, 4)
    _touch(root / "lib/x86_64-linux-gnu/cmake/hip/hip-config.cmake")
    (root / "lib/llvm-21/lib/clang/21/amdgcn/bitcode").mkdir(parents=True)
    return _touch(root / "lib/llvm-21/bin/clang++", executable=True)


def _discover(root: Path) -> dict[str, str]:
    env = {**os.environ, "ROCM_PATH": str(root)}
    env.pop("HIP_PATH", None)
    result = subprocess.run(
        [cmake_program(), "-P", str(rocm_discovery_module())],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return dict(line.split("=", 1) for line in result.stderr.splitlines() if "=" in line)


@pytest.mark.parametrize(
    ("make", "layout", "bitcode", "version", "offload"),
    [
        (_rocm_release, "ROCm release tree", "", "6.3.1234", "--offload-compress"),
        (_rocm5_release, "ROCm release tree", "", "5.7.1234", ""),
        (_debian12, "lib/<multiarch>/amdgcn", "lib/x86_64-linux-gnu/amdgcn/bitcode", "5.2.1234",
         ""),
        (_debian_trixie, "lib/llvm-17", "lib/llvm-17/lib/clang/17/amdgcn/bitcode", "5.7.1234", ""),
        (_debian_sid, "lib/llvm-21", "lib/llvm-21/lib/clang/21/amdgcn/bitcode", "6.4.1234",
         "--offload-compress"),
    ],
)  # fmt: skip
def test_each_rocm_layout_is_found_with_its_matching_compiler_and_bitcode(
    tmp_path: Path, make: object, layout: str, bitcode: str, version: str, offload: str
) -> None:
    root = tmp_path / "rocm"
    compiler = make(root)  # type: ignore[operator]
    found = _discover(root)
    assert found["root"] == str(root)
    assert found["compiler"] == str(compiler)
    assert layout in found["layout_detail"]
    assert found["bitcode"] == (str(root / bitcode) if bitcode else "")
    assert found["version"] == version
    # --offload-compress only where the compiler has it (ROCm >= 6.2).
    assert found["offload_flags"] == offload


def test_headers_without_a_compiler_or_device_libraries_are_not_a_rocm(tmp_path: Path) -> None:
    root = tmp_path / "rocm"
    _hip_headers(root, 6, 4)
    _touch(root / "lib/llvm-21/bin/clang++", executable=True)  # no amdgcn bitcode next to it
    found = _discover(root)
    assert found.get("root") != str(root)
    assert found["searched"].startswith(f"{root}, ")


def test_doctor_reports_the_layout_the_build_would_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "rocm"
    compiler = _debian_sid(root)
    monkeypatch.setenv("ROCM_PATH", str(root))
    monkeypatch.delenv("HIP_PATH", raising=False)
    rocm, searched = doctor.find_rocm()
    assert rocm is not None and searched.startswith(str(root))
    assert (rocm.compiler, rocm.version, rocm.offload_flags) == (
        str(compiler),
        "6.4.1234",
        "--offload-compress",
    )
    assert rocm.layout == "distribution"
    assert rocm.layout_detail == "distribution packages, bitcode in lib/llvm-21"
