"""A fixed slice of aiter-flash-attn-ck built in the ROCm chroot, timed like big_kernels.py.

Run from the repository root, as root (issue #45, "Big kernels"):
    python benchmarks/big_kernels_rocm.py --env ENV [--project DIR] [--per-kind N]
        [--arch gfx942] [--suite rocm72] [--jobs N] [--timeout SECONDS] [--top N]
        [--work DIR] [--json FILE] [--markdown FILE]

aiter-flash-attn-ck lists 2,815 HIP sources: 2,810 generated composable_kernel instantiations
under instances/ and five that are not (the two dispatch tables instances/fmha_fwd_api.hip and
fmha_fwd_splitkv_api.hip are generated too, but every instantiation's caller; the aiter
interface files). Building all of them takes CPU-hours per arch, so this builds a fixed slice: a
copy of the project whose build.toml lists every source that is not an instantiation (the torch
binding, the dispatch tables, aiter's interface: what the kernel's `src` needs to link) and N
instantiations of each kind, a kind being the family (fmha_fwd, fmha_fwd_splitkv,
fmha_fwd_splitkv_combine) and the arch family the file is written for (its `_gfx9` or `_gfx950`
suffix: a gfx950 file compiles host code only for gfx942). The N are spread evenly over the
kind's sorted file names (head dims, data types and modes all appear), so the slice is the same
on every run and its mean stands for the kind's.

The slice is built once with big_kernels.measure (`build2cmake build --backend rocm --force -j
JOBS -D BUILD2CMAKE_ROCM_ARCHS=ARCH -D BUILD2CMAKE_COMPILER_LAUNCHER=none`: no compiler cache, so
every step compiles) inside scripts/rocm-chroot.sh's chroot SUITE (rocm72: ROCm 7.2, whose
`hipDeviceAttributePciChipId` aiter/cpp_itfs/mha_fwd.hip needs). ENV is a Python environment
the chroot can run (a copy of one `build2cmake build --variants` made there: torch from PyPI
standing in for a ROCm torch, its CUDA toolkit folder `cuda/`, plus tomlkit). aiter includes
`ATen/hip/HIPContext.h`, which only a ROCm build of torch ships: benchmarks/rocm_torch_shim
stands in for it and the generator and guard headers aiter uses (`-D
CMAKE_HIP_FLAGS=-I.../rocm_torch_shim`), so the objects compile; the module is not one to
import.

Besides big_kernels' figures it writes an estimate for the whole project: each kind's mean step
time times the kind's file count, plus the steps every build runs once (the non-instantiation
sources and the link, as measured), over JOBS; and the cruder mean of all compile steps times
2,815 over JOBS. Both are estimates for ARCH alone: each further arch in rocm-archs adds about
as much device compilation again.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import big_kernels
from big_kernels import REPO, Report

from build2cmake.ground.errors import printable

DEFAULT_PROJECT = (
    big_kernels.DEFAULT_CORPUS / "aiter-flash-attn-ck" if big_kernels.DEFAULT_CORPUS else None
)
CHROOT_SCRIPT = REPO / "scripts" / "rocm-chroot.sh"
SHIM = REPO / "benchmarks" / "rocm_torch_shim"
# instances/<family>_<traits>_<arch family>.hip; the dispatch tables (<family>_api.hip) are not
# instantiations: every one of them is built.
_INSTANCE = re.compile(
    r"^instances/(fmha_fwd(?:_splitkv_combine|_splitkv)?)_(?!api\.hip$).*_(gfx[0-9a-z]+)\.hip$"
)


def instance_kind(source: str) -> str | None:
    """The kind of an instantiation source ("fmha_fwd gfx9"), None for any other source."""
    match = _INSTANCE.match(source)
    return f"{match.group(1)} {match.group(2)}" if match else None


def select_slice(sources: Sequence[str], per_kind: int) -> list[str]:
    """`sources` less all instantiations but `per_kind` of each kind, in their original order.

    The kept instantiations are spread evenly over each kind's sorted names (the middle of each
    of `per_kind` equal shares), so the choice depends on the list alone.
    """
    kinds: dict[str, list[str]] = {}
    for source in sources:
        kind = instance_kind(source)
        if kind is not None:
            kinds.setdefault(kind, []).append(source)
    kept: set[str] = set()
    for names in kinds.values():
        names.sort()
        count = min(per_kind, len(names))
        kept.update(names[(2 * i + 1) * len(names) // (2 * count)] for i in range(count))
    return [s for s in sources if instance_kind(s) is None or s in kept]


def kind_counts(sources: Sequence[str]) -> dict[str, int]:
    """How many instantiation sources of each kind `sources` lists."""
    counts: dict[str, int] = {}
    for source in sources:
        kind = instance_kind(source)
        if kind is not None:
            counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


def make_slice(project: Path, destination: Path, per_kind: int) -> tuple[list[str], list[str]]:
    """Copies `project` to `destination` with a build.toml listing only the slice's sources.

    Instantiation files left out of the slice are not copied. Returns the full list of the
    kernel's sources and the slice's.
    """
    import tomlkit  # only the host side writes TOML

    document = tomlkit.parse((project / "build.toml").read_text())
    (name, kernel), *others = document["kernel"].items()
    if others:
        raise SystemExit(f"{printable(str(project))}: expected one [kernel.*] section")
    sources = [str(s) for s in kernel["src"]]
    kept = select_slice(sources, per_kind)
    dropped = set(sources) - set(kept)

    def ignore(folder: str, names: list[str]) -> set[str]:
        relative = Path(folder).relative_to(project).as_posix()
        return {n for n in names if f"{relative}/{n}" in dropped}

    shutil.copytree(project, destination, symlinks=True, ignore=ignore)
    source_array = tomlkit.array()
    source_array.multiline(True)
    source_array.extend(kept)
    document["kernel"][name]["src"] = source_array
    (destination / "build.toml").write_text(tomlkit.dumps(document))
    return sources, kept


@dataclass
class Estimate:
    """The whole project's compile time for one arch, from the slice's steps."""

    kinds: dict[str, tuple[int, int, float]]  # kind: (files in project, in slice, mean s)
    once_s: float  # steps every build runs once: the non-instantiation sources, the link
    serial_s: float  # once_s + each kind's mean times its file count
    over_jobs_s: float  # serial_s / jobs
    naive_over_jobs_s: float  # mean of all .hip compile steps x all .hip sources / jobs
    longest_s: float  # the longest step seen: no schedule finishes before it


def _source_of(output: str) -> str:
    """The source a CMake object output was compiled from (CMakeFiles/<t>.dir/<src>.o)."""
    return re.sub(r"^CMakeFiles/[^/]+\.dir/", "", output).removesuffix(".o")


def estimate(steps: Sequence[big_kernels.Step], full: Sequence[str], jobs: int) -> Estimate:
    """Scales the slice's step times to every source of `full` (see the module's docstring)."""
    by_kind: dict[str, list[float]] = {}
    once = 0.0
    hip: list[float] = []
    for step in steps:
        source = _source_of(step.output)
        kind = instance_kind(source)
        if kind is None:
            once += step.seconds
        else:
            by_kind.setdefault(kind, []).append(step.seconds)
        if source.endswith(".hip"):
            hip.append(step.seconds)
    kinds: dict[str, tuple[int, int, float]] = {}
    serial = once
    for kind, count in kind_counts(full).items():
        times = by_kind.get(kind, [])
        mean = sum(times) / len(times) if times else 0.0
        kinds[kind] = (count, len(times), mean)
        serial += mean * count
    hip_total = sum(1 for s in full if s.endswith(".hip"))
    naive = (sum(hip) / len(hip) * hip_total / jobs) if hip else 0.0
    longest = max((s.seconds for s in steps), default=0.0)
    return Estimate(kinds, once, serial, serial / jobs, naive, longest)


def _tool_version(program: str) -> str:
    try:
        output = subprocess.run(
            [program, "--version"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    return " ".join(line.strip() for line in output.splitlines()[:2] if line.strip()) or "?"


def _hip_clang() -> str:
    """The clang hipcc drives: Debian's newest llvm-N."""
    found = sorted(Path("/usr/lib").glob("llvm-*/bin/clang"), key=lambda p: len(str(p)))
    return str(max(found, key=lambda p: int(p.parts[-3].split("-")[1]))) if found else "clang"


def _package_version(package: str) -> str:
    try:
        return (
            subprocess.run(
                ["dpkg-query", "-W", "-f=${Version}", package],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            ).stdout.strip()
            or "?"
        )
    except (OSError, subprocess.SubprocessError):
        return "?"


def run_inside(args: argparse.Namespace) -> int:
    """The run in the chroot: build the slice with big_kernels.measure, write the JSON record."""
    env_dir: Path = args.env.resolve()
    toolkit = env_dir / "cuda"
    os.environ["VIRTUAL_ENV"] = str(env_dir)
    os.environ["PATH"] = os.pathsep.join(
        [str(env_dir / "bin"), str(toolkit / "bin"), os.environ.get("PATH", "")]
    )
    os.environ["CUDA_HOME"] = os.environ["CUDA_PATH"] = str(toolkit)
    defines = [
        # A -D, not $HIPFLAGS: the generated build appends to CMAKE_HIP_FLAGS before
        # enable_language(HIP), which reads $HIPFLAGS only when that variable is still unset.
        # -I: searched before torch's -isystem folders, whose PyPI (CUDA) build ships a few
        # ATen/hip/impl headers of its own that include ROCm-only ones.
        f"CMAKE_HIP_FLAGS=-I{SHIM}",
        f"BUILD2CMAKE_ROCM_ARCHS={args.arch}",
        "BUILD2CMAKE_COMPILER_LAUNCHER=none",
        f"CUDAToolkit_ROOT={toolkit}",
    ]
    work: Path = args.work.resolve()
    slice_dir = work / "slice" / args.project.name
    build_root = work / "build"
    build_root.mkdir(parents=True, exist_ok=True)
    # Other work on the machine stretches every step: the load averages go into the record.
    load_before = os.getloadavg()[0]
    report = big_kernels.measure(
        slice_dir,
        build_root,
        backend="rocm",
        capability="",
        defines=defines,
        jobs=args.jobs,
        cores=args.jobs,
        timeout=args.timeout,
        top=args.top,
    )
    report.project = f"{args.project.name} (slice)"
    log = build_root / slice_dir.name / "build" / "cmake-variant-rocm" / ".ninja_log"
    steps = big_kernels.read_ninja_log(log) if log.is_file() else []
    full = json.loads((work / "full-sources.json").read_text())
    record = {
        "report": asdict(report),
        "estimate": asdict(estimate(steps, full, args.jobs)),
        "steps": [(s.output, round(s.seconds, 2)) for s in steps],
        "environment": {
            "machine": big_kernels.machine_description(),
            "hipcc": _tool_version("hipcc"),
            "clang": _tool_version(_hip_clang()),
            "rocm": _package_version("libamdhip64-dev"),
            "load": f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after (1-min averages)",
        },
    }
    (work / "record.json").write_text(json.dumps(record, indent=1) + "\n")
    return 0 if report.status == "ok" else 1


def estimate_markdown(est: Mapping[str, object], jobs: int, arch: str) -> str:
    """The estimate as a small Markdown table."""
    lines = [
        f"Estimate for the whole project, {arch} only, {jobs} jobs (**an estimate**, scaled "
        "from the slice):",
        "",
        "| kind | files in project | in slice | mean step (s) | est. serial (CPU-h) |",
        "|---|---|---|---|---|",
    ]
    kinds = est["kinds"]
    assert isinstance(kinds, dict)
    for kind, (count, seen, mean) in kinds.items():
        lines.append(f"| {kind} | {count} | {seen} | {mean:.1f} | {mean * count / 3600:.2f} |")
    once, serial = float(est["once_s"]), float(est["serial_s"])  # type: ignore[arg-type]
    lines.append(
        f"| built once (bindings, dispatch, aiter, link) | - | - | - | {once / 3600:.2f} |"
    )
    lines.append(f"| **total** | | | | **{serial / 3600:.2f}** |")
    lines += [
        "",
        f"Serial {serial / 3600:.1f} CPU-hours; over {jobs} jobs "
        f"{float(est['over_jobs_s']) / 3600:.1f} h (per-kind means; "  # type: ignore[arg-type]
        f"the plain mean of all compile steps x 2,815 / {jobs} gives "
        f"{float(est['naive_over_jobs_s']) / 3600:.1f} h). "  # type: ignore[arg-type]
        "Each further arch multiplies the device part.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=DEFAULT_PROJECT)
    parser.add_argument("--env", type=Path, required=True, help="Python env with torch (above)")
    parser.add_argument("--per-kind", type=int, default=4, help="instantiations of each kind")
    parser.add_argument("--arch", default="gfx942")
    parser.add_argument("--suite", default="rocm72", help="scripts/rocm-chroot.sh suite")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds")
    parser.add_argument("--top", type=int, default=8, help="longest steps listed")
    parser.add_argument("--work", type=Path, help="keep the slice and its build here")
    parser.add_argument("--json", type=Path, help="write the record (report, estimate) here")
    parser.add_argument("--markdown", type=Path, help="write the Markdown here")
    parser.add_argument("--in-chroot", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.in_chroot:
        return run_inside(args)
    if args.project is None:
        parser.error(f"no project: pass --project DIR, or {big_kernels.NO_CORPUS}")
    if not (args.project / "build.toml").is_file():
        parser.error(f"{printable(str(args.project))}: no build.toml there")
    with tempfile.TemporaryDirectory(prefix="b2c-big-rocm-") as temporary:
        work: Path = (args.work or Path(temporary)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        for stale in ("slice", "build"):
            shutil.rmtree(work / stale, ignore_errors=True)
        full, kept = make_slice(args.project, work / "slice" / args.project.name, args.per_kind)
        (work / "full-sources.json").write_text(json.dumps(full))
        print(
            f"slice: {sum(1 for s in kept if s.endswith('.hip'))} of "
            f"{sum(1 for s in full if s.endswith('.hip'))} HIP sources "
            f"({args.per_kind} per kind: {', '.join(kind_counts(kept))})",
            flush=True,
        )
        inner = [
            "--project", str(args.project.resolve()), "--env", str(args.env.resolve()),
            "--arch", args.arch, "--jobs", str(args.jobs), "--timeout", str(args.timeout),
            "--top", str(args.top), "--work", str(work), "--in-chroot",
        ]  # fmt: skip
        command = ["bash", str(CHROOT_SCRIPT), "run", "--suite", args.suite]
        command += ["--bind", str(work), "--bind", str(args.env.resolve())]
        # -P: the chroot's python must not import from the current folder first.
        command += ["--", str(args.env.resolve() / "bin" / "python"), "-P", __file__, *inner]
        subprocess.run(command, cwd=REPO, check=False)
        record_path = work / "record.json"
        if not record_path.is_file():
            print("no record: the run in the chroot failed before measuring", file=sys.stderr)
            return 2
        record = json.loads(record_path.read_text())
    report = Report(**record["report"])
    environment = record["environment"]
    machine = (
        f"{environment['machine']}; scripts/rocm-chroot.sh {args.suite} "
        f"(ROCm {environment['rocm']}, {environment['clang']}); "
        f"load {environment.get('load', '?')}"
    )
    shown = [
        "python",
        "benchmarks/big_kernels_rocm.py",
        *(argv if argv is not None else sys.argv[1:]),
    ]
    text = big_kernels.markdown([report], machine=machine, command=" ".join(shown))
    text += "\n" + estimate_markdown(record["estimate"], args.jobs, args.arch)
    if args.markdown:
        args.markdown.write_text(text)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0 if report.status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
