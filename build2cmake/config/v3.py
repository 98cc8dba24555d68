"""v3: `[general].backends` lists the backends; no `edition`; `version`/`license` optional.

Also read: build2cmake's own earlier files, which wrote `universal = true` for a pure-Python
kernel. With no framework section and no kernels, the kernel is pure Python (torch-noarch), as
kernel-builder reads v3.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from build2cmake.config import sections
from build2cmake.config.model import KNOWN_BACKENDS, Noarch, Project
from build2cmake.config.schema import Keys, KeySpec, Reader

FORMAT = "v3"

GENERAL_KEYS: Keys = {
    "name": KeySpec("str", required=True, doc="kernel name (the Python package, dashes -> _)"),
    "backends": KeySpec("str-list", required=True, doc="backends the kernel supports"),
    "version": KeySpec("int", doc="major version of the kernel"),
    "license": KeySpec("str", doc="SPDX license id"),
    "upstream": KeySpec("str", doc="git URL of the project the kernel comes from"),
    "universal": KeySpec("bool", doc="a pure-Python kernel (build2cmake's earlier spelling)"),
    "python-depends": KeySpec("str-list", doc="kernels loader dependencies, every backend"),
    "hub": KeySpec("table", doc="Hub repository"),
    "cuda": KeySpec("table", doc="CUDA toolkit bounds and CUDA-only dependencies"),
    "neuron": KeySpec("table", doc="Neuron-only dependencies"),
    "xpu": KeySpec("table", doc="XPU-only dependencies"),
}
BACKEND_TABLES: Mapping[str, Keys] = {
    "cuda": {
        "minver": KeySpec("version", doc="oldest CUDA toolkit"),
        "maxver": KeySpec("version", doc="newest CUDA toolkit (that minor release included)"),
        "python-depends": KeySpec("str-list", doc="kernels loader dependencies of cuda"),
    },
    "neuron": {"python-depends": KeySpec("str-list")},
    "xpu": {"python-depends": KeySpec("str-list")},
}
TOP_LEVEL_KEYS: Keys = {
    "general": KeySpec("table", required=True),
    "torch": KeySpec("table", doc="compiled torch ops"),
    "tvm-ffi": KeySpec("table", doc="Apache TVM FFI ops"),
    "kernel": KeySpec("table", doc="the kernels"),
}


def read(data: Mapping[str, Any], build_toml: Path) -> Project:
    """Convert a v3 document into the model."""
    r = Reader(build_toml, FORMAT)
    r.check_keys(data, TOP_LEVEL_KEYS, "")
    general = r.get(data, "general", "", r.table) or {}
    r.check_keys(general, GENERAL_KEYS, "[general]")
    name = sections.package_name(r, general, hub_rule=False)
    backends = r.get(
        general, "backends", "[general]", lambda v, k: r.backend_list(v, k, KNOWN_BACKENDS)
    )
    repo_id, branch = sections.hub(r, general)
    tables, backend_python, _ = sections.backend_tables(r, general, BACKEND_TABLES)
    cuda = tables.get("cuda", {})
    universal = r.get(general, "universal", "[general]", r.boolean) or False
    found = sections.kernels(r, data, KNOWN_BACKENDS)
    sections.check_kernels_against_backends(r, found, backends or ())

    torch = tvm = None
    framework = "torch"
    if "torch" in data and "tvm-ffi" in data:
        r.fail("[tvm-ffi]", "give either [torch] or [tvm-ffi], not both")
    if "tvm-ffi" in data:
        framework = "tvm-ffi"
        with r.attempt():
            tvm = sections.tvm_ffi(r, data["tvm-ffi"])
    elif "torch" in data:
        with r.attempt():
            torch = sections.torch(r, data["torch"], sections.TORCH_KEYS_V3, stable_abi_backends=())
    if universal and "tvm-ffi" in data:
        r.fail(
            "[general].universal",
            "a universal kernel is pure-Python torch ops and cannot have a [tvm-ffi] section; "
            "remove universal = true or the [tvm-ffi] section",
        )
    if universal or (torch is None and tvm is None and not found):
        framework = "torch-noarch"
        if found:
            r.fail(
                f"[kernel.{found[0].name}]",
                "a universal kernel (universal = true) has no compiled kernels; "
                "remove the [kernel.*] sections or set universal = false",
            )
    elif framework == "torch" and torch is None and "torch" not in data:
        r.fail("[torch]", "missing section; it needs src = [...] listing the torch binding sources")
    noarch = None
    if framework == "torch-noarch":
        noarch = Noarch(pyext=torch.pyext if torch else ("py", "pyi"), universal=universal)
        torch = None
    return sections.finish(
        r,
        name=name or "",
        backends=backends or (),
        torch=torch,
        kernels=found,
        framework=framework,
        noarch=noarch,
        tvm_ffi=tvm,
        version=r.get(general, "version", "[general]", r.integer),
        license=r.get(general, "license", "[general]", r.string),
        upstream=r.get(general, "upstream", "[general]", r.git_url),
        hub_repo_id=repo_id,
        hub_branch=branch,
        python_depends=r.get(general, "python-depends", "[general]", r.python_depends) or (),
        backend_python_depends=backend_python,
        cuda_minver=r.get(cuda, "minver", "[general.cuda]", r.version),
        cuda_maxver=r.get(cuda, "maxver", "[general.cuda]", r.version),
    )
