"""Build variant names as the Hugging Face `kernels` library computes them for this machine.

`kernels` (kernels/variants.py and kernels/backends.py, read from the 0.17 release) picks the
folder build/<variant>/ whose name matches the running system:

    torch<major><minor>-<cxx11|cxx98>-<backend>-<cpu>-<os>      compiled kernels
    torch-universal                                              pure-Python kernels

where <backend> is `cpu`, `cu<major><minor>` (torch.version.cuda) or `rocm<major><minor>`
(torch.version.hip), <cpu> is platform.machine() and <os> platform.system().lower().
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass

from build2cmake.ground.errors import Build2CMakeError

UNIVERSAL_VARIANT = "torch-universal"


@dataclass(frozen=True)
class TorchInfo:
    """What the build's interpreter has: torch's version, C++ ABI and backend."""

    version: str  # "2.13.0" (no local tag)
    cxx11_abi: bool
    backend: str  # "cpu", "cuda" or "rocm"
    backend_version: str | None  # "13.0" / "6.3" for GPU builds of torch


_TORCH_QUERY = (
    "import json, torch\n"
    "hip = torch.version.hip\n"
    "print(json.dumps({'version': torch.__version__.split('+')[0],\n"
    "  'cxx11': bool(torch.compiled_with_cxx11_abi()),\n"
    "  'backend': 'rocm' if hip else 'cuda' if torch.version.cuda else 'cpu',\n"
    "  'backend_version': hip.split('-')[0] if hip else torch.version.cuda}))\n"
)

_TORCH_BACKEND_QUERY = (
    "import importlib.util, os\n"
    "spec = importlib.util.find_spec('torch')\n"
    "if spec is None or spec.origin is None:\n"
    "    raise SystemExit(\"ModuleNotFoundError: No module named 'torch'\")\n"
    "version = {}\n"
    "with open(os.path.join(os.path.dirname(spec.origin), 'version.py')) as source:\n"
    "    exec(source.read(), version)\n"
    "print('rocm' if version.get('hip') else 'cuda' if version.get('cuda') else 'cpu')\n"
)

# torch.version.cuda / torch.version.hip, read the same cheap way. kernels names the backend of
# the variant it loads after these (kernels/backends.py: `cu<major><minor>` of
# torch.version.cuda, `rocm<major><minor>` of torch.version.hip without its "-<build>" tail).
_TORCH_TOOLKIT_QUERY = _TORCH_BACKEND_QUERY.replace(
    "print('rocm' if version.get('hip') else 'cuda' if version.get('cuda') else 'cpu')\n",
    "hip, cuda = version.get('hip'), version.get('cuda')\n"
    "print('rocm', hip.split('-')[0]) if hip else print('cuda', cuda) if cuda else print('cpu')\n",
)


# The folder child interpreters start in. `python -c` puts its working folder first on sys.path,
# and build2cmake usually runs in the (untrusted) project, where a planted json.py would run in
# place of the standard library's. Not `python -I`, which would also drop PYTHONPATH and the user
# site, where some users have torch.
NEUTRAL_FOLDER = "/"


def _run_query(python: str, code: str) -> str:
    result = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, cwd=NEUTRAL_FOLDER, check=False
    )
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise Build2CMakeError(
            f"{python} cannot import torch ({last}); install it: {python} -m pip install torch"
        )
    return result.stdout


def installed_torch_backend(python: str = sys.executable) -> str:
    """`cpu`, `cuda` or `rocm`: what `python`'s torch was built for, read from torch/version.py
    (importing torch takes seconds; this takes a few hundredths)."""
    return _run_query(python, _TORCH_BACKEND_QUERY).strip()


def installed_torch_toolkit(python: str = sys.executable) -> tuple[str, str | None]:
    """(`cpu`|`cuda`|`rocm`, torch.version.cuda or torch.version.hip) of `python`'s torch."""
    fields = _run_query(python, _TORCH_TOOLKIT_QUERY).split()
    return fields[0], fields[1] if len(fields) > 1 else None


def toolkit_for_variant(
    backend: str,
    compiler_version: str | None,
    torch_toolkit: tuple[str, str | None],
    *,
    allow_mismatch: bool = False,
) -> tuple[str | None, str | None]:
    """The toolkit release a `backend` variant is named after, and a note for the user.

    kernels loads the folder named after the CUDA/ROCm release of the torch it runs with, so a
    build against a CUDA (ROCm) torch is named after torch.version.cuda (.hip), whatever the
    compiler's release. A compiler of another major release than torch's is refused unless
    `allow_mismatch`: the extension would need runtime libraries torch does not load. Against a
    torch built for another backend (a CPU torch), the compiler's release names the variant.
    """
    if backend == "cpu":
        return None, None
    compiler = {"cuda": "nvcc", "rocm": "the HIP compiler"}[backend]
    toolkit = {"cuda": "CUDA", "rocm": "ROCm"}[backend]
    torch_backend, torch_version = torch_toolkit
    if torch_backend != backend or not torch_version:
        note = (
            f"note: torch is a {torch_backend} build; the variant is named after {compiler}'s "
            f"{toolkit} {compiler_version} (kernels loads it only with a torch built for "
            f"{toolkit} {compiler_version})"
        )
        return compiler_version, note
    if compiler_version is None or _major_minor(compiler_version) == _major_minor(torch_version):
        return torch_version, None
    if _major_minor(compiler_version)[0] != _major_minor(torch_version)[0] and not allow_mismatch:
        raise Build2CMakeError(
            f"{compiler} is {toolkit} {compiler_version}, but torch was built with {toolkit} "
            f"{torch_version}: a different major release, whose runtime libraries torch does not "
            f"load. Use a {toolkit} {_major_minor(torch_version)[0]}.x compiler (e.g. set "
            "CUDA_HOME), or pass --allow-toolkit-mismatch to build anyway"
        )
    tag = backend_tag(backend, torch_version)
    note = (
        f"warning: {compiler} is {toolkit} {compiler_version}, torch was built with {toolkit} "
        f"{torch_version}; the variant is named after torch's ({tag}), the folder kernels "
        "looks for with this torch"
    )
    return torch_version, note


def query_torch(python: str = sys.executable) -> TorchInfo:
    """What `python`'s torch is (version, C++ ABI, backend), asked by importing it in a child
    process (doctor: it also proves torch imports)."""
    data = json.loads(_run_query(python, _TORCH_QUERY))
    return TorchInfo(
        version=data["version"],
        cxx11_abi=data["cxx11"],
        backend=data["backend"],
        backend_version=data["backend_version"],
    )


def _major_minor(version: str) -> tuple[int, int]:
    parts = version.split(".")
    return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0


def backend_tag(backend: str, backend_version: str | None) -> str:
    """`cpu`, `cu130` or `rocm52`: the backend part of a variant name."""
    if backend == "cpu":
        return "cpu"
    if not backend_version:
        raise Build2CMakeError(f"the {backend} build did not report its toolkit version")
    major, minor = _major_minor(backend_version)
    prefix = {"cuda": "cu", "rocm": "rocm"}[backend]
    return f"{prefix}{major}{minor}"


def _compute_system(
    backend: str, backend_version: str | None, machine: str | None, system: str | None
) -> str:
    """The part of an arch variant's name after its framework: cu130-x86_64-linux."""
    cpu = machine or platform.machine()
    os_name = (system or platform.system()).lower()
    if os_name == "windows" and cpu == "AMD64":
        cpu = "x86_64"
    if os_name == "darwin" and cpu == "arm64":
        cpu = "aarch64"
    return f"{backend_tag(backend, backend_version)}-{cpu}-{os_name}"


def arch_variant(
    torch_version: str,
    cxx11_abi: bool,
    backend: str,
    backend_version: str | None,
    machine: str | None = None,
    system: str | None = None,
    stable_abi: str | None = None,
) -> str:
    """The variant folder name of a compiled build, e.g. torch213-cxx11-cpu-x86_64-linux.

    A build against torch's stable ABI is named after that ABI's version, not the torch that
    compiled it (torch-stable-abi210-cpu-x86_64-linux), as `kernels` looks for it.
    """
    major, minor = _major_minor(stable_abi or torch_version)
    compute = _compute_system(backend, backend_version, machine, system)
    if stable_abi:
        return f"torch-stable-abi{major}{minor}-{compute}"
    abi = "cxx11" if cxx11_abi else "cxx98"
    return f"torch{major}{minor}-{abi}-{compute}"


def tvm_ffi_variant(
    tvm_ffi_version: str,
    backend: str,
    backend_version: str | None,
    machine: str | None = None,
    system: str | None = None,
) -> str:
    """The variant folder of an Apache TVM FFI build, e.g. tvm-ffi01-cu130-x86_64-linux: named
    after the apache-tvm-ffi major.minor release (kernels' variants.TvmFfi, kernel-builder's
    tvm-ffi build-variants.cmake) and the toolkit that compiled it, not after any torch."""
    major, minor = _major_minor(tvm_ffi_version)
    return f"tvm-ffi{major}{minor}-{_compute_system(backend, backend_version, machine, system)}"


def tvm_ffi_default_backend(buildable: tuple[str, ...]) -> str:
    """The backend a tvm-ffi build picks when none is given (no torch to ask): cuda when nvcc is
    found and declared, else cpu when declared, else the first declared; as the generated CMake
    does (build2cmake_tvm_ffi_default_backend)."""
    if "cuda" in buildable and _nvcc_found():
        return "cuda"
    return "cpu" if "cpu" in buildable else buildable[0]


def _nvcc_found() -> bool:
    homes = [os.environ.get(name, "") for name in ("CUDA_HOME", "CUDA_PATH")]
    candidates = [os.path.join(home, "bin", "nvcc") for home in homes if home]
    candidates.append("/usr/local/cuda/bin/nvcc")
    return shutil.which("nvcc") is not None or any(os.access(c, os.X_OK) for c in candidates)
