"""Does writing the same output on every call make a GEMM faster? Ours and cuBLAS, each both ways,
side by side, from CUDA-graph replays on a CUDA GPU.

Run (after `pip install --no-build-isolation -e kernels/gemm` with a CUDA torch):
    python benchmarks/output_reuse.py [--shapes "M,N,K;..."]

The calls cycle over gemm_cuda.py's input sets (together more than twice the L2 cache):
  ours              gemm.gemm into each set's own output (as gemm_cuda.py times it)
  ours, one out     every call writes the first set's output
  cuBLAS            scaled_mm, each result kept until its set's next call (as gemm_cuda.py
                    times it since run 24: as many outputs as ours)
  cuBLAS, one out   each result freed at once: the allocator hands every call the same block
                    (as gemm_cuda.py timed it through run 23)
An output written on every call stays in L2, and its lines are overwritten there instead of going
out to DRAM once per call. Two passes over the variants, the second in reverse order; TFLOP/s is
their mean.
"""

from __future__ import annotations

import argparse

from gemm_cuda import BATCH, cublas, graph_ms, make_sets, ours, parse_shapes

SHAPES = [  # where cuBLAS led in run 23e, then the four
    (256, 8192, 2048),
    (128, 32768, 512),
    (256, 16384, 1024),
    (256, 7168, 2048),
    (80, 16384, 1024),
    (96, 16384, 1536),
    (256, 7168, 1536),
    (1024, 1536, 7168),
    (1024, 4608, 7168),
    (6144, 1536, 7168),
    (6144, 4608, 7168),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", help='"M,N,K;M,N,K;..." (default: eleven)')
    args = parser.parse_args()
    shapes = parse_shapes(args.shapes) if args.shapes else SHAPES
    names = ["ours", "ours, one out", "cuBLAS", "cuBLAS, one out"]
    print(f"TFLOP/s from CUDA graphs of {BATCH} calls, two passes\n")
    print("| M x N x K | " + " | ".join(names) + " | ours / cuBLAS | one out: ours / cuBLAS |")
    print("|---" * (len(names) + 3) + "|")
    for m, n, k in shapes:
        sets = make_sets(m, n, k, seed=m + n + k)
        variants = {
            "ours": [ours(x) for x in sets],
            "ours, one out": [ours(x, out=sets[0].out) for x in sets],
            "cuBLAS": [cublas(x) for x in sets],
            "cuBLAS, one out": [cublas(x, keep=False) for x in sets],
        }
        try:
            variants["cuBLAS"][0]()
        except (RuntimeError, ValueError):  # cuBLAS refuses: K / 128 or M not a multiple of 4
            for name in names[2:]:
                del variants[name]
        ms: dict[str, float] = dict.fromkeys(variants, 0.0)
        for order in (list(variants), list(variants)[::-1]):
            for name in order:
                ms[name] += graph_ms(variants[name], warmup=10, runs=20) / 2
        rate = {name: f"{2 * m * n * k / t / 1e9:.0f}" for name, t in ms.items()}
        ratios = ["-", "-"]
        if "cuBLAS" in ms:
            ratios = [
                f"{ms['cuBLAS'] / ms['ours']:.2f}",
                f"{ms['cuBLAS, one out'] / ms['ours, one out']:.2f}",
            ]
        print(
            f"| {m} x {n} x {k} | "
            + " | ".join([rate.get(name, "refused") for name in names] + ratios)
            + " |",
            flush=True,
        )
        for x in sets:
            x.cublas_out = None
        del sets, variants


if __name__ == "__main__":
    main()
