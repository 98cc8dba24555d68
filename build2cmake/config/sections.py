"""Readers for the sections the formats share, each parameterised by its format's key table."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from build2cmake.config.archs import did_you_mean
from build2cmake.config.model import (
    KNOWN_BACKENDS,
    Kernel,
    KernelDependency,
    Noarch,
    Project,
    TorchExtension,
    TvmFfi,
)
from build2cmake.config.schema import KERNEL_KEYS, Keys, KeySpec, Reader
from build2cmake.ground.errors import BuildConfigErrors

_KERNEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
# The Hub's rule for kernel names, which editions 4 and 5 enforce.
HUB_NAME = re.compile(r"[a-z][-a-z0-9]*[a-z0-9]")

HUB_KEYS: Keys = {
    "repo-id": KeySpec("str", doc="Hub repository the kernel is published to"),
    "branch": KeySpec("str", doc="branch of that repository"),
}

TORCH_KEYS_V3: Keys = {
    "src": KeySpec("str-list", doc="binding sources and headers"),
    "include": KeySpec("str-list", doc="include folders for the binding"),
    "pyext": KeySpec("str-list", doc="file extensions of the Python package to ship"),
    "minver": KeySpec("version", doc="oldest torch version"),
    "maxver": KeySpec("version", doc="newest torch version (that minor release included)"),
}
TORCH_KEYS_V4: Keys = {
    **TORCH_KEYS_V3,
    "cxx-flags": KeySpec("str-list", doc="flags for the binding's C++ sources"),
    "stable-abi": KeySpec("any", doc="torch version of the stable ABI to target"),
}
TVM_FFI_KEYS: Keys = {
    "src": KeySpec("str-list", required=True, doc="binding sources"),
    "include": KeySpec("str-list", doc="include folders"),
    "pyext": KeySpec("str-list", doc="file extensions of the Python package to ship"),
    "cxx-flags": KeySpec("str-list", doc="flags for the binding's C++ sources"),
}
NOARCH_KEYS: Keys = {
    "pyext": KeySpec("str-list", doc="file extensions of the Python package to ship"),
    # kernel-builder's code reads the snake_case spellings while its docs write kebab-case;
    # both are accepted (one of each pair).
    "cuda-capabilities": KeySpec("str-list", doc="capabilities the Python kernels support"),
    "cuda_capabilities": KeySpec("str-list", doc="same as cuda-capabilities"),
    "rocm-archs": KeySpec("str-list", doc="archs the Python kernels support"),
    "rocm_archs": KeySpec("str-list", doc="same as rocm-archs"),
}


def package_name(r: Reader, general: Mapping[str, Any], *, hub_rule: bool) -> str | None:
    """[general].name: a Hub kernel name (editions 4, 5) or anything that makes a package."""
    name = r.get(general, "name", "[general]", r.string)
    if name is None:
        return None
    if hub_rule:
        if not HUB_NAME.fullmatch(name):
            r.fail(
                "[general].name",
                f"{name!r} is not a kernel name: start with a lowercase letter, then lowercase "
                "letters, digits and '-', end with a letter or digit, at least 2 characters "
                "(e.g. 'my-kernel', 'relu2d')",
            )
            return None
        return name
    package = name.replace("-", "_")
    if not (package.isascii() and package.isidentifier()) or package.startswith("_"):
        r.fail(
            "[general].name",
            f"{name!r} does not make a Python package name; use ASCII letters, digits, "
            "'_' and '-', starting with a letter (dashes become underscores)",
        )
        return None
    return name


def hub(r: Reader, general: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """[general.hub] repo-id and branch."""
    data = r.get(general, "hub", "[general]", r.table)
    if data is None:
        return None, None
    r.check_keys(data, HUB_KEYS, "[general.hub]")
    return (
        r.get(data, "repo-id", "[general.hub]", r.repo_id),
        r.get(data, "branch", "[general.hub]", r.string),
    )


def backend_tables(
    r: Reader, general: Mapping[str, Any], tables: Mapping[str, Keys]
) -> tuple[
    dict[str, Mapping[str, Any]],
    tuple[tuple[str, tuple[str, ...]], ...],
    tuple[tuple[str, tuple[KernelDependency, ...]], ...],
]:
    """The per-backend tables of [general] ([general.cuda], [general.xpu], ...).

    Returns the tables, their python-depends and their kernel-depends, per backend.
    """
    found: dict[str, Mapping[str, Any]] = {}
    python: list[tuple[str, tuple[str, ...]]] = []
    kernels: list[tuple[str, tuple[KernelDependency, ...]]] = []
    for backend, keys in tables.items():
        data = r.get(general, backend, "[general]", r.table)
        if data is None:
            continue
        where = f"[general.{backend}]"
        r.check_keys(data, keys, where)
        found[backend] = data
        deps = r.get(
            data, "python-depends", where, functools.partial(r.python_depends, backend=backend)
        )
        if deps:
            python.append((backend, deps))
        kernel_deps = r.get(data, "kernel-depends", where, r.kernel_depends)
        if kernel_deps:
            kernels.append((backend, kernel_deps))
    return found, tuple(python), tuple(kernels)


def kernels(
    r: Reader,
    data: Mapping[str, Any],
    allowed_backends: tuple[str, ...],
    keys: Keys = KERNEL_KEYS,
) -> tuple[Kernel, ...]:
    """Every [kernel.<name>] section tagged with `backend`."""
    sections = r.get(data, "kernel", "", r.table) or {}
    result: list[Kernel] = []
    for name, section in sections.items():
        with r.attempt():
            kernel = kernel_section(r, name, section, allowed_backends, keys)
            if kernel is not None:
                result.append(kernel)
    check_target_names(r, result)
    return tuple(result)


def check_target_names(r: Reader, found: list[Kernel]) -> None:
    """Two kernel names that make one CMake target ('-' becomes '_'): CMake would refuse the
    second add_library, so say it here, naming both."""
    seen: dict[str, str] = {}
    for kernel in found:
        first = seen.setdefault(kernel.target_name, kernel.name)
        if first != kernel.name:
            r.fail(
                f"[kernel.{kernel.name}]",
                f"{kernel.name!r} and [kernel.{first}] both make the CMake target "
                f"{kernel.target_name!r} ('-' becomes '_'); rename one",
            )


def kernel_name(r: Reader, name: str) -> None:
    """Kernel names become CMake target names; keep them to identifier characters."""
    if not _KERNEL_NAME.fullmatch(name):
        raise r.fail(
            f"[kernel.{name}]",
            f"{name!r} is not a valid kernel name "
            "(ASCII letters, digits, '_' or '-', not starting with a digit)",
        )


def kernel_section(
    r: Reader, name: str, value: Any, allowed_backends: tuple[str, ...], keys: Keys
) -> Kernel | None:
    """One [kernel.<name>] section."""
    where = f"[kernel.{name}]"
    kernel_name(r, name)
    data = r.table(value, where)
    r.check_keys(data, keys, where)
    backend = r.get(data, "backend", where, r.string)
    if backend is None:
        return None
    if backend not in allowed_backends:
        raise r.fail(
            f"{where}.backend",
            f"{backend!r} is not a backend{did_you_mean(backend, allowed_backends)}; "
            f"valid: {', '.join(allowed_backends)}",
        )
    for key, spec in keys.items():
        if key in data and spec.backends is not None and backend not in spec.backends:
            r.fail(
                f"{where}.{key}",
                f"only applies to {' or '.join(spec.backends)} kernels; "
                f"this kernel's backend is {backend!r}",
            )
    sources = r.get(data, "src", where, lambda v, k: r.sources(v, k, backend))
    depends = r.get(data, "depends", where, r.depends)
    kernel = Kernel(
        name=name,
        backend=backend,
        depends=depends or (),
        sources=sources or (),
        includes=r.get(data, "include", where, r.includes) or (),
        rocm_archs=r.get(data, "rocm-archs", where, r.rocm_archs) or (),
        cuda_capabilities=r.get(data, "cuda-capabilities", where, r.cuda_capabilities) or (),
        cuda_flags=r.get(data, "cuda-flags", where, r.flags) or (),
        hip_flags=r.get(data, "hip-flags", where, r.flags) or (),
        cxx_flags=r.get(data, "cxx-flags", where, r.flags) or (),
        sycl_flags=r.get(data, "sycl-flags", where, r.flags) or (),
        cuda_minver=r.get(data, "cuda-minver", where, r.version),
    )
    return kernel


def torch(
    r: Reader, value: Any, keys: Keys, *, stable_abi_backends: tuple[str, ...]
) -> TorchExtension | None:
    """[torch]: the binding sources, their includes and flags, torch version bounds."""
    data = r.table(value, "[torch]")
    r.check_keys(data, keys, "[torch]")
    sources = r.get(data, "src", "[torch]", lambda v, k: r.sources(v, k, "torch", allow_empty=True))
    stable: tuple[tuple[str, str], ...] = ()
    if "stable-abi" in data:
        with r.attempt():
            stable = stable_abi(r, data["stable-abi"], stable_abi_backends)
    return TorchExtension(
        sources=sources or (),
        includes=r.get(data, "include", "[torch]", r.includes) or (),
        pyext=r.get(data, "pyext", "[torch]", r.pyext) or ("py", "pyi"),
        minver=r.get(data, "minver", "[torch]", r.version),
        maxver=r.get(data, "maxver", "[torch]", r.version),
        cxx_flags=r.get(data, "cxx-flags", "[torch]", r.flags) or (),
        stable_abi=stable,
    )


def stable_abi(r: Reader, value: Any, backends: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """`stable-abi = "2.10"` (every backend) or `[torch.stable-abi] cuda = "2.10"` (per backend).

    Entries for backends the project does not declare are ignored, as kernel-builder does.
    """
    key = "[torch].stable-abi"
    if isinstance(value, Mapping):
        result: list[tuple[str, str]] = []
        for backend, version in sorted(value.items()):
            where = f"[torch.stable-abi].{backend}"
            with r.attempt():
                checked = r.stable_abi_version(version, where)
                if backend in backends:
                    result.append((backend, checked))
                elif backend not in KNOWN_BACKENDS:
                    raise r.fail(where, f"{backend!r} is not a backend")
        return tuple(result)
    version = r.stable_abi_version(value, key)
    return tuple((backend, version) for backend in sorted(backends))


def noarch(r: Reader, value: Any) -> Noarch:
    """[torch-noarch]: pure-Python ops; the archs they declare go into metadata.json."""
    data = r.table(value, "[torch-noarch]")
    r.check_keys(data, NOARCH_KEYS, "[torch-noarch]")
    for kebab, snake in (("cuda-capabilities", "cuda_capabilities"), ("rocm-archs", "rocm_archs")):
        if kebab in data and snake in data:
            r.fail(f"[torch-noarch].{snake}", f"give either {kebab} or {snake}, not both")
    capabilities = r.get(data, "cuda-capabilities", "[torch-noarch]", r.cuda_capabilities) or r.get(
        data, "cuda_capabilities", "[torch-noarch]", r.cuda_capabilities
    )
    archs = r.get(data, "rocm-archs", "[torch-noarch]", r.rocm_archs) or r.get(
        data, "rocm_archs", "[torch-noarch]", r.rocm_archs
    )
    return Noarch(
        pyext=r.get(data, "pyext", "[torch-noarch]", r.pyext) or ("py", "pyi"),
        cuda_capabilities=capabilities or (),
        rocm_archs=archs or (),
    )


def tvm_ffi(r: Reader, value: Any) -> TvmFfi:
    """[tvm-ffi]: the binding sources that export a kernel's functions through Apache TVM FFI."""
    data = r.table(value, "[tvm-ffi]")
    r.check_keys(data, TVM_FFI_KEYS, "[tvm-ffi]")
    return TvmFfi(
        sources=r.get(data, "src", "[tvm-ffi]", lambda v, k: r.sources(v, k, "torch")) or (),
        includes=r.get(data, "include", "[tvm-ffi]", r.includes) or (),
        pyext=r.get(data, "pyext", "[tvm-ffi]", r.pyext) or ("py", "pyi"),
        cxx_flags=r.get(data, "cxx-flags", "[tvm-ffi]", r.flags) or (),
    )


def check_kernels_against_backends(
    r: Reader, found: tuple[Kernel, ...], backends: tuple[str, ...]
) -> None:
    """A kernel whose backend is not declared would never be built: say so."""
    for kernel in found:
        if kernel.backend not in backends:
            r.fail(
                f"[kernel.{kernel.name}].backend",
                f"{kernel.backend!r} is not in [general].backends {list(backends)}; "
                "add it there or change the kernel's backend",
            )


def finish(r: Reader, **fields: Any) -> Project:
    """The Project, or every recorded problem as one BuildConfigErrors."""
    if r.problems:
        raise BuildConfigErrors(r.problems)
    return Project(source_format=r.source_format, warnings=tuple(r.warnings), **fields)
