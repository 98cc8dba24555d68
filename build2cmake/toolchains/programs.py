"""The programs a build runs on this machine: cmake and ninja, from their PyPI packages (both
build2cmake dependencies) or else PATH."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from build2cmake.ground.errors import Build2CMakeError


def _tool(name: str) -> str:
    """`name` from its PyPI package (cmake and ninja are build2cmake dependencies), else PATH's."""
    with contextlib.suppress(ImportError, AttributeError):
        module = __import__(name)
        bin_dir = module.CMAKE_BIN_DIR if name == "cmake" else module.BIN_DIR
        candidate = Path(bin_dir) / name
        if candidate.is_file():
            return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise Build2CMakeError(f"no {name} found; install it: pip install {name}")
    return found


def cmake_program() -> str:
    """The cmake that builds: the `cmake` PyPI package's, else PATH's."""
    return _tool("cmake")


def ninja_program() -> str:
    """The ninja that builds: the `ninja` PyPI package's, else PATH's."""
    return _tool("ninja")
