"""What the build's own ROCm discovery finds, read in Python.

build2cmake_find_rocm.cmake is the one place that knows where ROCm and the ROCm libraries kernels
include (rocWMMA, hipBLASLt, rocThrust, ...) live: the generated build includes it, and this
module runs it as a script (cmake -P) for `doctor` and for `build`'s hint after a failed compile,
so none of them can disagree.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from build2cmake.generate.render import rocm_discovery_module

# How a HIP (clang) compile says a header is missing.
NOT_FOUND = re.compile(r"'([A-Za-z0-9_./+-]{1,200})' file not found")


@dataclass(frozen=True)
class RocmLibrary:
    """One ROCm library kernels include, as discovery looked it up."""

    name: str  # rocWMMA
    header: str  # its key header, e.g. rocwmma/rocwmma.hpp
    path: str  # where that header was found; "" when missing
    install: str  # the command that installs it for the ROCm found, in the build's own words
    # A header the key header includes beside itself that is missing (a package that ships only
    # part of the library); "" when complete.
    incomplete: str = ""

    @property
    def folder(self) -> str:
        """The include folder its headers live in (`rocwmma`): <folder/...> is this library's."""
        return self.header.split("/", 1)[0]


@dataclass(frozen=True)
class RocmInstall:
    """The ROCm installation the generated CMake would build with."""

    root: str
    layout: str  # "rocm" (a release tree) or "distribution"
    layout_detail: str  # which layout of build2cmake_find_rocm.cmake matched, in words
    compiler: str
    bitcode: str
    version: str  # HIP version from hip_version.h, e.g. "6.4.43484"; "" when unknown
    offload_flags: str  # extra device-code flags the build adds, e.g. "--offload-compress"
    libraries: tuple[RocmLibrary, ...] = ()
    library_dirs: str = ""  # where the libraries' headers were looked for, :-separated

    def library(self, name: str) -> RocmLibrary | None:
        """The library called `name` (rocThrust), or None when discovery does not know it."""
        return next((lib for lib in self.libraries if lib.name == name), None)

    @property
    def thrust(self) -> str:
        """rocThrust's thrust/complex.h when installed, else "" (torch's headers include it)."""
        lib = self.library("rocThrust")
        return lib.path if lib is not None else ""

    @property
    def thrust_hint(self) -> str:
        """How to install rocThrust for this ROCm."""
        lib = self.library("rocThrust")
        return lib.install if lib is not None else "install rocThrust"

    def library_of(self, header: str) -> RocmLibrary | None:
        """The library whose headers `header` (as written in an #include) is one of."""
        return next((lib for lib in self.libraries if header.startswith(lib.folder + "/")), None)


def find_rocm(
    cmake: str, env: Mapping[str, str] | None = None, *, rocm_path: str | None = None
) -> tuple[RocmInstall | None, str]:
    """Run the build's own ROCm discovery (cmake -P build2cmake_find_rocm.cmake) in `env`;
    with `rocm_path`, on that root alone (as -DBUILD2CMAKE_ROCM_PATH does in a build).

    Returns the installation found (or None) and the roots that were searched.
    """
    root = [f"-DBUILD2CMAKE_ROCM_PATH={rocm_path}"] if rocm_path else []
    try:
        result = subprocess.run(
            [cmake, *root, "-P", str(rocm_discovery_module())],
            capture_output=True,
            text=True,
            timeout=60,
            env=None if env is None else dict(env),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None, ""
    fields: dict[str, str] = {}
    libraries: list[RocmLibrary] = []
    for line in (result.stdout + result.stderr).splitlines():
        name, sep, value = line.partition("=")
        if not sep:
            continue
        if name == "library":
            parts = value.split("|")
            if len(parts) == 5:
                libraries.append(RocmLibrary(*parts))
        else:
            fields[name] = value
    searched = fields.get("searched", "")
    if not fields.get("root") or not fields.get("compiler"):
        return None, searched
    install = RocmInstall(
        root=fields["root"],
        layout=fields.get("layout", ""),
        layout_detail=fields.get("layout_detail", ""),
        compiler=fields["compiler"],
        bitcode=fields.get("bitcode", ""),
        version=fields.get("version", ""),
        offload_flags=fields.get("offload_flags", ""),
        libraries=tuple(libraries),
        library_dirs=fields.get("library_dirs", ""),
    )
    return install, searched


def compiler_targets(compiler: str) -> tuple[str, tuple[str, ...]]:
    """A HIP compiler's version ("clang 22.1.0", "unknown") and the GPU targets it lists
    (gfx90a, gfx942, ...: `--print-supported-cpus` for amdgcn-amd-amdhsa), ordered by the
    length of their names, then name."""
    version = re.search(r"clang version (\S+)", _output([compiler, "--version"]))
    cpus = _output([compiler, "--target=amdgcn-amd-amdhsa", "-nogpulib", "--print-supported-cpus"])
    # Not the generic families (gfx9-generic, ...): a kernel names real targets.
    found = re.findall(r"\bgfx[0-9a-z]+\b(?!-)", cpus)
    targets = sorted(set(found), key=lambda t: (len(t), t))
    return (f"clang {version.group(1)}" if version else "unknown"), tuple(targets)


def _output(command: list[str]) -> str:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return result.stdout + result.stderr


def missing_library_hints(
    headers: Iterable[str], cmake: str, env: Mapping[str, str] | None = None
) -> list[str]:
    """One line per ROCm library that a failed compile missed (`headers`, from its
    "'<header>' file not found" errors) and that is not installed: its name and how to get it."""
    wanted = list(dict.fromkeys(headers))
    if not wanted:
        return []
    rocm, _ = find_rocm(cmake, env)
    if rocm is None:
        return []
    lines: list[str] = []
    said: set[str] = set()
    for header in wanted:
        lib = rocm.library_of(header)
        if lib is not None and not lib.path and lib.name not in said:
            said.add(lib.name)
            lines.append(
                f"build2cmake: '{header}' is a header of {lib.name}, which is not installed "
                f"(looked in {rocm.library_dirs or rocm.root + '/include'}): {lib.install}"
            )
        for lib in rocm.libraries:
            if lib.incomplete == header and lib.name not in said:
                said.add(lib.name)
                lines.append(f"build2cmake: {incomplete_library(lib)}")
    return lines


def incomplete_library(lib: RocmLibrary) -> str:
    """What is wrong with a library installed only in part, and what to do (inside one of
    build2cmake's toolchains: name a folder to the build2cmake that runs outside)."""
    if os.environ.get("BUILD2CMAKE_IN_TOOLCHAIN"):
        fix = (
            "name a folder holding a complete copy of its headers to build2cmake, outside the "
            f"toolchain {os.environ['BUILD2CMAKE_IN_TOOLCHAIN']}: BUILD2CMAKE_INCLUDE_DIRS=DIR "
            "(or CPATH); it is mounted read-only into the toolchain"
        )
    else:
        fix = (
            "put a complete copy of its headers on CPATH, or build with a ROCm release tree "
            "that has it (set ROCM_PATH)"
        )
    return (
        f'{lib.name} at {lib.path} is incomplete: it includes "{lib.incomplete}", which is '
        f"not installed beside it (its package ships part of {lib.name}); {fix}"
    )
