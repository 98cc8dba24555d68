"""The C++ standard a build compiles with is the one the installed torch asks for, read from
torch's own files (its CMake package, else its headers' `__cplusplus` check, else its version);
BUILD2CMAKE_CXX_STANDARD overrides it; a compiler that cannot compile it stops the configure
with one line.

Each test configures a generated project against a stand-in torch: a package that is only
torch/version.py, a CMake package and two headers, whose version (2.11, where the version rule
alone would give C++17) and files say something no released torch says yet (C++23), so a
passing test shows that the files decide, not a table of releases.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from build2cmake.api import generate_torch
from tests.conftest import requires_rocm_toolchain

pytestmark = pytest.mark.compile

# What torch 2.15's headers open with: MSVC's own variable first, then __cplusplus, the condition
# continued over two lines, then the #error.
HEADER_CHECK = """\
#pragma once
#if (defined(_MSVC_LANG) && _MSVC_LANG < {value}L) || \\
    (!defined(_MSVC_LANG) && __cplusplus < {value}L)
#error C++{standard} or later compatible compiler is required to use PyTorch.
#endif
"""

# __cplusplus of each standard (C++26's as g++ 14 sets it; 29 is no standard yet).
CPLUSPLUS = {17: "201703", 20: "202002", 23: "202302", 26: "202400", 29: "202900"}

TORCH_CONFIG = """\
set(TORCH_INSTALL_PREFIX "${{CMAKE_CURRENT_LIST_DIR}}/../../..")
get_filename_component(TORCH_INSTALL_PREFIX "${{TORCH_INSTALL_PREFIX}}" ABSOLUTE)
set(TORCH_INCLUDE_DIRS "${{TORCH_INSTALL_PREFIX}}/include"
    "${{TORCH_INSTALL_PREFIX}}/include/torch/csrc/api/include")
set(TORCH_LIBRARY "${{TORCH_INSTALL_PREFIX}}/lib/libtorch.so")
set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=1")
add_library(torch SHARED IMPORTED)
set_target_properties(torch PROPERTIES IMPORTED_LOCATION "${{TORCH_LIBRARY}}")
{declares}
set(Torch_FOUND TRUE)
"""


def stand_in_torch(
    root: Path, *, version: str = "2.11.0", declares: str = "", header: int | None = None
) -> Path:
    """A folder to put on PYTHONPATH holding a torch that CMake can configure against (its
    libraries are empty files: nothing links). `declares`: CMake run after its target exists;
    `header`: the standard (17, 20, 23, ...) its ATen/ATen.h and torch/all.h demand."""
    torch = root / "torch"
    (torch / "share" / "cmake" / "Torch").mkdir(parents=True)
    (torch / "__init__.py").write_text("")
    (torch / "version.py").write_text(f"__version__ = {version!r}\ncuda = None\nhip = None\n")
    (torch / "share" / "cmake" / "Torch" / "TorchConfig.cmake").write_text(
        TORCH_CONFIG.format(declares=declares)
    )
    (torch / "lib").mkdir()
    for library in ("c10", "torch", "torch_cpu"):
        (torch / "lib" / f"lib{library}.so").write_bytes(b"")
    for name in ("include/ATen/ATen.h", "include/torch/csrc/api/include/torch/all.h"):
        path = torch / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if header is None:
            path.write_text("#pragma once\n")
        else:
            path.write_text(HEADER_CHECK.format(value=CPLUSPLUS[header], standard=header))
    return root


def configure(
    root: Path, site: Path, *defines: str, backend: str = "cpu"
) -> subprocess.CompletedProcess[str]:
    """Generate and configure `root` against the torch in `site`."""
    generate_torch(root / "build.toml", force=True)
    env = {**os.environ, "PYTHONPATH": str(site)}
    command = ["cmake", "-S", str(root), "-B", str(root / "build" / "cmake"), "-G", "Ninja",
               f"-DPython_EXECUTABLE={sys.executable}", f"-DBUILD2CMAKE_BACKEND={backend}",
               *(f"-D{d}" for d in defines)]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False)


def standards(root: Path) -> dict[str, str]:
    """The standard each compiled file gets, from the compile database CMake wrote: its -std=,
    else (CMake passes none for the compiler's default) the compiler's default."""
    build = root / "build" / "cmake"
    database = json.loads((build / "compile_commands.json").read_text())
    (compiler,) = build.glob("CMakeFiles/*/CMakeCXXCompiler.cmake")
    default = re.search(r'CMAKE_CXX_STANDARD_COMPUTED_DEFAULT "(\w+)"', compiler.read_text())
    assert default
    found = {}
    for entry in database:
        match = re.search(r"-std=(?:gnu|c)\+\+(\w+)", entry["command"])
        found[Path(entry["file"]).name] = match[1] if match else default[1]
    return found


def status(result: subprocess.CompletedProcess[str]) -> str:
    (line,) = [x for x in result.stdout.splitlines() if "sources compile as" in x]
    return line


@pytest.mark.parametrize(
    ("declares", "header", "standard", "origin"),
    [
        # torch 2.15's way: a compile feature on its target.
        ("target_compile_features(torch INTERFACE cxx_std_23)", 17, "23",
         "compile feature cxx_std_23 of torch"),
        # torch 2.13's and 2.14's way: the CXX_STANDARD property.
        ("set_target_properties(torch PROPERTIES CXX_STANDARD 23)", None, "23",
         "CXX_STANDARD 23 of torch"),
        # A CMake package that says nothing: the headers' own check.
        ("", 23, "23", "its headers: ATen/ATen.h needs __cplusplus >= 202302L"),
        # Headers stricter than the CMake package: the headers win.
        ("set_target_properties(torch PROPERTIES CXX_STANDARD 17)", 20, "20",
         "its headers: ATen/ATen.h needs __cplusplus >= 202002L"),
    ],
)  # fmt: skip
def test_the_standard_is_read_from_torchs_own_files(
    project: Callable[[str], Path],
    tmp_path: Path,
    declares: str,
    header: int | None,
    standard: str,
    origin: str,
) -> None:
    root = project("scale_add")
    site = stand_in_torch(tmp_path / "site", declares=declares, header=header)
    result = configure(root, site)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"sources compile as C++{standard}, as torch 2.11.0 asks" in status(result)
    assert origin in status(result)
    # The extension's binding and the kernel's sources alike.
    assert standards(root) == {"torch_binding.cpp": standard, "ops_cpu.cpp": standard}


# 2.12.0: the release where kernel-builder's rule turns to C++20, itself C++20.
@pytest.mark.parametrize(
    ("version", "standard"), [("2.11.0", "17"), ("2.12.0", "20"), ("2.13.0", "20")]
)
def test_a_torch_whose_files_say_nothing_gets_the_standard_of_its_version(
    project: Callable[[str], Path], tmp_path: Path, version: str, standard: str
) -> None:
    root = project("scale_add")
    result = configure(root, stand_in_torch(tmp_path / "site", version=version))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "from its version" in status(result)
    assert standards(root) == {"torch_binding.cpp": standard, "ops_cpu.cpp": standard}


def test_the_user_chooses_another_standard_but_not_one_torchs_headers_refuse(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = project("scale_add")
    site = stand_in_torch(tmp_path / "site", header=20)
    chosen = configure(root, site, "BUILD2CMAKE_CXX_STANDARD=23")
    assert chosen.returncode == 0, chosen.stderr[-3000:]
    assert "C++23, from BUILD2CMAKE_CXX_STANDARD; torch 2.11.0 asks for C++20" in status(chosen)
    assert set(standards(root).values()) == {"23"}
    # Exactly the least the headers accept is accepted (the refusal would say "use 20").
    at_floor = configure(root, site, "BUILD2CMAKE_CXX_STANDARD=20")
    assert at_floor.returncode == 0, at_floor.stderr[-3000:]
    assert set(standards(root).values()) == {"20"}

    refused = configure(root, site, "BUILD2CMAKE_CXX_STANDARD=17")
    assert refused.returncode != 0
    assert re.search(
        r"build2cmake: BUILD2CMAKE_CXX_STANDARD=17, but torch 2\.11\.0's headers stop below "
        r"C\+\+20; use 20 or newer",
        " ".join(refused.stderr.split()),
    ), refused.stderr
    unknown = configure(root, site, "BUILD2CMAKE_CXX_STANDARD=2a")
    assert unknown.returncode != 0
    assert "use 17, 20, 23 or 26" in " ".join(unknown.stderr.split())


def newest_unsupported_standard() -> int:
    """A standard this machine's C++ compiler cannot compile (C++26 for g++ < 14)."""
    for standard in (26, 29):
        probe = subprocess.run(
            ["c++", f"-std=c++{standard}", "-fsyntax-only", "-x", "c++", "/dev/null"],
            capture_output=True,
            check=False,
        )
        if probe.returncode != 0:
            return standard
    return 29


def test_a_compiler_that_cannot_compile_the_standard_stops_the_configure_in_one_line(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = project("scale_add")
    standard = newest_unsupported_standard()
    site = stand_in_torch(tmp_path / "site", header=standard)
    result = configure(root, site)
    assert result.returncode != 0
    # One message, one sentence: CMake only wraps it for the terminal.
    (error,) = re.findall(r"CMake Error at [^\n]*\n((?:  [^\n]*\n)+)", result.stderr)
    line = " ".join(error.split())
    version = subprocess.run(["c++", "-dumpfullversion"], capture_output=True, text=True).stdout
    assert re.search(
        rf"build2cmake: the CXX compiler \S+ \(GNU {re.escape(version.strip())}\) cannot "
        rf"compile C\+\+{standard}, which this build needs as torch 2\.11\.0 asks \(its headers: "
        r"ATen/ATen\.h needs __cplusplus >= \d+L\); use a compiler that can "
        r"\(CMAKE_CXX_COMPILER\), or choose the standard with "
        r"-C cmake\.define\.BUILD2CMAKE_CXX_STANDARD=<17\|20\|23\|26>",
        line,
    ), line
    # Not a wall of template errors: nothing was compiled.
    assert not (root / "build" / "cmake" / "build.ninja").exists()


@requires_rocm_toolchain
@pytest.mark.rocm
def test_hip_sources_get_the_least_standard_torchs_headers_accept(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = project("scale_add")
    site = stand_in_torch(
        tmp_path / "site", declares="target_compile_features(torch INTERFACE cxx_std_23)", header=20
    )
    result = configure(root, site, backend="rocm")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "C++23 (HIP sources: C++20, the least torch 2.11.0's headers accept)" in status(result)
    assert standards(root) == {"torch_binding.cpp": "23", "scale_add.hip": "20", "relu.hip": "20"}
