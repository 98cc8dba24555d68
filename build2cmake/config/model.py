"""The validated, immutable description of a kernel project that every later stage reads.

Every on-disk format of build.toml (v1 ... edition 5, see build2cmake/config/) converts into this
one model; nothing after config/ knows which format a project was written in, except
`Project.source_format` for messages and `update-build`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

# Backends the build.toml format knows about, and those this build2cmake can build. A project
# may declare any known backend; generate and build skip the ones it cannot build and say so.
KNOWN_BACKENDS = ("cann", "cpu", "cuda", "metal", "neuron", "rocm", "tpu", "xpu")
BUILDABLE_BACKENDS = ("cpu", "cuda", "rocm")
# The backends of [tvm-ffi] kernels this build2cmake builds: those upstream builds tvm-ffi
# variants for on Linux, less xpu (nix-builder/versions.nix: no ROCm build set has tvm-ffi).
TVM_FFI_BACKENDS = ("cpu", "cuda")

# The framework sections of build.toml: compiled torch ops, pure-Python torch ops (no compiled
# code: Triton or plain Python), or ops for Apache TVM FFI.
FRAMEWORKS = ("torch", "torch-noarch", "tvm-ffi")


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
    sycl_flags: tuple[str, ...] = ()
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
    cxx_flags: tuple[str, ...] = ()
    # (backend, torch version) pairs: build that backend against torch's stable C ABI, for
    # torch >= version. A backend missing here is built against the regular C++ API.
    stable_abi: tuple[tuple[str, str], ...] = ()

    def stable_abi_for(self, backend: str) -> str | None:
        """The stable-ABI torch version `backend` targets, or None for the regular API."""
        return dict(self.stable_abi).get(backend)


@dataclass(frozen=True)
class Noarch:
    """`[torch-noarch]`: ops written in Python (e.g. Triton); nothing is compiled."""

    pyext: tuple[str, ...] = ("py", "pyi")
    cuda_capabilities: tuple[str, ...] = ()
    rocm_archs: tuple[str, ...] = ()
    # Written as `universal = true` (v1, v2, build2cmake's v3): one `torch-universal` variant
    # serves every backend. [torch-noarch] kernels get one `torch-<backend>` variant each.
    universal: bool = False


@dataclass(frozen=True)
class TvmFfi:
    """`[tvm-ffi]`: a kernel bound to Apache TVM FFI instead of torch: its binding sources
    compile with the kernels into one shared library that `tvm_ffi.load_module` loads."""

    sources: tuple[PurePosixPath, ...]
    includes: tuple[PurePosixPath, ...] = ()
    pyext: tuple[str, ...] = ("py", "pyi")
    cxx_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class KernelDependency:
    """Another Hub kernel this one needs at run time: pinned to a version or a git revision."""

    repo_id: str
    version: int | None = None
    revision: str | None = None


@dataclass(frozen=True)
class Project:
    """A whole kernel project as build.toml describes it, after validation."""

    name: str
    backends: tuple[str, ...]
    torch: TorchExtension | None
    kernels: tuple[Kernel, ...]
    framework: str = "torch"
    noarch: Noarch | None = None
    tvm_ffi: TvmFfi | None = None
    version: int | None = None
    hub_repo_id: str | None = None
    hub_branch: str | None = None
    python_depends: tuple[str, ...] = ()
    # Python requirements only one backend needs ([general.<backend>].python-depends).
    backend_python_depends: tuple[tuple[str, tuple[str, ...]], ...] = ()
    kernel_depends: tuple[KernelDependency, ...] = ()
    backend_kernel_depends: tuple[tuple[str, tuple[KernelDependency, ...]], ...] = ()
    license: str | None = None
    upstream: str | None = None
    source: str | None = None
    cuda_minver: str | None = None
    cuda_maxver: str | None = None
    # Which format the file was written in: "v1", "v2", "v3", "v4" or "edition 5".
    source_format: str = "edition 5"
    # Non-fatal remarks found while reading (duplicate sources, ...), for the CLI to print.
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def package_name(self) -> str:
        """The Python package name: the project name with dashes turned into underscores."""
        return self.name.replace("-", "_")

    @property
    def python_source_dir(self) -> str:
        """The folder holding the kernel's Python package: tvm-ffi-ext for [tvm-ffi] kernels
        (as kernel-builder lays them out), torch-ext otherwise."""
        return "tvm-ffi-ext" if self.framework == "tvm-ffi" else "torch-ext"

    @property
    def pyext(self) -> tuple[str, ...]:
        """The file extensions of the Python package a build ships."""
        for section in (self.torch, self.noarch, self.tvm_ffi):
            if section is not None:
                return section.pyext
        return ("py", "pyi")

    @property
    def universal(self) -> bool:
        """A kernel with nothing to compile (torch-noarch, the older `universal = true`)."""
        return self.framework == "torch-noarch"

    @property
    def buildable_backends(self) -> tuple[str, ...]:
        """The declared backends this build2cmake can build, in BUILDABLE_BACKENDS order."""
        return tuple(b for b in self.supported_backends if b in self.backends)

    @property
    def skipped_backends(self) -> tuple[str, ...]:
        """The declared backends this build2cmake cannot build (metal, xpu, ...)."""
        return tuple(b for b in self.backends if b not in self.supported_backends)

    @property
    def supported_backends(self) -> tuple[str, ...]:
        """The backends this build2cmake builds for a kernel of this framework."""
        return TVM_FFI_BACKENDS if self.framework == "tvm-ffi" else BUILDABLE_BACKENDS

    def kernels_for(self, backend: str) -> tuple[Kernel, ...]:
        """The kernel sections built when `backend` is selected."""
        return tuple(k for k in self.kernels if k.backend == backend)

    def python_depends_for(self, backend: str) -> tuple[str, ...]:
        """The Python requirements of a build for `backend`: general ones, then the backend's."""
        return self.python_depends + dict(self.backend_python_depends).get(backend, ())

    def kernel_depends_for(self, backend: str) -> tuple[KernelDependency, ...]:
        """The Hub kernels a build for `backend` needs: general ones, then the backend's."""
        return self.kernel_depends + dict(self.backend_kernel_depends).get(backend, ())
