"""v2: kernels tagged with `backend`, no `[general].backends` (the ROCm guide's format).

The backends are those of the kernel sections; `universal = true` (no kernels) is a pure-Python
kernel for every backend of that time.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from build2cmake.config import loader_rules, sections
from build2cmake.config.model import Noarch, Project
from build2cmake.config.schema import KERNEL_KEYS, Keys, KeySpec, Reader

FORMAT = "v2"

# The backends v1 and v2 knew; a universal kernel of those formats declares all of them.
LEGACY_BACKENDS = ("cpu", "cuda", "metal", "rocm", "xpu")

GENERAL_KEYS: Keys = {
    "name": KeySpec("str", required=True, doc="kernel name (the Python package, dashes -> _)"),
    "universal": KeySpec("bool", doc="a pure-Python kernel with nothing to compile"),
    "cuda-minver": KeySpec("version", doc="oldest CUDA toolkit"),
    "cuda-maxver": KeySpec("version", doc="newest CUDA toolkit"),
    # v2 has no per-backend tables: a name of one backend's list (kernel-builder's v2 took
    # nvidia-cutlass-dsl here) is read as that backend's.
    "python-depends": KeySpec("str-list", doc="Python dependencies the kernels loader accepts"),
    "hub": KeySpec("table", doc="Hub repository"),
    # build2cmake's own files of this format also wrote these two.
    "version": KeySpec("int", doc="major version of the kernel"),
    "license": KeySpec("str", doc="SPDX license id"),
}
TOP_LEVEL_KEYS: Keys = {
    "general": KeySpec("table", required=True),
    "torch": KeySpec("table", doc="compiled torch ops"),
    "kernel": KeySpec("table", doc="the kernels"),
}


def read(data: Mapping[str, Any], build_toml: Path) -> Project:
    """Convert a v2 document into the model."""
    r = Reader(build_toml, FORMAT)
    r.check_keys(data, TOP_LEVEL_KEYS, "")
    general = r.get(data, "general", "", r.table) or {}
    r.check_keys(general, GENERAL_KEYS, "[general]")
    name = sections.package_name(r, general, hub_rule=False)
    repo_id, branch = sections.hub(r, general)
    universal = r.get(general, "universal", "[general]", r.boolean) or False
    python_depends, backend_python_depends = loader_rules.python_dependencies().split(
        r.get(
            general,
            "python-depends",
            "[general]",
            functools.partial(r.python_depends, any_backend=True),
        )
        or ()
    )
    found = sections.kernels(r, data, LEGACY_BACKENDS, KERNEL_KEYS)
    torch = None
    if "torch" in data:
        with r.attempt():
            torch = sections.torch(r, data["torch"], sections.TORCH_KEYS_V3, stable_abi_backends=())
    if universal:
        if found:
            r.fail(
                f"[kernel.{found[0].name}]",
                "a universal kernel (universal = true) has no compiled kernels; "
                "remove the [kernel.*] sections or set universal = false",
            )
        backends: tuple[str, ...] = LEGACY_BACKENDS
    else:
        if not found:
            r.fail(
                "[kernel]",
                "no [kernel.<name>] section; add one, or set universal = true "
                "in [general] for a pure-Python kernel",
            )
        elif torch is None and "torch" not in data:
            r.fail(
                "[torch]", "missing section; it needs src = [...] listing the torch binding sources"
            )
        backends = tuple(sorted({k.backend for k in found}))
    return sections.finish(
        r,
        name=name or "",
        backends=backends,
        torch=None if universal else torch,
        kernels=found,
        framework="torch-noarch" if universal else "torch",
        noarch=Noarch(pyext=torch.pyext if torch else ("py", "pyi"), universal=True)
        if universal
        else None,
        version=r.get(general, "version", "[general]", r.integer),
        license=r.get(general, "license", "[general]", r.string),
        hub_repo_id=repo_id,
        hub_branch=branch,
        python_depends=python_depends,
        backend_python_depends=backend_python_depends,
        cuda_minver=r.get(general, "cuda-minver", "[general]", r.version),
        cuda_maxver=r.get(general, "cuda-maxver", "[general]", r.version),
    )
