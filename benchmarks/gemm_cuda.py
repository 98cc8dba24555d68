"""kernels/gemm on a CUDA GPU: numerics against float64, then speed against cuBLAS and bf16.

Run (after `pip install --no-build-isolation -e kernels/gemm` with a CUDA torch):
    python benchmarks/gemm_cuda.py [--out bench.md] [--explore explore.md] [--deepgemm]

For each shape it checks our op against a float64 reference built from the dequantised inputs,
then times, on the same inputs:
  ours      gemm.gemm as built, b column-major (b = w.t(), w stored (N, K): the layout cuBLAS and
            DeepGEMM take, read without a copy); on compute capability 9.0 (H100) the CUTLASS
            TMA + wgmma kernel that the dispatch table in gemm_sm90.cu picks for the shape
  ours rm   the same with b row-major (K, N): includes our transpose of b on every call
  mma       GEMM_CUDA_KERNEL=mma: our own mma.sync (m16n8k32 e4m3) kernel, b column-major
  cublas    torch.nn.functional.scaled_mm with BlockWise1x128 (a) / BlockWise128x128 (b) scales;
            each result kept until its input set's next call, so that its outputs rotate as ours
            do (cublas() says why)
  deepgemm  DeepGEMM's fp8_gemm_nt (--deepgemm, when the deep_gemm package imports)
  deq+bf16  dequantise a and b to bfloat16 with their scales, then torch.matmul (all timed)
With --explore it also times every configuration built (GEMM_SM90_CONFIG=<name>, names read from
gemm_sm90_configs.h, or those $EXPLORE_CONFIGS lists, where "default" is the dispatch table's
choice and "cuBLAS" cuBLAS's kernel) at every shape, each kernel alone (CUDA graphs), beside
the time torch takes to fill the output (the write-bandwidth floor of short K), and writes that
matrix; then the tile orders, also from CUDA graphs (EXPLORE_ORDERS=0 leaves them
out; $EXPLORE_ORDER_CONFIGS and $EXPLORE_ORDER_LIST, "swizzle,raster ...", choose them).

Timing: CUDA events around a batch of 10 calls (median of --runs batches after --warmup calls);
the calls cycle over enough input sets that together they exceed twice the L2 cache, so no call
finds its operands in L2 from the previous one. TFLOP/s = 2 M N K / time per call. A second table
replays the same batch of calls (ours, cuBLAS, DeepGEMM) from a CUDA graph: where the host's
launch work per call exceeds the kernel's time (small problems), that is the kernel's own rate.
Run numbers in the comments (run 22, 30) cite the gemm tuning log, the journal of the table's
measurements: `git show c631808:benchmarks/RESULTS.md`. The current figures are in
benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

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
    # The nearest K that cuBLAS accepts (K/128 a multiple of 4) for the three rows above.
    (1024, 7168, 512),
    (6144, 7168, 512),
    (6144, 7168, 2048),
    (6144, 7168, 2560),
]
BATCH = 10
# Tile orders tried with --explore (GEMM_SM90_SWIZZLE, GEMM_SM90_RASTER: 0 heuristic, 1 along M,
# 2 along N) on a few configurations ("default": the dispatch table's choice).
ORDERS = [("swizzle 2", 2, 0), ("swizzle 4", 4, 0), ("swizzle 8", 8, 0), ("along M", 1, 1)]
ORDERS += [("along N", 1, 2), ("swizzle 4 along N", 4, 2)]
ORDER_CONFIGS = ["default", "coop_128x128_c1x2", "coop_128x128_c1x1"]
# $EXPLORE_ORDER_CONFIGS and $EXPLORE_ORDER_LIST ("swizzle,raster ...") replace them (in main).
# Our own kernel ignores both settings: it walks groups of 8 row blocks (tuning log run 13c
# measured other orders for it).
CONFIGS_H = Path(__file__).resolve().parent.parent / "kernels/gemm/gemm_cuda/gemm_sm90_configs.h"


def sm90_configs() -> list[str]:
    text = CONFIGS_H.read_text()
    block = text[text.index("#define GEMM_SM90_CONFIGS(X)") :].split("\n\n")[0]
    return re.findall(r"X\((\w+)\)", block)


class Inputs:
    """One problem's operands; b in both layouts (the same values)."""

    def __init__(self, m: int, n: int, k: int, seed: int) -> None:
        g = torch.Generator(device="cuda").manual_seed(seed)
        self.a = (torch.randn(m, k, device="cuda", generator=g) * 4).to(torch.float8_e4m3fn)
        w = (torch.randn(n, k, device="cuda", generator=g) * 4).to(torch.float8_e4m3fn)
        self.b_col = w.t()  # (K, N), K contiguous
        self.b_row = self.b_col.contiguous()  # (K, N), N contiguous
        self.a_scale = torch.exp(torch.randn(k // 128, m, device="cuda", generator=g))
        # ceil(N/128) columns: the last covers the N % 128 columns left over, if any.
        self.b_scale = torch.exp(torch.randn(k // 128, -(-n // 128), device="cuda", generator=g))
        self.out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        self.cublas_out: torch.Tensor | None = None  # cuBLAS's last result on these inputs

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.a, self.b_col, self.out))


def make_sets(m: int, n: int, k: int, seed: int) -> list[Inputs]:
    first = Inputs(m, n, k, seed)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    count = min(8, max(2, math.ceil(2 * l2 / first.nbytes())))
    return [first] + [Inputs(m, n, k, seed + i) for i in range(1, count)]


def ours(
    x: Inputs, row_major: bool = False, out: torch.Tensor | None = None
) -> Callable[[], object]:
    """Our op on x, writing x.out, or `out` when given."""
    b = x.b_row if row_major else x.b_col
    target = x.out if out is None else out
    return lambda: gemm.ops.gemm(target, x.a, b, x.a_scale, x.b_scale)


def dequantised_bf16(x: Inputs) -> Callable[[], object]:
    def call() -> torch.Tensor:
        a16 = (x.a.float() * x.a_scale.t().repeat_interleave(128, dim=1)).bfloat16()
        b_full = x.b_scale.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)
        return a16 @ (x.b_col.float() * b_full[:, : x.b_col.shape[1]]).bfloat16()

    return call


def cublas(x: Inputs, keep: bool = True) -> Callable[[], torch.Tensor]:
    """cuBLAS's blockwise scaled_mm on x. It allocates its output. keep: the result is kept on x
    until x's next call, so that calls cycling over the input sets write as many outputs as ours
    (which writes x.out); without it each result is freed at once, the allocator hands the next
    call the same block, and that one output stays in L2 across calls (benchmarks/output_reuse.py
    measures the difference: the comparisons through run 23 of the tuning log were made so)."""
    a_scale_mk = x.a_scale.t()  # (M, K/128), M-major: what 1x128 scaling expects
    b_scale_kn = x.b_scale.t().contiguous().t()  # (K/128, N/128), K/128 contiguous

    def call() -> torch.Tensor:
        out = F.scaled_mm(
            x.a, x.b_col, a_scale_mk, F.ScalingType.BlockWise1x128,
            b_scale_kn, F.ScalingType.BlockWise128x128, output_dtype=torch.bfloat16,
        )  # fmt: skip
        if keep:
            x.cublas_out = out
        return out

    return call


def deepgemm(x: Inputs) -> Callable[[], object] | str:
    """DeepGEMM's fp8_gemm_nt on the same operands and scale layout, or why it cannot run.

    Its a scale is (M, K/128) M-major (our a_scale.t(), read as it is), its b scale (N/128,
    K/128) K-major (our b_scale transposed: a copy made here, before timing), b is w (N, K).
    """
    try:
        import deep_gemm  # type: ignore[import-not-found]
    except ImportError as error:
        return f"not importable: {error}"
    w = x.b_col.t()  # (N, K) row-major: DeepGEMM's "nt" B operand
    a_scale = x.a_scale.t()  # (M, K/128), M contiguous
    b_scale = x.b_scale.t().contiguous()  # (N/128, K/128), K/128 contiguous
    return lambda: deep_gemm.fp8_gemm_nt((x.a, a_scale), (w, b_scale), x.out)


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref).norm() / ref.norm()).item()


def check(call: Callable[[], object], x: Inputs, ref: torch.Tensor) -> float:
    x.out.fill_(float("nan"))  # poison: every element must be written
    result = call()
    out = result if isinstance(result, torch.Tensor) else x.out
    return relative_error(out, ref)


def driver_version() -> str:
    try:
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        return subprocess.run(query, capture_output=True, text=True, check=True).stdout.split()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


def one_batch_ms(run_batch: Callable[[], object]) -> float:
    """Milliseconds per call of `run_batch`, which launches BATCH calls, by CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run_batch()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / BATCH


def batches_ms(calls: list[Callable[[], object]], warmup: int, runs: int) -> list[float]:
    """Milliseconds per call of `runs` batches of BATCH calls, after `warmup` calls."""
    for i in range(warmup):
        calls[i % len(calls)]()

    def run_batch() -> None:
        for i in range(BATCH):
            calls[i % len(calls)]()

    return [one_batch_ms(run_batch) for _ in range(runs)]


def time_ms(calls: list[Callable[[], object]], warmup: int, runs: int) -> float:
    return statistics.median(batches_ms(calls, warmup, runs))


def capture_graph(calls: list[Callable[[], object]], count: int) -> torch.cuda.CUDAGraph:
    """A CUDA graph of `count` calls, taken from `calls` in turn, after one call of each on a side
    stream (torch asks for warm-up calls there before a capture)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for call in calls:
            call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(count):
            calls[i % len(calls)]()
    return graph


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """--shapes "M,N,K;M,N,K;..." as (M, N, K) triples."""
    shapes = []
    for item in text.split(";"):
        m, n, k = (int(v) for v in item.split(","))
        shapes.append((m, n, k))
    return shapes


def graph_ms(calls: list[Callable[[], object]], warmup: int, runs: int) -> float:
    """Milliseconds per call when a CUDA graph of BATCH calls is replayed (median of `runs`
    replays): the GPU's own time, with no launch work on the host between the calls."""
    for i in range(warmup):
        calls[i % len(calls)]()
    graph = capture_graph(calls, BATCH)
    graph.replay()
    times = [one_batch_ms(graph.replay) for _ in range(runs)]
    del graph
    return statistics.median(times)


def host_us(calls: list[Callable[[], object]], count: int = 50) -> float:
    """Microseconds the CPU spends per call (launches only; the GPU runs behind): when this
    approaches the GPU time per call, the GPU waits for the host."""
    torch.cuda.synchronize()
    started = time.perf_counter()
    for i in range(count):
        calls[i % len(calls)]()
    spent = time.perf_counter() - started
    torch.cuda.synchronize()
    return spent / count * 1e6


def time_interleaved(
    variants: dict[str, list[Callable[[], object]]], warmup: int, runs: int, rounds: int = 3
) -> dict[str, float]:
    """Median per call of each variant, timed in `rounds` alternating rounds so that a drift of
    the GPU's clock during the measurement falls on every variant alike."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, calls in variants.items():
            times[name] += batches_ms(calls, warmup, max(1, runs // rounds))
    return {name: statistics.median(t) for name, t in times.items()}


class Env:
    """Sets (or clears) an environment variable the op reads on every call."""

    def __init__(self, name: str, value: str | None) -> None:
        self.name, self.value, self.saved = name, value, os.environ.get(name)

    def __enter__(self) -> None:
        if self.value is None:
            os.environ.pop(self.name, None)
        else:
            os.environ[self.name] = self.value

    def __exit__(self, *_: object) -> None:
        if self.saved is None:
            os.environ.pop(self.name, None)
        else:
            os.environ[self.name] = self.saved


def ratio(times: dict[str, float], other: str) -> str:
    """How many times faster ours is than `other` (> 1: ours wins)."""
    return f"{times[other] / times['ours']:.2f}" if other in times else "-"


def row_text(
    m: int,
    n: int,
    k: int,
    errors: dict[str, float],
    text: dict[str, str],
    times: dict[str, float],
    columns: list[str],
) -> str:
    """One shape's row of the results table."""
    return (
        f"| {m} x {n} x {k} | {errors['ours']:.2e}, {errors['mma']:.2e} | "
        + " | ".join(text.get(c, "-") for c in columns)
        + "".join(f" | {ratio(times, c)}" for c in ("cuBLAS", "DeepGEMM", "deq+bf16"))
        + " |"
    )


def tflops(m: int, n: int, k: int, ms: float) -> str:
    return f"{2 * m * n * k / ms / 1e9:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--out", help="write the table (Markdown) to this file")
    parser.add_argument("--explore", help="time every CUTLASS configuration; write the matrix here")
    parser.add_argument("--deepgemm", action="store_true", help="time DeepGEMM too")
    parser.add_argument(
        "--deepgemm-warmup", action="store_true", help="only call DeepGEMM once per shape "
        "(its JIT compiles a kernel per shape; the compiled kernels are cached on disk)"
    )  # fmt: skip
    parser.add_argument("--shapes", help="M,N,K;M,N,K;... instead of the built-in list")
    parser.add_argument(
        "--profile", action="store_true", help="only call ours once per shape (b column-major, "
        "then row-major), for ncu"
    )  # fmt: skip
    parser.add_argument(
        "--column-major-only",
        action="store_true",
        help="with --profile: leave out the row-major call (and its transpose kernel)",
    )
    parser.add_argument(
        "--profile-cublas", action="store_true", help="only call cuBLAS's blockwise scaled_mm "
        "once per shape, for ncu"
    )  # fmt: skip
    parser.add_argument(
        "--profile-pair", action="store_true", help="only call ours and DeepGEMM twice per "
        "shape, for ncu (profile the second call of each)"
    )  # fmt: skip
    args = parser.parse_args()
    assert gemm.backend == "cuda" and torch.cuda.is_available(), "needs the cuda build and a GPU"
    shapes = SHAPES
    if args.shapes:
        shapes = parse_shapes(args.shapes)

    if args.deepgemm_warmup:
        for m, n, k in shapes:
            started = time.monotonic()
            call = deepgemm(Inputs(m, n, k, seed=0))
            result = call() if callable(call) else call
            torch.cuda.synchronize()
            print(
                f"DeepGEMM {m} x {n} x {k}: {time.monotonic() - started:.1f} s {result}", flush=True
            )
        return
    if args.profile:
        for m, n, k in shapes:
            x = Inputs(m, n, k, seed=m + n + k)
            ours(x)()
            if not args.column_major_only:
                ours(x, row_major=True)()
            torch.cuda.synchronize()
            print(f"profiled {m} x {n} x {k}", flush=True)
        return
    if args.profile_cublas:
        for m, n, k in shapes:
            cublas(Inputs(m, n, k, seed=m + n + k), keep=False)()
            torch.cuda.synchronize()
            print(f"profiled cuBLAS at {m} x {n} x {k}", flush=True)
        return
    if args.profile_pair:
        # One warm-up call each (DeepGEMM compiles its kernel on first use), then the profiled
        # pair: ours, then DeepGEMM, on the same operands.
        for m, n, k in shapes:
            x = Inputs(m, n, k, seed=m + n + k)
            theirs = deepgemm(x)
            assert callable(theirs), theirs
            for _ in range(2):
                ours(x)()
                theirs()
            torch.cuda.synchronize()
            print(f"profiled ours and DeepGEMM at {m} x {n} x {k}", flush=True)
        return

    props = torch.cuda.get_device_properties(0)
    header = (
        f"GPU: {props.name} (sm_{props.major}{props.minor}, {props.multi_processor_count} SMs, "
        f"L2 {props.L2_cache_size >> 20} MB); driver {driver_version()}; "
        f"torch {torch.__version__}, CUDA {torch.version.cuda}"
    )
    columns = ["ours", "ours rm", "mma", "cuBLAS", "deq+bf16"]
    if args.deepgemm:
        columns.insert(4, "DeepGEMM")
    lines = [
        header,
        "",
        "| M x N x K | rel. error vs f64 (ours, mma) | "
        + " | ".join(f"{c} TFLOP/s" for c in columns)
        + " | ours/cuBLAS | ours/DeepGEMM | ours/deq+bf16 |",
        "|---" * (len(columns) + 5) + "|",
    ]
    configs = os.environ.get("EXPLORE_CONFIGS", "").split() or sm90_configs()
    configs = configs if args.explore else []
    order_configs = os.environ.get("EXPLORE_ORDER_CONFIGS", "").split() or ORDER_CONFIGS
    order_configs = order_configs if os.environ.get("EXPLORE_ORDERS", "1") != "0" else []
    order_list = os.environ.get("EXPLORE_ORDER_LIST", "").split()
    tile_orders = [
        (item, int(item.split(",")[0]), int(item.split(",")[1])) for item in order_list
    ] or ORDERS
    explore = [
        header,
        "",
        "TFLOP/s per configuration (GEMM_SM90_CONFIG), b column-major, replayed from CUDA graphs"
        " (mean of two passes over the configurations, the second in reverse order, after 0.25 s"
        " of the table's choice untimed); last column:"
        " filling the (M, N) bf16 output alone (torch's fill_), microseconds and TB/s",
        "",
        "| M x N x K | " + " | ".join(configs) + " | bf16 fill of out |",
        "|---" * (len(configs) + 2) + "|",
    ]
    order_names = [f"{c} {o[0]}" for c in order_configs for o in tile_orders]
    orders = [
        "",
        "TFLOP/s per tile order (GEMM_SM90_SWIZZLE, GEMM_SM90_RASTER) and configuration, replayed"
        " from CUDA graphs",
        "",
        "| M x N x K | " + " | ".join(order_names) + " |",
        "|---" * (len(order_names) + 1) + "|",
    ]
    host_lines = [
        "",
        "Time per call / CPU time per call (µs): the GPU waits for the host where they meet",
        "",
        "| M x N x K | ours | cuBLAS | DeepGEMM (where run) |",
        "|---|---|---|---|",
    ]
    graph_lines = [
        "",
        "Replayed from a CUDA graph (no host work between calls: the kernels' own rates; mean of"
        " two passes over ours and the rivals, the second in reverse order), TFLOP/s",
        "",
        "| M x N x K | ours | cuBLAS | DeepGEMM | ours/cuBLAS | ours/DeepGEMM |",
        "|---|---|---|---|---|---|",
    ]
    print(header, flush=True)
    for m, n, k in shapes:
        sets = make_sets(m, n, k, seed=m + n + k)
        x = sets[0]
        ref = reference(x.a, x.b_row, x.a_scale, x.b_scale)
        errors: dict[str, float] = {}
        text: dict[str, str] = {}
        # ours, cuBLAS and DeepGEMM are timed interleaved (time_interleaved); the rest alone.
        rivals: dict[str, list[Callable[[], object]]] = {"ours": [ours(s) for s in sets]}
        with Env("GEMM_SM90_CONFIG", None):
            errors["ours"] = check(ours(x), x, ref)
            errors["ours rm"] = check(ours(x, row_major=True), x, ref)
            times = {"ours rm": time_ms([ours(s, True) for s in sets], args.warmup, args.runs)}
            with Env("GEMM_CUDA_KERNEL", "mma"):
                errors["mma"] = check(ours(x), x, ref)
                times["mma"] = time_ms([ours(s) for s in sets], args.warmup, args.runs)
        try:
            errors["cuBLAS"] = check(cublas(x), x, ref)
            rivals["cuBLAS"] = [cublas(s) for s in sets]
        except (RuntimeError, ValueError) as error:
            text["cuBLAS"] = "refused: " + str(error).splitlines()[0][:100]
        if args.deepgemm:
            probe = deepgemm(x)
            if callable(probe):
                try:
                    errors["DeepGEMM"] = check(probe, x, ref)
                    rivals["DeepGEMM"] = [deepgemm(s) for s in sets]  # type: ignore[misc]
                except (RuntimeError, ValueError, TypeError, AssertionError) as error:
                    text["DeepGEMM"] = "failed: " + str(error).splitlines()[0][:100]
            else:
                text["DeepGEMM"] = probe
        with Env("GEMM_SM90_CONFIG", None):
            times.update(time_interleaved(rivals, args.warmup, args.runs))
        text.update({c: tflops(m, n, k, t) for c, t in times.items()})
        with Env("GEMM_SM90_CONFIG", None):
            launch = {name: host_us(calls) for name, calls in rivals.items()}
        host_lines.append(
            f"| {m} x {n} x {k} | "
            + " | ".join(
                f"{times[c] * 1e3:.1f} / {launch[c]:.1f}" if c in launch else "-"
                for c in ("ours", "cuBLAS", "DeepGEMM")
            )
            + " |"
        )
        # Two passes in opposite orders, as the explore does: at the power cap the first timed
        # after a rival ran at another clock (tuning log run 30: our 128 x 192 at
        # 6144 x 1536 x 7168, 1172 TFLOP/s timed first, 1317 timed later in the same call).
        graph_runs: dict[str, list[float]] = {name: [] for name in rivals}
        graph_text: dict[str, str] = {}
        with Env("GEMM_SM90_CONFIG", None):
            names = list(rivals)
            for order in (names, names[::-1]):
                for name in order:
                    if name in graph_text:  # its capture failed in the first pass
                        continue
                    try:
                        graph_runs[name].append(graph_ms(rivals[name], args.warmup, args.runs))
                    except RuntimeError as failure:
                        graph_text[name] = "capture failed: " + str(failure).splitlines()[0][:60]
        graphed = {
            name: statistics.mean(t) for name, t in graph_runs.items() if name not in graph_text
        }
        graph_text.update({name: tflops(m, n, k, t) for name, t in graphed.items()})
        rivals_order = ("ours", "cuBLAS", "DeepGEMM")
        cells = [graph_text.get(c, text.get(c, "-")) for c in rivals_order]
        cells += [ratio(graphed, c) if "ours" in graphed else "-" for c in rivals_order[1:]]
        graph_lines.append(f"| {m} x {n} x {k} | " + " | ".join(cells) + " |")
        times["deq+bf16"] = time_ms([dequantised_bf16(s) for s in sets], 3, max(5, args.runs // 3))
        text["deq+bf16"] = tflops(m, n, k, times["deq+bf16"])
        for rival in ("cuBLAS", "DeepGEMM"):  # a rival that computes something else has no rate
            if rival in times and not errors[rival] < 1e-2:
                text[rival] = f"wrong: relative error {errors[rival]:.1e}"
                del times[rival]
        row = row_text(m, n, k, errors, text, times, columns)
        lines.append(row)
        # The table so far, after every shape: a run cut short keeps what it measured.
        if args.out:
            Path(args.out).write_text("\n".join(lines + host_lines + graph_lines) + "\n")
        print(row, "errors:", {c: f"{e:.2e}" for c, e in errors.items()}, flush=True)

        bad = {c: e for c, e in errors.items() if c.startswith(("ours", "mma")) and not e < 1e-2}
        assert not bad, f"wrong results at {m}x{n}x{k}: {bad}"

        if configs:
            # Kernels alone (graphs), two passes in opposite orders so that a clock drift falls on
            # every configuration alike.
            passes: dict[str, list[float]] = {name: [] for name in configs}
            failed: dict[str, str] = {}
            # "default" is the dispatch table's choice, "cuBLAS" its scaled_mm beside them.
            maker = {"cuBLAS": cublas}
            # First the table's choice for a while, timing discarded: at large shapes the GPU's
            # clocks settle lower once it is warm, and without this the first configuration of the
            # first pass met a cooler GPU than the rest (tuning log run 22: `default`, timed
            # first, up to 11 % above the same configuration timed by name).
            with Env("GEMM_SM90_CONFIG", None):
                heat = [ours(s) for s in sets]
                started = time.perf_counter()
                while time.perf_counter() - started < 0.25:
                    graph_ms(heat, 1, args.runs)
            for order in (configs, configs[::-1]):
                for name in order:
                    make = maker.get(name, ours)
                    with Env("GEMM_SM90_CONFIG", None if name in ("default", "cuBLAS") else name):
                        try:
                            error = check(make(x), x, ref)
                            if not error < 1e-2:
                                failed[name] = f"BAD {error:.1e}"
                            passes[name].append(graph_ms([make(s) for s in sets], 3, args.runs))
                        except (RuntimeError, ValueError) as failure:
                            failed[name] = "failed: " + str(failure).splitlines()[0][:60]
            cells = [
                failed.get(name) or tflops(m, n, k, statistics.mean(passes[name]))
                for name in configs
            ]
            outs = [s.out for s in sets]
            fill = graph_ms([lambda o=o: o.fill_(1.0) for o in outs], 3, args.runs)
            cells.append(f"{fill * 1e3:.1f} us, {m * n * 2 / fill / 1e9:.2f} TB/s")
            row = f"| {m} x {n} x {k} | " + " | ".join(cells) + " |"
            explore.append(row)
            print(row, flush=True)
        if configs and order_configs:
            cells = []
            for config in order_configs:
                for _, swizzle, raster in tile_orders:
                    with (
                        Env("GEMM_SM90_CONFIG", None if config == "default" else config),
                        Env("GEMM_SM90_SWIZZLE", str(swizzle)),
                        Env("GEMM_SM90_RASTER", str(raster)),
                    ):
                        error = check(ours(x), x, ref)
                        ms = graph_ms([ours(s) for s in sets], 3, args.runs)
                        cells.append(tflops(m, n, k, ms) + ("" if error < 1e-2 else " BAD"))
            row = f"| {m} x {n} x {k} | " + " | ".join(cells) + " |"
            orders.append(row)
            print(row, flush=True)
        del sets, x, ref
        torch.cuda.empty_cache()
    print("\n".join(lines + host_lines + graph_lines))
    if args.explore:
        matrices = explore + (orders if order_configs else [])
        Path(args.explore).write_text("\n".join(matrices) + "\n")
        print("\n".join(matrices))


if __name__ == "__main__":
    main()
