"""The SM clock and power draw while a configuration runs back to back, on a CUDA GPU: is a
difference in graph replays (benchmarks/gemm_cuda.py's explore) one of clocks, where ncu, which
locks the clocks, sees none?

Run (after `pip install --no-build-isolation -e kernels/gemm` with a CUDA torch, nvidia-smi on
PATH):
    python benchmarks/sustained.py [--shapes "M,N,K;..."] [--configs "default cuBLAS ..."]
                                   [--seconds 1.5]

For each shape and configuration (names as in benchmarks/kernel_times.py), a graph of 40 calls
over the same rotating input sets as the explore is replayed for --seconds while nvidia-smi
samples the GPU every 20 ms, in two passes over the configurations, the second in reverse order.
Printed, over both windows: TFLOP/s, the mean SM clock and power draw of the samples inside them,
and the share of those samples where the power cap (clocks_event_reasons.sw_power_cap) held the
clocks down.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from datetime import datetime

import torch
from gemm_cuda import make_sets, parse_shapes  # this folder: run as a script
from kernel_times import CALLS, capture

FIELDS = "timestamp,clocks.sm,power.draw,clocks_event_reasons.sw_power_cap"


def parse_samples(stdout: str) -> list[tuple[float, float, float, bool]]:
    """(epoch seconds, SM clock MHz, power W, power-capped) of each of nvidia-smi's CSV lines."""
    samples = []
    for line in stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4:
            continue
        try:
            stamp = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            clock, power = float(parts[1].split()[0]), float(parts[2].split()[0])
        except ValueError:  # the header, or a field nvidia-smi could not read ("[N/A]")
            continue
        samples.append((stamp, clock, power, parts[3] == "Active"))
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="296,5120,8192;256,8192,7168")
    parser.add_argument("--configs", default="default cuBLAS")
    parser.add_argument("--seconds", type=float, default=1.5)
    args = parser.parse_args()
    shapes = parse_shapes(args.shapes)
    configs = args.configs.split()
    windows: list[tuple[tuple[int, int, int], str, float, float, float]] = []
    # nvidia-smi writes into a file: a pipe nobody reads while it runs fills up, and then
    # nvidia-smi stops sampling.
    with tempfile.TemporaryFile("w+") as log:
        smi = subprocess.Popen(
            ["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv,noheader", "-lms", "20"],
            stdout=log, text=True,
        )  # fmt: skip
        try:
            for m, n, k in shapes:
                sets = make_sets(m, n, k, seed=0)
                # Two passes, the second in reverse order, as the explore's: what ran just
                # before (and how hot the GPU is) falls on every configuration alike.
                for config in configs + configs[::-1]:
                    graph = capture(sets, config)
                    # The first window starts after a second of the same replays: the GPU warms
                    # up (and reaches its power cap) before anything is timed.
                    started = time.time()
                    while not windows and time.time() - started < 1.0:
                        graph.replay()
                        torch.cuda.synchronize()
                    for _ in range(5):
                        graph.replay()
                    torch.cuda.synchronize()
                    replays = 0
                    start = time.time()
                    while time.time() - start < args.seconds:
                        for _ in range(10):
                            graph.replay()
                        replays += 10
                        torch.cuda.synchronize()
                    end = time.time()
                    tflops = 2 * m * n * k * replays * CALLS / (end - start) / 1e12
                    windows.append(((m, n, k), config, start, end, tflops))
                    del graph
                del sets
        finally:
            time.sleep(0.1)
            smi.terminate()
            smi.wait()
        log.seek(0)
        stdout = log.read()
    samples = parse_samples(stdout)

    def inside(start: float, end: float) -> list[tuple[float, float, float, bool]]:
        return [sample for sample in samples if start <= sample[0] <= end]

    if not any(inside(w[2], w[3]) for w in windows):
        print("no nvidia-smi sample fell inside a window; its first lines:", stdout[:300])
    print(
        "| M x N x K | configuration | TFLOP/s | SM clock MHz | power W | power-capped | samples |"
    )
    print("|---|---|---|---|---|---|---|")
    for shape in shapes:
        for config in configs:
            mine = [w for w in windows if w[0] == shape and w[1] == config]
            rows = [r for w in mine for r in inside(w[2] + 0.1, w[3])]  # clocks settle
            tflops = statistics.mean(w[4] for w in mine)
            label = f"| {shape[0]} x {shape[1]} x {shape[2]} | {config} | {tflops:.0f}"
            if not rows:
                print(f"{label} | - | - | - | 0 |")
                continue
            clock = statistics.mean(r[1] for r in rows)
            power = statistics.mean(r[2] for r in rows)
            capped = sum(r[3] for r in rows) / len(rows)
            print(f"{label} | {clock:.0f} | {power:.0f} | {capped:.0%} | {len(rows)} |")


if __name__ == "__main__":
    main()
