"""Run gemm once at a seed shape and report: backend, GPU archs compiled, error, time per call.

Usage (after `pip install --no-build-isolation -e kernels/gemm`):
    python kernels/gemm/example.py [--shape M N K] [--dtype e4m3fn|e4m3fnuz]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import gemm
import torch
from gemm.reference import gemm_reference as reference


def compiled_archs() -> str:
    """The GPU code objects in the loaded extension (from its clang offload bundles)."""
    try:
        from build2cmake.toolchains.offload import rocm_targets
    except ImportError:
        return "unknown (build2cmake is not installed)"
    extension = sys.modules[f"gemm.{gemm.ops.__name__.split('.')[-1]}"]
    targets = rocm_targets(Path(str(extension.__file__)))
    return ", ".join(targets) if targets else "none (host code only)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", nargs=3, type=int, default=[1024, 1536, 7168], metavar="N")
    parser.add_argument("--dtype", choices=["e4m3fn", "e4m3fnuz"], default="e4m3fnuz")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    m, n, k = args.shape
    fp8 = getattr(torch, f"float8_{args.dtype}")
    device = "cpu" if gemm.backend == "cpu" else "cuda"

    g = torch.Generator().manual_seed(0)
    a = (torch.randn(m, k, generator=g) * 4).to(fp8)
    b = (torch.randn(k, n, generator=g) * 4).to(fp8)
    a_scale = torch.exp(torch.randn(k // 128, m, generator=g))
    b_scale = torch.exp(torch.randn(k // 128, n // 128, generator=g))
    inputs = [t.to(device) for t in (a, b, a_scale, b_scale)]

    out = gemm.gemm(*inputs)  # warm-up
    times = []
    for _ in range(args.runs):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        gemm.gemm(*inputs, out=out)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    ref = reference(a, b, a_scale, b_scale)
    diff = out.cpu().double() - ref
    seconds = statistics.median(times)

    print(f"gemm {m}x{n}x{k} (MxNxK), {args.dtype}")
    print(f"  backend built:     {gemm.backend} (torch.ops.{gemm.ops.__name__.split('.')[-1]})")
    print(f"  GPU archs in .so:  {compiled_archs()}")
    print(
        f"  max abs error:     {diff.abs().max().item():.4g} "
        f"(largest |reference| {ref.abs().max().item():.4g})"
    )
    print(
        f"  rel. Frobenius:    {(diff.norm() / ref.norm()).item():.3e} (bf16 output rounding ~2e-3)"
    )
    print(
        f"  time per call:     {seconds * 1e3:.1f} ms median of {args.runs} "
        f"({2 * m * n * k / seconds / 1e9:.1f} GFLOP/s) on {device}"
    )


if __name__ == "__main__":
    main()
