"""v1: kernels have a `language` (cuda, cuda-hipify, metal) instead of a `backend`.

A `cuda-hipify` kernel is also built for ROCm: it becomes a cuda kernel plus a rocm kernel named
`<name>_rocm` over the same (hipified) sources, as kernel-builder expands it. Unlike
kernel-builder, which treats `language = "metal"` as CUDA, a metal kernel stays a metal kernel.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from build2cmake.config import sections
from build2cmake.config.model import Kernel, Noarch, Project
from build2cmake.config.schema import Keys, KeySpec, Reader
from build2cmake.config.v2 import LEGACY_BACKENDS

FORMAT = "v1"

GENERAL_KEYS: Keys = {
    "name": KeySpec("str", required=True, doc="kernel name"),
    # Not v1 keys upstream: read so that a v1 file can get what update-build needs for edition 5.
    "version": KeySpec("int", doc="major version of the kernel"),
    "license": KeySpec("str", doc="SPDX license id"),
}
TORCH_KEYS: Keys = {
    **sections.TORCH_KEYS_V3,
    "universal": KeySpec("bool", doc="a pure-Python kernel with nothing to compile"),
}
KERNEL_KEYS: Keys = {
    "language": KeySpec("str", doc="cuda (default), cuda-hipify or metal"),
    "depends": KeySpec("str-list", required=True),
    "src": KeySpec("str-list", required=True),
    "include": KeySpec("str-list"),
    "cuda-capabilities": KeySpec("str-list"),
    "rocm-archs": KeySpec("str-list", doc="used by cuda-hipify kernels"),
}
LANGUAGES = ("cuda", "cuda-hipify", "metal")
TOP_LEVEL_KEYS: Keys = {
    "general": KeySpec("table", required=True),
    "torch": KeySpec("table"),
    "kernel": KeySpec("table"),
}


def read(data: Mapping[str, Any], build_toml: Path) -> Project:
    """Convert a v1 document into the model."""
    r = Reader(build_toml, FORMAT)
    r.check_keys(data, TOP_LEVEL_KEYS, "")
    general = r.get(data, "general", "", r.table) or {}
    r.check_keys(general, GENERAL_KEYS, "[general]")
    name = sections.package_name(r, general, hub_rule=False)
    torch_data = r.get(data, "torch", "", r.table) or {}
    universal = r.get(torch_data, "universal", "[torch]", r.boolean) or False
    torch = None
    if "torch" in data:
        with r.attempt():
            stripped = {k: v for k, v in torch_data.items() if k != "universal"}
            r.check_keys({k: None for k in torch_data}, TORCH_KEYS, "[torch]")
            torch = sections.torch(r, stripped, sections.TORCH_KEYS_V3, stable_abi_backends=())
    found: list[Kernel] = []
    for kernel_name, value in (r.get(data, "kernel", "", r.table) or {}).items():
        with r.attempt():
            found.extend(_kernel(r, kernel_name, value))
    names = [k.name for k in found]
    for kernel in found:
        if names.count(kernel.name) > 1:
            r.fail(
                f"[kernel.{kernel.name}]",
                f"two kernels are named {kernel.name!r} (a cuda-hipify kernel adds "
                "<name>_rocm); rename one",
            )
            break
    sections.check_target_names(r, found)
    if universal:
        backends: tuple[str, ...] = LEGACY_BACKENDS
        if found:
            r.fail(
                f"[kernel.{found[0].name}]",
                "a universal kernel ([torch] universal = true) has no compiled kernels; "
                "remove the [kernel.*] sections or set universal = false",
            )
    else:
        backends = tuple(sorted({k.backend for k in found}))
        if not found:
            r.fail("[kernel]", "no [kernel.<name>] section; add one, or set universal = true")
        elif torch is None and "torch" not in data:
            r.fail("[torch]", "missing section; it needs src = [...]")
    return sections.finish(
        r,
        name=name or "",
        backends=backends,
        torch=None if universal else torch,
        kernels=tuple(found),
        framework="torch-noarch" if universal else "torch",
        noarch=Noarch(universal=True) if universal else None,
        version=r.get(general, "version", "[general]", r.integer),
        license=r.get(general, "license", "[general]", r.string),
    )


def _kernel(r: Reader, name: str, value: Any) -> list[Kernel]:
    where = f"[kernel.{name}]"
    sections.kernel_name(r, name)
    data = r.table(value, where)
    r.check_keys(data, KERNEL_KEYS, where)
    language = r.get(data, "language", where, r.string) or "cuda"
    if language not in LANGUAGES:
        raise r.fail(f"{where}.language", f"{language!r} is not one of {', '.join(LANGUAGES)}")
    backend = "metal" if language == "metal" else "cuda"
    depends = r.get(data, "depends", where, r.depends) or ()
    includes = r.get(data, "include", where, r.includes) or ()
    sources = r.get(data, "src", where, lambda v, k: r.sources(v, k, backend)) or ()
    kernels = [
        Kernel(
            name=name,
            backend=backend,
            depends=depends,
            sources=sources,
            includes=includes,
            cuda_capabilities=r.get(data, "cuda-capabilities", where, r.cuda_capabilities) or (),
        )
    ]
    if language == "cuda-hipify":
        kernels.append(
            Kernel(
                name=f"{name}_rocm",
                backend="rocm",
                depends=depends,
                sources=sources,
                includes=includes,
                rocm_archs=r.get(data, "rocm-archs", where, r.rocm_archs) or (),
            )
        )
    return kernels
