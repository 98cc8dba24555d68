#!/usr/bin/env python3
"""How to cut one CUDA source built for several capabilities into units (issue #52), measured
side by side on one source of a configured build.

    python benchmarks/unit_split.py BUILD_DIR OBJECT_SUBSTRING [--repeat N]

BUILD_DIR is a configured CMake build of a generated project (Ninja); the source is the one
whose object path contains OBJECT_SUBSTRING. Its compile command is read from `ninja -t
commands` and run as:

  threads       one nvcc, every -gencode, --threads=<capabilities> (what the build does)
  serial        one nvcc, every -gencode, one after the other (--threads=1)
  split         one nvcc per capability, all at once, each with its own -gencode and its own
                host half: what splitting the source into one Ninja step per capability would
                run, before the step that combines their device code (not run: a lower bound)
  split-compile one nvcc, every -gencode one after the other, --split-compile=<capabilities>
                (cicc's optimiser in parallel; it may change the code)

Each row is wall seconds and the CPU seconds of the nvcc process tree (rusage of the child),
the best of --repeat runs. Run on a quiet machine: the ratios are what matter.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from build2cmake.toolchains.programs import ninja_program  # noqa: E402

GENCODE = re.compile(r"-gencode(?:=|$)")


def compile_command(build_dir: Path, needle: str) -> list[str]:
    """The compile command of the object whose path contains `needle`, without CMake's
    `cmake -E env ...` prefix and without its dependency-file flags."""
    ninja = ninja_program()
    targets = subprocess.run(
        [ninja, "-C", str(build_dir), "-t", "targets", "all"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    objects = sorted({m for m in re.findall(r"^(\S+\.cu\.o):", targets, re.M) if needle in m})
    if len(objects) != 1:
        sys.exit(f"unit_split: {len(objects)} CUDA objects match {needle!r}: {objects[:5]}")
    line = subprocess.run(
        [ninja, "-C", str(build_dir), "-t", "commands", objects[0]],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()[-1]  # fmt: skip
    words = shlex.split(line)
    start = next(i for i, w in enumerate(words) if Path(w).name == "nvcc")
    words = words[start:]
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word in ("-MF", "-MT"):
            skip = True
            continue
        if word == "-MD" or word.startswith("--threads"):
            continue
        kept.append(word)
    return kept


def without_gencodes(command: list[str]) -> tuple[list[str], list[str]]:
    """The command without its -gencode flags, and those flags."""
    gencodes = [w for w in command if GENCODE.match(w)]
    if any(w == "-gencode" for w in gencodes):
        sys.exit("unit_split: expected -gencode=... as one word")
    return [w for w in command if not GENCODE.match(w)], gencodes


def with_output(command: list[str], output: Path) -> list[str]:
    words = list(command)
    index = words.index("-o")
    words[index + 1] = str(output)
    return words


def run_all(commands: list[list[str]], cwd: Path) -> tuple[float, float]:
    """Runs the commands at once; wall seconds, and CPU seconds of them and their children."""
    started = time.monotonic()
    processes = [
        subprocess.Popen(c, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for c in commands
    ]
    cpu = 0.0
    for process in processes:
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            sys.exit(f"unit_split: a compile failed (exit {process.returncode})")
        cpu += usage.ru_utime + usage.ru_stime
    return time.monotonic() - started, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir", type=Path)
    parser.add_argument("object")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    base, gencodes = without_gencodes(compile_command(args.build_dir, args.object))
    n = len(gencodes)
    if n < 2:
        sys.exit(f"unit_split: the source has {n} -gencode; configure it for several")
    with tempfile.TemporaryDirectory() as temporary:
        out = Path(temporary)

        def one(name: str, extra: list[str], codes: list[str]) -> list[str]:
            return with_output([*base[:1], *codes, *extra, *base[1:]], out / f"{name}.o")

        variants = {
            "threads": [one("threads", [f"--threads={n}"], gencodes)],
            "serial": [one("serial", ["--threads=1"], gencodes)],
            "split": [one(f"split{i}", [], [g]) for i, g in enumerate(gencodes)],
            "split-compile": [one("sc", ["--threads=1", f"--split-compile={n}"], gencodes)],
        }
        best: dict[str, tuple[float, float]] = {}
        for _ in range(args.repeat):
            for name, commands in variants.items():
                wall, cpu = run_all(commands, args.build_dir)
                if name not in best or wall < best[name][0]:
                    best[name] = (wall, cpu)
    print(f"{args.object}: {n} -gencode ({', '.join(g.split('=', 1)[1] for g in gencodes)}), "
          f"{os.cpu_count()} CPUs, best of {args.repeat}")  # fmt: skip
    print("| unit | wall (s) | CPU (s) | wall / threads' |")
    print("|---|---|---|---|")
    for name, (wall, cpu) in best.items():
        print(f"| {name} | {wall:.1f} | {cpu:.1f} | {wall / best['threads'][0]:.2f} |")


if __name__ == "__main__":
    main()
