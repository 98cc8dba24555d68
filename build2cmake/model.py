"""The validated, immutable description of a kernel project that every later stage reads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

# Backends the build.toml format knows about, and those this build2cmake can build.
KNOWN_BACKENDS = ("cpu", "cuda", "metal", "rocm", "xpu")
BUILDABLE_BACKENDS = ("cpu", "cuda", "rocm")


@dataclass(frozen=True)
class Kernel:
    """One `[kernel.<name>]` section: sources compiled for one backend with their own flags."""

    name: str
    backend: str
    depends: tuple[str, ...]
    sources: tuple[PurePosixPath, ...]
    includes: tuple[PurePosixPath, ...] = ()
    rocm_archs: tuple[str, ...] = ()
    cuda_capabilities: tuple[str, ...] = ()
    cuda_flags: tuple[str, ...] = ()
    hip_flags: tuple[str, ...] = ()
    cxx_flags: tuple[str, ...] = ()
    cuda_minver: str | None = None

    @property
    def target_name(self) -> str:
        """The CMake object-library name for this kernel (a valid CMake target name)."""
        return "kernel_" + self.name.replace("-", "_")


@dataclass(frozen=True)
class TorchExtension:
    """The `[torch]` section: the binding sources that register the ops."""

    sources: tuple[PurePosixPath, ...]
    includes: tuple[PurePosixPath, ...] = ()
    pyext: tuple[str, ...] = ("py", "pyi")
    minver: str | None = None
    maxver: str | None = None


@dataclass(frozen=True)
class Project:
    """A whole kernel project as build.toml describes it, after validation."""

    name: str
    backends: tuple[str, ...]
    torch: TorchExtension | None
    kernels: tuple[Kernel, ...]
    universal: bool = False
    version: int | None = None
    hub_repo_id: str | None = None
    python_depends: tuple[str, ...] = ()
    license: str | None = None
    # True when build.toml had no `[general].backends` (the older format).
    backends_inferred: bool = False
    cuda_minver: str | None = None
    cuda_maxver: str | None = None

    @property
    def package_name(self) -> str:
        """The Python package name: the project name with dashes turned into underscores."""
        return self.name.replace("-", "_")

    def kernels_for(self, backend: str) -> tuple[Kernel, ...]:
        """The kernel sections built when `backend` is selected."""
        return tuple(k for k in self.kernels if k.backend == backend)
