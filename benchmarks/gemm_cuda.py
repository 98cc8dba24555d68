"""kernels/gemm on a CUDA GPU: numerics against float64, then speed against cuBLAS and bf16.

Run (after `pip install --no-build-isolation -e kernels/gemm` with a CUDA torch):
    python benchmarks/gemm_cuda.py [--out benchmarks/RESULTS.md]

For each shape it checks our op against a float64 reference built from the dequantised inputs,
then times, with CUDA events (median of --runs after --warmup), on the same inputs:
  ours     gemm.gemm as built: on compute capability 9.0 (H100) the CUTLASS TMA + wgmma kernel
           with block-wise scale promotion, elsewhere our mma.sync kernel
  mma      gemm.gemm with GEMM_CUDA_KERNEL=mma: our own mma.sync (m16n8k32 e4m3) kernel
  cublas   torch.nn.functional.scaled_mm with BlockWise1x128 (a) / BlockWise128x128 (b) scales;
           b passed column-major as cuBLAS requires (the transpose is done before timing)
  deq+bf16 dequantise a and b to bfloat16 with their scales, then torch.matmul (all timed)
and prints TFLOP/s (2 M N K / time) and the ratios ours/cublas and ours/deq+bf16 (> 1: we win).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
from collections.abc import Callable

import gemm
import torch
import torch.nn.functional as F
from gemm.reference import gemm_reference as reference

SHAPES = [  # M, N, K
    (1024, 1536, 7168),
    (1024, 4608, 7168),
    (6144, 1536, 7168),
    (6144, 4608, 7168),
    (1024, 7168, 256),
    (6144, 7168, 256),
    (6144, 7168, 2304),
]


def make_inputs(m: int, n: int, k: int, seed: int):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = (torch.randn(m, k, device="cuda", generator=g) * 4).to(torch.float8_e4m3fn)
    b = (torch.randn(k, n, device="cuda", generator=g) * 4).to(torch.float8_e4m3fn)
    a_scale = torch.exp(torch.randn(k // 128, m, device="cuda", generator=g))
    b_scale = torch.exp(torch.randn(k // 128, n // 128, device="cuda", generator=g))
    return a, b, a_scale, b_scale


def dequantised_bf16(a, b, a_scale, b_scale) -> torch.Tensor:
    a16 = (a.float() * a_scale.t().repeat_interleave(128, dim=1)).bfloat16()
    b_full = b_scale.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)
    return a16 @ (b.float() * b_full).bfloat16()


def cublas_blockwise(a, b, a_scale, b_scale) -> Callable[[], torch.Tensor] | str:
    """A call of scaled_mm with block scales, or why cuBLAS refused every layout we tried."""
    b_col = b.t().contiguous().t()
    a_scale_mk = a_scale.t()  # (M, K/128), M-major: what 1x128 scaling expects
    problems = []
    # cuBLAS wants b's scales as (K/128, N/128) with K/128 the fast dimension.
    layouts = [("(K/128,N/128) K-major", b_scale.t().contiguous().t())]
    for name, sb in layouts:

        def call(sb: torch.Tensor = sb) -> torch.Tensor:
            return F.scaled_mm(
                a, b_col, a_scale_mk, F.ScalingType.BlockWise1x128,
                sb, F.ScalingType.BlockWise128x128, output_dtype=torch.bfloat16,
            )  # fmt: skip

        try:
            out = call()
        except (RuntimeError, ValueError) as error:
            problems.append(f"{name}: {str(error).splitlines()[0][:120]}")
            continue
        ref = reference(a, b, a_scale, b_scale)
        if ((out.double() - ref).norm() / ref.norm()).item() < 1e-2:
            return call
        problems.append(f"{name}: ran but disagrees with the reference")
    return "refused: " + " | ".join(problems)


def driver_version() -> str:
    try:
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        return subprocess.run(query, capture_output=True, text=True, check=True).stdout.split()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


def time_ms(fn: Callable[[], object], warmup: int, runs: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--out", help="write the table (Markdown) to this file")
    args = parser.parse_args()
    assert gemm.backend == "cuda" and torch.cuda.is_available(), "needs the cuda build and a GPU"

    props = torch.cuda.get_device_properties(0)
    lines = [
        f"GPU: {props.name} (sm_{props.major}{props.minor}, {props.multi_processor_count} SMs); "
        f"driver {driver_version()}; "
        f"torch {torch.__version__}, CUDA {torch.version.cuda}",
        "",
        "| M x N x K | rel. error vs f64 (ours, mma) | ours TFLOP/s | mma TFLOP/s | "
        "cuBLAS blockwise | deq+bf16 | ours/cuBLAS | ours/deq+bf16 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m, n, k in SHAPES:
        a, b, a_scale, b_scale = make_inputs(m, n, k, seed=m + n + k)
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        ref = reference(a, b, a_scale, b_scale)
        flop = 2 * m * n * k
        call = functools.partial(gemm.ops.gemm, out, a, b, a_scale, b_scale)
        errors, times = [], []
        for kernel in ("default", "mma"):
            if kernel == "mma":
                os.environ["GEMM_CUDA_KERNEL"] = "mma"
            out.zero_()
            call()
            errors.append(((out.double() - ref).norm() / ref.norm()).item())
            times.append(time_ms(call, args.warmup, args.runs))
            os.environ.pop("GEMM_CUDA_KERNEL", None)
        (error, mma_error), (ours, mma) = errors, times
        deq = time_ms(
            functools.partial(dequantised_bf16, a, b, a_scale, b_scale), args.warmup, args.runs
        )
        cublas_call = cublas_blockwise(a, b, a_scale, b_scale)
        if callable(cublas_call):
            cublas = time_ms(cublas_call, args.warmup, args.runs)
            cublas_text = f"{flop / cublas / 1e9:.0f}"
            vs_cublas = f"{cublas / ours:.2f}"
        else:
            cublas_text, vs_cublas = cublas_call, "-"
        row = (
            f"| {m} x {n} x {k} | {error:.2e}, {mma_error:.2e} | {flop / ours / 1e9:.0f} | "
            f"{flop / mma / 1e9:.0f} | {cublas_text} | "
            f"{flop / deq / 1e9:.0f} | {vs_cublas} | {deq / ours:.2f} |"
        )
        lines.append(row)
        print(row, flush=True)
        assert max(errors) < 1e-2, f"gemm is wrong at {m}x{n}x{k}: relative errors {errors}"
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)


if __name__ == "__main__":
    main()
