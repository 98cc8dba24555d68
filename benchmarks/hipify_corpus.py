"""Hipify and compile the .cu sources of every rocm kernel section under the given folders.

Run from the repository root (ROCm toolchain and torch installed, see scripts/setup.sh):
    python benchmarks/hipify_corpus.py [--arch gfx90a] [--std c++20] [--jobs 2]
        [--isystem DIR]... ROOT...

Each ROOT is searched for */build.toml (e.g. $BUILD2CMAKE_CORPUS/kernels-community and
$BUILD2CMAKE_CORPUS/kernel-builder-examples, which scripts/fetch-corpus.sh fills). For each kernel
section with backend = "rocm" (or the older language = "cuda-hipify"), each .cu source is hipified
with cmake_templates/rocm/build2cmake_hipify.py into a scratch folder, then compiled for --arch
with the HIP compiler, the installed torch's include folders and the definitions and flags
kernel-builder uses for HIP (USE_ROCM, ENABLE_FP8, -U__HIP_NO_HALF_*, -fno-gpu-rdc) plus
cpp_extension's (__HIP_PLATFORM_AMD__, HIPBLAS_V2, CUDA_HAS_FP16) and the kernel's own hip-flags.
Include folders are the ones the generated CMake passes: the hipified source's mirror folder, the
mirrored include folders, then the original ones. Prints one Markdown row per kernel, then one per
source.

--isystem adds headers the local ROCm lacks: Debian 12's ROCm 5.2 has no rocThrust/hipCUB (torch's
complex.h needs <thrust/complex.h> in HIP code); benchmarks/rocm_torch_shim/ stands in for the
ROCm-torch-only ATen/hip and c10/hip headers, to check a hipified source past them.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "cmake_templates" / "rocm" / "build2cmake_hipify.py"
DEFINES = [
    "-D__HIP_PLATFORM_AMD__=1",
    "-DUSE_ROCM=1",
    "-DHIPBLAS_V2",
    "-DCUDA_HAS_FP16=1",
    "-DENABLE_FP8",
    "-U__HIP_NO_HALF_CONVERSIONS__",
    "-U__HIP_NO_HALF_OPERATORS__",
]
# Headers only a ROCm build of torch ships: their absence is not the kernel's fault here.
TORCH_GPU_HEADER = re.compile(r"fatal error: '((?:ATen|c10)/hip/[^']+)' file not found")
# Filled once by main() from hip_compiler().
HIP_COMPILER: list[str] = []
# Where a crashing clang was: its stack dump names the file it was parsing.
CRASH_SITE = re.compile(r"^\d\.\t(\S+?/include/)?(\S+):\d+:\d+: ", re.MULTILINE)


@dataclass
class Source:
    """One .cu source of one rocm kernel section and what became of it."""

    project: Path
    kernel: str
    source: str
    includes: list[str]
    hip_flags: list[str]
    hipified: bool = False
    compiled: bool = False
    reason: str = ""
    seconds: float = 0.0
    headers: int = 0


@dataclass
class Kernel:
    project: str
    kernel: str
    archs: list[str]
    sources: list[Source] = field(default_factory=list)


def rocm_kernels(roots: list[Path]) -> list[Kernel]:
    """Every rocm kernel section (with its .cu sources) under the roots."""
    kernels = []
    for root in roots:
        for build_toml in sorted(root.glob("*/build.toml")):
            config = tomllib.loads(build_toml.read_text())
            for name, section in config.get("kernel", {}).items():
                if section.get("backend") != "rocm" and section.get("language") != "cuda-hipify":
                    continue
                kernel = Kernel(build_toml.parent.name, name, section.get("rocm-archs", []))
                for src in section.get("src", []):
                    if src.endswith(".cu"):
                        kernel.sources.append(
                            Source(
                                build_toml.parent,
                                name,
                                src,
                                section.get("include", []),
                                section.get("hip-flags", []),
                            )
                        )
                kernels.append(kernel)
    return kernels


def hip_compiler() -> list[str]:
    """The HIP compiler and the flags a generated build gives it: the build's own ROCm discovery
    (build2cmake_find_rocm.cmake, as doctor runs it), so /opt/rocm, Debian 12 and the chroot's
    ROCm 6.4 are all found as a build finds them."""
    sys.path.insert(0, str(REPO))
    from build2cmake.builds.doctor import find_rocm

    rocm, searched = find_rocm()
    if rocm is None:
        sys.exit(f"hipify_corpus: no ROCm found (searched {searched})")
    command = [rocm.compiler, f"--rocm-path={rocm.root}"]
    if rocm.bitcode:
        command.append(f"--hip-device-lib-path={rocm.bitcode}")
    if rocm.version:
        command.append(f"--hip-version={rocm.version}")
    return command


def torch_include_dirs() -> list[str]:
    program = "from torch.utils.cpp_extension import include_paths; print(*include_paths())"
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    ).stdout.split()


def first_error(stderr: str) -> str:
    missing = TORCH_GPU_HEADER.search(stderr)
    if missing:
        return f"includes {missing.group(1)} (ROCm torch only)"
    if "Segmentation fault" in stderr:
        site = CRASH_SITE.search(stderr)
        return "compiler crashed (segfault)" + (f" parsing {site.group(2)}" if site else "")
    for line in stderr.splitlines():
        if "error:" in line:
            return line.split("error:", 1)[1].strip()[:140]
    return stderr.strip().splitlines()[-1][:140] if stderr.strip() else "failed"


def check(
    item: Source,
    scratch: Path,
    arch: str,
    std: str,
    torch_includes: list[str],
    isystem: list[str],
) -> None:
    """Hipify one source, then compile it; records the outcome on `item`."""
    out = scratch / item.project.name / item.kernel
    stem = item.source[: -len(".cu")]
    output = out / f"{stem}.hip"
    command = [sys.executable, str(SCRIPT), "--project-dir", str(item.project)]
    command += ["--output-dir", str(out)]
    for include in item.includes:
        command += ["--include", include]
    command += ["--depfile", str(out / f"{stem}.hip.d"), "--output", str(output), item.source]
    start = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        item.reason = "hipify: " + result.stderr.strip()
        return
    item.hipified = True
    deps = (out / f"{stem}.hip.d").read_text().replace("\\\n", " ").split()
    item.headers = len(deps) - 2  # minus the target and the source
    compile_command = [*HIP_COMPILER, "-x", "hip", f"--offload-arch={arch}", f"-std={std}"]
    compile_command += ["-fPIC", "-fno-gpu-rdc", "-O2", *DEFINES, *item.hip_flags]
    compile_command.append(f"-I{output.parent}")
    compile_command += [f"-I{out / include}" for include in item.includes]
    compile_command += [f"-I{item.project / include}" for include in item.includes]
    compile_command += [f"-I{include}" for include in torch_includes]
    for folder in isystem:
        compile_command += ["-isystem", folder]
    compile_command += ["-c", str(output), "-o", str(output.with_suffix(".o"))]
    result = subprocess.run(compile_command, capture_output=True, text=True)
    item.seconds = time.monotonic() - start
    if result.returncode == 0:
        data = output.with_suffix(".o").read_bytes()
        item.compiled = f"amdgcn-amd-amdhsa--{arch}".encode() in data
        item.reason = "" if item.compiled else f"object has no {arch} code object"
    else:
        item.reason = first_error(result.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("roots", nargs="+", type=Path)
    parser.add_argument("--arch", default="gfx90a")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--std", default="c++20", help="C++ standard (torch >= 2.12: c++20)")
    parser.add_argument(
        "--isystem",
        action="append",
        default=[],
        metavar="DIR",
        help="extra system include folder, e.g. rocThrust/hipCUB headers your ROCm lacks",
    )
    args = parser.parse_args()
    kernels = rocm_kernels(args.roots)
    HIP_COMPILER.extend(hip_compiler())
    torch_includes = torch_include_dirs()
    items = [item for kernel in kernels for item in kernel.sources]
    with (
        tempfile.TemporaryDirectory(prefix="hipify-corpus-") as scratch,
        ThreadPoolExecutor(args.jobs) as pool,
    ):
        list(
            pool.map(
                lambda i: check(
                    i, Path(scratch), args.arch, args.std, torch_includes, args.isystem
                ),
                items,
            )
        )
    print(f"| project | kernel | .cu | hipified | compiles for {args.arch} ({args.std}) | reason |")
    print("| --- | --- | --- | --- | --- | --- |")
    for kernel in kernels:
        sources = kernel.sources
        if not sources:
            print(f"| {kernel.project} | {kernel.kernel} | 0 | n/a | n/a | no .cu sources |")
            continue
        hipified = sum(s.hipified for s in sources)
        compiled = sum(s.compiled for s in sources)
        reasons = sorted({f"{s.reason}" for s in sources if s.reason})
        print(
            f"| {kernel.project} | {kernel.kernel} | {len(sources)} | {hipified}/{len(sources)} "
            f"| {compiled}/{len(sources)} | {'; '.join(reasons)} |"
        )
    print()
    print("| project | source | project headers hipified | seconds | result |")
    print("| --- | --- | --- | --- | --- |")
    for item in items:
        outcome = "ok" if item.compiled else item.reason
        print(
            f"| {item.project.name} | {item.source} | {item.headers} | {item.seconds:.1f} "
            f"| {outcome} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
