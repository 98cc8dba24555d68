"""kernels/gemm's sm_90a dispatch table on the host: which configuration it chooses, and where a
change to it chooses differently. No GPU: gemm_sm90.cu compiles for the host with stand-ins for
the kernels (the H100's 132 SMs, what gemm_sm90_choose assumes without a device).

    python benchmarks/host_table.py --shapes "904,1664,7680;3252,1024,6144"
    python benchmarks/host_table.py --base HEAD [--draws 40000] [--sample 24] [--seed 1]

With --base REV, the table of git revision REV against the working tree's: at --draws random
shapes, how many choices differ and from what to what, then --sample of them drawn at random,
as one "M,N,K;..." line for EXPLORE_SHAPES (benchmarks/device_cuda.sh explore). Measure a table
change at such shapes, drawn after the change was made, before keeping it (runs 24-26 of the
gemm tuning log: `git show c631808:benchmarks/RESULTS.md`).
The default ranges draw only shapes cuBLAS's blockwise scaled_mm runs, so that the explore can
time it beside ours: M a multiple of 4, K a multiple of 512 (run 26b drew K as multiples of 128,
and cuBLAS ran at 4 of 24 shapes).
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GEMM_CUDA = Path("kernels") / "gemm" / "gemm_cuda"

Shape = tuple[int, int, int]

# Every configuration of gemm_sm90_configs.h as a stand-in that runs nothing, and a main that
# reads "M N K" lines and prints the table's choice for each.
_STUBS = """#include "gemm_sm90_configs.h"
namespace fp8gemm::sm90 {
#define STUB(NAME)                                                       \\
  size_t workspace_bytes_##NAME(const Problem&) { return 0; }            \\
  cudaError_t run_##NAME(const Problem&, void*, cudaStream_t) { return cudaSuccess; }
GEMM_SM90_CONFIGS(STUB)
}
"""
_ASK = """#include <cstdio>
#include "gemm_sm90.h"
int main() {
  long m, n, k;
  while (std::scanf("%ld %ld %ld", &m, &n, &k) == 3) {
    Sm90Order order;
    std::printf("%s\\n", gemm_sm90_config_name(gemm_sm90_choose(m, n, k, &order)));
  }
}
"""


def nvcc() -> str:
    """The nvcc that compiles the table: $NVCC, else the one on PATH, else CUDA's default."""
    return os.environ.get("NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"


def build(gemm_cuda: Path, out_dir: Path) -> Path:
    """Compiles the table of the gemm_cuda folder `gemm_cuda` for the host into out_dir; returns
    the program. Raises RuntimeError with nvcc's message when it does not compile."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "stubs.cu").write_text(_STUBS)
    (out_dir / "ask.cu").write_text(_ASK)
    program = out_dir / "ask"
    built = subprocess.run(
        [nvcc(), "-std=c++17", f"-I{gemm_cuda}", f"-I{gemm_cuda.parent}", str(out_dir / "stubs.cu"),
         str(out_dir / "ask.cu"), str(gemm_cuda / "gemm_sm90.cu"), "-o", str(program)],
        capture_output=True, text=True,
    )  # fmt: skip
    if built.returncode != 0:
        raise RuntimeError(
            f"the host table of {gemm_cuda} does not compile:\n{built.stderr[-3000:]}"
        )
    return program


def ask(program: Path, shapes: Sequence[Shape]) -> list[str]:
    """The configuration the table `program` (from build) chooses for each shape."""
    asked = subprocess.run(
        [str(program)],
        input="".join(f"{m} {n} {k}\n" for m, n, k in shapes),
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        check=True,
    )
    chosen = asked.stdout.split()
    if len(chosen) != len(shapes):
        raise RuntimeError(f"{program}: {len(chosen)} answers to {len(shapes)} shapes")
    return chosen


def checkout(rev: str, into: Path) -> Path:
    """kernels/gemm of git revision rev (gemm_sm90.cu includes ../gemm/), unpacked under into;
    returns its gemm_cuda folder."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", rev, str(GEMM_CUDA.parent)],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        raise RuntimeError(f"git archive {rev}: {archive.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into / GEMM_CUDA


def parse_range(text: str) -> range:
    """LO:HI[:STEP], HI included: the values a dimension is drawn from."""
    parts = [int(p) for p in text.split(":")]
    if len(parts) not in (2, 3) or parts[0] < 1 or parts[1] < parts[0]:
        raise argparse.ArgumentTypeError(f"{text!r}: expected LO:HI or LO:HI:STEP, 1 <= LO <= HI")
    step = parts[2] if len(parts) == 3 else 1
    return range(parts[0], parts[1] + 1, step)


def parse_shapes(text: str) -> list[Shape]:
    """'M,N,K;M,N,K' as shapes."""
    shapes = []
    for item in text.split(";"):
        dims = [int(d) for d in item.split(",")]
        if len(dims) != 3:
            raise argparse.ArgumentTypeError(f"{item!r}: expected M,N,K")
        shapes.append((dims[0], dims[1], dims[2]))
    return shapes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--base", help="git revision whose table to compare the working tree's with"
    )
    parser.add_argument("--shapes", type=parse_shapes, help="M,N,K;... to ask instead of drawing")
    parser.add_argument("--draws", type=int, default=40000, help="random shapes to ask")
    parser.add_argument("--sample", type=int, default=24, help="changed shapes to print")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--m", type=parse_range, default=parse_range("68:8192:4"))
    parser.add_argument("--n", type=parse_range, default=parse_range("512:32768:128"))
    parser.add_argument("--k", type=parse_range, default=parse_range("2048:8192:512"))
    args = parser.parse_args(argv)

    try:
        return compare(args)
    except RuntimeError as error:
        print(f"host_table.py: error: {error}", file=sys.stderr)
        return 2


def compare(args: argparse.Namespace) -> int:
    """main's work: ask the working tree's table (and --base's), print what it chose."""
    rng = random.Random(args.seed)
    shapes = args.shapes or [
        (rng.choice(args.m), rng.choice(args.n), rng.choice(args.k)) for _ in range(args.draws)
    ]
    with tempfile.TemporaryDirectory(prefix="host-table-") as tmp:
        now = ask(build(REPO / GEMM_CUDA, Path(tmp) / "now"), shapes)
        if args.base is None:
            if args.shapes:
                for (m, n, k), name in zip(shapes, now, strict=True):
                    print(f"{m} x {n} x {k}: {name}")
            else:
                for name, count in Counter(now).most_common():
                    print(f"{count:7d}  {name}")
            return 0
        base = ask(build(checkout(args.base, Path(tmp)), Path(tmp) / "base"), shapes)

    changed = [(s, b, c) for s, b, c in zip(shapes, base, now, strict=True) if b != c]
    print(
        f"{len(changed)} of {len(shapes)} shapes change configuration ({args.base} -> working tree)"
    )
    for (was, becomes), count in Counter((b, c) for _, b, c in changed).most_common():
        print(f"{count:7d}  {was} -> {becomes}")
    if args.shapes:
        for (m, n, k), was, becomes in changed:
            print(f"{m} x {n} x {k}: {was} -> {becomes}")
    elif changed:
        picked = sorted(rng.sample([s for s, _, _ in changed], min(args.sample, len(changed))))
        print("EXPLORE_SHAPES=" + ";".join(f"{m},{n},{k}" for m, n, k in picked))
    return 0


if __name__ == "__main__":
    sys.exit(main())
