"""Edition 5 (`[general] edition = 5`): the format kernel-builder writes today."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from build2cmake.config import sections
from build2cmake.config.model import KNOWN_BACKENDS, Project
from build2cmake.config.schema import Keys, KeySpec, Reader

FORMAT = "edition 5"

GENERAL_KEYS: Keys = {
    "name": KeySpec("str", required=True, doc="kernel name (the Python package, dashes -> _)"),
    "version": KeySpec("int", required=True, doc="major version of the kernel"),
    "edition": KeySpec("int", required=True, doc="format edition: 5"),
    "license": KeySpec("str", required=True, doc="SPDX license id"),
    "backends": KeySpec("str-list", required=True, doc="backends the kernel supports"),
    "upstream": KeySpec("str", doc="git URL of the project the kernel comes from"),
    "source": KeySpec("str", doc="git URL of this kernel's source"),
    "python-depends": KeySpec("str-list", doc="kernels loader dependencies, every backend"),
    "kernel-depends": KeySpec("any", doc="Hub kernels this kernel needs"),
    "hub": KeySpec("table", doc="Hub repository"),
    "cuda": KeySpec("table", doc="CUDA toolkit bounds and CUDA-only dependencies"),
    "neuron": KeySpec("table", doc="Neuron-only dependencies"),
    "tpu": KeySpec("table", doc="TPU-only dependencies"),
    "xpu": KeySpec("table", doc="XPU-only dependencies"),
}
_DEPENDS: Keys = {
    "python-depends": KeySpec("str-list", doc="kernels loader dependencies of this backend"),
    "kernel-depends": KeySpec("any", doc="Hub kernels this backend needs"),
}
BACKEND_TABLES: Mapping[str, Keys] = {
    "cuda": {
        "minver": KeySpec("version", doc="oldest CUDA toolkit"),
        "maxver": KeySpec("version", doc="newest CUDA toolkit (that minor release included)"),
        **_DEPENDS,
    },
    "neuron": _DEPENDS,
    "tpu": {"python-depends": _DEPENDS["python-depends"]},
    "xpu": _DEPENDS,
}
TOP_LEVEL_KEYS: Keys = {
    "general": KeySpec("table", required=True),
    "torch": KeySpec("table", doc="compiled torch ops"),
    "torch-noarch": KeySpec("table", doc="pure-Python torch ops"),
    "tvm-ffi": KeySpec("table", doc="Apache TVM FFI ops"),
    "kernel": KeySpec("table", doc="the kernels"),
}


def read(data: Mapping[str, Any], build_toml: Path) -> Project:
    """Convert an edition-5 document into the model."""
    r = Reader(build_toml, FORMAT)
    return read_editioned(r, data, GENERAL_KEYS, BACKEND_TABLES, multi_stable_abi=True)


def read_editioned(
    r: Reader,
    data: Mapping[str, Any],
    general_keys: Keys,
    backend_tables: Mapping[str, Keys],
    *,
    multi_stable_abi: bool,
) -> Project:
    """Editions 4 and 5 differ only in their key tables and in stable-abi's form."""
    r.check_keys(data, TOP_LEVEL_KEYS, "")
    general = r.get(data, "general", "", r.table) or {}
    r.check_keys(general, general_keys, "[general]")
    name = sections.package_name(r, general, hub_rule=True)
    backends = r.get(
        general, "backends", "[general]", lambda v, k: r.backend_list(v, k, KNOWN_BACKENDS)
    )
    repo_id, branch = sections.hub(r, general)
    tables, backend_python, backend_kernels = sections.backend_tables(r, general, backend_tables)
    cuda = tables.get("cuda", {})

    frameworks = [f for f in ("torch", "torch-noarch", "tvm-ffi") if f in data]
    if len(frameworks) != 1:
        r.fail(
            "[torch]",
            "give exactly one of [torch] (compiled ops), [torch-noarch] (pure-Python ops) "
            f"or [tvm-ffi]; found {', '.join(f'[{f}]' for f in frameworks) or 'none'}",
        )
    framework = frameworks[0] if frameworks else "torch"
    torch = noarch = tvm = None
    with r.attempt():
        if len(frameworks) != 1:
            pass  # recorded above; there is no one section to read
        elif framework == "torch":
            torch = sections.torch(
                r,
                data["torch"],
                sections.TORCH_KEYS_V4,
                stable_abi_backends=backends or (),
            )
        elif framework == "torch-noarch":
            noarch = sections.noarch(r, data["torch-noarch"])
        elif framework == "tvm-ffi":
            tvm = sections.tvm_ffi(r, data["tvm-ffi"])
    torch_data = data.get("torch")
    if (
        not multi_stable_abi
        and isinstance(torch_data, Mapping)
        and isinstance(torch_data.get("stable-abi"), Mapping)
    ):
        r.fail("[torch].stable-abi", "a per-backend table needs edition 5; give one version")

    found = sections.kernels(r, data, KNOWN_BACKENDS)
    if framework == "torch-noarch" and found:
        r.fail(
            "[kernel]",
            "a [torch-noarch] kernel compiles nothing; remove the [kernel.*] "
            "sections or use [torch]",
        )
    sections.check_kernels_against_backends(r, found, backends or ())
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
        source=r.get(general, "source", "[general]", r.git_url),
        hub_repo_id=repo_id,
        hub_branch=branch,
        python_depends=r.get(general, "python-depends", "[general]", r.python_depends) or (),
        backend_python_depends=backend_python,
        kernel_depends=r.get(general, "kernel-depends", "[general]", r.kernel_depends) or (),
        backend_kernel_depends=backend_kernels,
        cuda_minver=r.get(cuda, "minver", "[general.cuda]", r.version),
        cuda_maxver=r.get(cuda, "maxver", "[general.cuda]", r.version),
    )
