"""Time per call against the kernels' own durations, from CUDA-graph replays on a CUDA GPU: is a
difference between two configurations (or ours and cuBLAS) inside the kernel or between kernels?

Run (after `pip install --no-build-isolation -e kernels/gemm` with a CUDA torch):
    python benchmarks/kernel_times.py [--shapes "M,N,K;..."] [--configs "default cuBLAS ..."]

For each shape and configuration ("default": the dispatch table's choice; "cuBLAS": its blockwise
scaled_mm; any other name: GEMM_SM90_CONFIG), a graph of 40 calls over the same rotating input
sets as benchmarks/gemm_cuda.py is replayed:
  per call   CUDA events around 20 replays, divided by the calls;
  kernel     torch.profiler's durations of the graph's kernels over 5 replays: shortest, median;
  gap        the median time from one kernel's end to the next one's start (negative: they
             overlap, as kernels launched with programmatic dependent launch do: such a kernel
             starts early and waits for the one before, and its duration includes the wait).
Run 23f of the gemm tuning log (`git show c631808:benchmarks/RESULTS.md`) ran the first form
of this script (ours and cuBLAS only).
"""

from __future__ import annotations

import argparse
import itertools
import statistics

import torch
from gemm_cuda import (  # this folder: run as a script
    Env,
    Inputs,
    capture_graph,
    cublas,
    make_sets,
    ours,
    parse_shapes,
)
from torch.profiler import ProfilerActivity, profile

CALLS = 40  # calls per graph
SHAPES = [(256, 8192, 2048), (256, 8192, 4096), (256, 16384, 1024), (128, 32768, 512)]


def capture(sets: list[Inputs], config: str) -> torch.cuda.CUDAGraph:
    """A graph of CALLS calls of `config` over the input sets."""
    make = cublas if config == "cuBLAS" else ours
    with Env("GEMM_SM90_CONFIG", None if config in ("default", "cuBLAS") else config):
        return capture_graph([make(s) for s in sets], CALLS)


def measure(graph: torch.cuda.CUDAGraph) -> dict[str, object]:
    for _ in range(20):
        graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        graph.replay()
    end.record()
    end.synchronize()
    per_call = start.elapsed_time(end) * 1000 / (20 * CALLS)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            graph.replay()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    kernels.sort(key=lambda e: e.time_range.start)
    if not kernels:
        raise RuntimeError("the profiler recorded no kernels of the graph's replays")
    durations = [e.time_range.end - e.time_range.start for e in kernels]
    gaps = [b.time_range.start - a.time_range.end for a, b in itertools.pairwise(kernels)]
    return {
        "per_call": per_call,
        "shortest": min(durations),
        "median": statistics.median(durations),
        "gap": statistics.median(gaps) if gaps else float("nan"),
        "names": sorted({e.name for e in kernels}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", help='"M,N,K;M,N,K;..." (default: run 23f\'s four)')
    parser.add_argument("--configs", default="default cuBLAS", help="space-separated names")
    args = parser.parse_args()
    shapes = parse_shapes(args.shapes) if args.shapes else SHAPES
    configs = args.configs.split()
    print("us per call and per kernel, replayed from CUDA graphs of", CALLS, "calls\n")
    print("| M x N x K | configuration | per call | kernel: shortest | median | gap | kernels |")
    print("|---|---|---|---|---|---|---|")
    for m, n, k in shapes:
        sets = make_sets(m, n, k, seed=0)
        for config in configs:
            try:
                graph = capture(sets, config)
                r = measure(graph)
                del graph
            except RuntimeError as failure:  # e.g. cuBLAS refusing the shape
                print(
                    f"| {m} x {n} x {k} | {config} | failed: {str(failure).splitlines()[0][:80]}"
                    " | | | | |"
                )
                continue
            names = ", ".join(name[:60] for name in r["names"])
            print(
                f"| {m} x {n} x {k} | {config} | {r['per_call']:.2f} | {r['shortest']:.2f} "
                f"| {r['median']:.2f} | {r['gap']:.2f} | {names} |"
            )
        del sets


if __name__ == "__main__":
    main()
