"""build2cmake: generate a CMake + scikit-build-core build from a kernel project's build.toml."""

from __future__ import annotations

__version__ = "0.1.0"
