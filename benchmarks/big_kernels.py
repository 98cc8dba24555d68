"""Where the time of a big kernel build goes: wall time against Ninja's floor, memory, top steps.

Run from the repository root (issue #45, "Big kernels"):
    python benchmarks/big_kernels.py [PROJECT ...] [--corpus DIR] [--backend cuda]
        [--capability 9.0a] [-D NAME=VALUE ...] [--jobs N] [--timeout SECONDS]
        [--json FILE] [--markdown FILE] [--top N]

A PROJECT is a folder holding build.toml, or the name of one under --corpus (default:
$BUILD2CMAKE_CORPUS/kernels-community; default projects: its five largest CUDA ones). Each
project is copied into a temporary folder and built there with `build2cmake build --backend
BACKEND --force -j JOBS` (for cuda,
`-D BUILD2CMAKE_CUDA_CAPABILITIES=CAP -D BUILD2CMAKE_CUDA_CAPABILITIES_OVERRIDE=ON`, one
capability to keep the compile short), under a per-project timeout. Per project it reports:

  wall          the whole `build2cmake build` (generate, configure, Ninja, install, checks)
  ninja         the span of Ninja's steps, first start to last end (build/cmake-variant-*/
                .ninja_log)
  critical      the longest chain of the step graph (`ninja -t graph`), each step weighted by its
                time in the log: no number of cores builds faster than this
  sum/cores     the sum of all step times divided by the cores: no schedule on them beats it
  cpu/cores     the CPU seconds of the build's processes divided by the cores (a step that runs
                several threads, nvcc --threads, counts each of them: its step time does not)
  floor         max(critical, sum/cores, cpu/cores); wall / floor and ninja / floor say how far
                the whole command and the schedule are from it
  CPU use       CPU seconds / Ninja's span, in % (all cores busy: cores x 100 %); for a build
                stopped by its timeout, / its wall: the span then covers finished steps only
  peak RSS      the most memory the build's process tree held at once (RSS of every descendant
                summed, sampled every 0.2 s; shared pages count once per process, so this is an
                upper bound) and the largest single process
  jobs          the -j asked for, and the most steps the log shows running at once
  top steps     the longest steps and the second each started at (the "where time goes" list)

By default no compiler cache is used and compile costs are recorded in a folder of the run's
own (a cold build that orders its sources by size); --costs-dir keeps them between runs, so the
second run orders by the first one's seconds.

--replay NINJA_LOG [--slots N ...] builds nothing: it prints the span the log's compiles would
take started longest first on N slots, with the seconds the log recorded (the order recorded
costs give a build; a model, for a run the device time did not allow).

A build stopped by its timeout still reports the steps that finished; `steps` then reads
done/total, and `serial est.` scales the finished steps' sum to all of them (an estimate).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from build2cmake.ground.errors import printable  # noqa: E402
from build2cmake.toolchains.programs import ninja_program  # noqa: E402

# huggingface/kernels-community's projects, in the folder BUILD2CMAKE_CORPUS names (the one
# scripts/fetch-corpus.sh fills); None when it is not set.
CORPUS_SETTING = "BUILD2CMAKE_CORPUS"
DEFAULT_CORPUS = (
    Path(os.environ[CORPUS_SETTING]) / "kernels-community"
    if os.environ.get(CORPUS_SETTING)
    else None
)
NO_CORPUS = f"set {CORPUS_SETTING} to the folder `bash scripts/fetch-corpus.sh DIR` fills"
DEFAULT_PROJECTS = ("layer-norm", "megablocks", "mamba-ssm", "flash-attn2", "sgl-flash-attn3")
SAMPLE_SECONDS = 0.2


@dataclass(frozen=True)
class Step:
    """One Ninja edge as its log recorded it (outputs of one edge share start, end and hash)."""

    output: str
    start_s: float
    end_s: float

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s


@dataclass
class Report:
    project: str
    status: str = "ok"  # ok | failed | timeout
    wall_s: float = 0.0
    ninja_s: float = 0.0
    critical_s: float = 0.0
    critical_path: list[str] = field(default_factory=list)
    sum_steps_s: float = 0.0
    sum_over_jobs_s: float = 0.0
    cores: int = 0
    cpu_s: float = 0.0
    floor_s: float = 0.0
    longest_step_s: float = 0.0
    link_s: float = 0.0
    steps_done: int = 0
    steps_total: int = 0
    serial_estimate_s: float = 0.0
    jobs: int = 0
    max_parallel: int = 0
    peak_rss_mib: float = 0.0
    peak_process_mib: float = 0.0
    peak_process: str = ""
    top_steps: list[tuple[str, float]] = field(default_factory=list)
    top_starts: list[float] = field(default_factory=list)
    error_tail: str = ""


def read_ninja_log(log: Path) -> list[Step]:
    """The steps of a `.ninja_log` (v5..v7: start, end, mtime, output, hash), one per edge.

    A later entry for the same output replaces an earlier one (a rebuild); outputs of one edge
    (same hash, start and end) count once, under their first output's name.
    """
    latest: dict[str, tuple[int, int, str]] = {}
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) < 5 or not (fields[0].isdigit() and fields[1].isdigit()):
            continue
        latest[fields[3]] = (int(fields[0]), int(fields[1]), fields[4])
    edges: dict[tuple[int, int, str], str] = {}
    for output, key in latest.items():
        edges.setdefault(key, output)
    return sorted(
        (Step(output, start / 1000, end / 1000) for (start, end, _), output in edges.items()),
        key=lambda step: (step.start_s, step.output),
    )


_NODE = re.compile(r'^"(0x[0-9a-f]+)" \[label="(.*?)"(, shape=ellipse)?\]$')
_EDGE = re.compile(r'^"(0x[0-9a-f]+)" -> "(0x[0-9a-f]+)"')


def critical_path(graph_dot: str, seconds: dict[str, float]) -> tuple[float, list[str]]:
    """The longest chain through `ninja -t graph`'s output, each file weighted by `seconds`.

    Files are weighted by the time of the step that made them (sources and phony targets: 0);
    rule nodes (edges of several inputs or outputs) weigh nothing themselves. Returns the chain's
    seconds and its outputs from first to last.
    """
    labels: dict[str, str] = {}
    rules: set[str] = set()
    inputs: dict[str, list[str]] = {}
    for line in graph_dot.splitlines():
        node_line = _NODE.match(line)
        if node_line:
            labels[node_line.group(1)] = node_line.group(2).replace('\\"', '"')
            if node_line.group(3):
                rules.add(node_line.group(1))
            continue
        edge_line = _EDGE.match(line)
        if edge_line:
            inputs.setdefault(edge_line.group(2), []).append(edge_line.group(1))
    finish: dict[str, float] = {}
    before: dict[str, str | None] = {}
    for start in labels:
        # Iterative post-order: a deep graph must not hit Python's recursion limit.
        stack = [(start, False)]
        while stack:
            node, expanded = stack.pop()
            if node in finish:
                continue
            if not expanded:
                stack.append((node, True))
                stack.extend((p, False) for p in inputs.get(node, ()) if p not in finish)
                continue
            best = max(inputs.get(node, ()), key=lambda p: finish.get(p, 0.0), default=None)
            weight = 0.0 if node in rules else seconds.get(labels.get(node, ""), 0.0)
            finish[node] = (finish.get(best, 0.0) if best else 0.0) + weight
            before[node] = best
    if not finish:
        return 0.0, []
    last: str | None = max(finish, key=lambda n: finish[n])
    total = finish[last] if last else 0.0
    chain: list[str] = []
    while last is not None:
        label = labels.get(last, "")
        if last not in rules and seconds.get(label, 0.0) > 0:
            chain.append(label)
        last = before.get(last)
    return total, chain[::-1]


def max_parallel(steps: Sequence[Step]) -> int:
    """The most steps the log shows running at the same moment."""
    events = sorted([(s.start_s, 1) for s in steps] + [(s.end_s, -1) for s in steps])
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


def span(steps: Sequence[Step]) -> float:
    """Seconds from the first step's start to the last step's end (0 for no steps)."""
    return max(s.end_s for s in steps) - min(s.start_s for s in steps) if steps else 0.0


def longest_first_span(steps: Sequence[Step], slots: int) -> float:
    """The span of a build whose compiles start longest first on `slots` slots, with the seconds
    `steps` took: each compile starts when a slot frees, and the other steps (links, stamps)
    follow one after another. A model of the order recorded costs give, not a measurement: the
    seconds are the ones measured at the contention of the run that logged them."""
    compiles: list[float] = []
    rest = 0.0
    for step in steps:
        if step.output.endswith((".o", ".obj")):
            compiles.append(step.seconds)
        else:
            rest += step.seconds
    free_at = [0.0] * max(slots, 1)
    for seconds in sorted(compiles, reverse=True):
        earliest = min(range(len(free_at)), key=free_at.__getitem__)
        free_at[earliest] += seconds
    return max(free_at) + rest


def process_table(page: int) -> tuple[dict[int, list[int]], dict[int, tuple[int, str]]]:
    """Every process in /proc: each one's children, and its RSS in bytes and name."""
    children: dict[int, list[int]] = {}
    rss: dict[int, tuple[int, str]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                text = stat.read().decode(errors="replace")
        except OSError:
            continue  # the process ended between the listing and the read
        name = text[text.find("(") + 1 : text.rfind(")")]
        fields = text[text.rfind(")") + 2 :].split()
        pid = int(entry.name)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = (int(fields[21]) * page, name)
    return children, rss


def process_tree(root: int) -> list[int]:
    """root and every process under it, now."""
    children, _ = process_table(1)
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


class TreeMemory:
    """Samples the summed RSS of a process and all its descendants from /proc until stopped."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.peak_bytes = 0
        self.peak_process_bytes = 0
        self.peak_process = ""
        self._stop = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._ticks = os.sysconf("SC_CLK_TCK")
        # CPU seconds of each process seen (pid and start time), as last read: a build's compiles
        # run under a subreaper (build2cmake's own), so the rusage of reaped children misses them.
        self._cpu: dict[tuple[int, str], float] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(SAMPLE_SECONDS)

    def sample(self) -> None:
        children, rss = process_table(self._page)
        total = 0
        todo = [self.root]
        while todo:
            pid = todo.pop()
            size, name = rss.get(pid, (0, ""))
            total += size
            if size > self.peak_process_bytes:
                self.peak_process_bytes, self.peak_process = size, name
            todo.extend(children.get(pid, ()))
            self._read_cpu(pid)
        self.peak_bytes = max(self.peak_bytes, total)

    def _read_cpu(self, pid: int) -> None:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as file:
                fields = file.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return
        # After the name: state is field 3, utime 14, stime 15, starttime 22 (1-based).
        self._cpu[(pid, fields[19])] = (int(fields[11]) + int(fields[12])) / self._ticks

    @property
    def cpu_seconds(self) -> float:
        """CPU seconds of every process sampled in the tree (each at its last reading: a
        process's last 0.2 s before it exited are missed)."""
        return sum(self._cpu.values())


def _stop_tree(process: subprocess.Popen[str]) -> None:
    """Ends the build and every process under it. Ninja starts each compile in a process group of
    its own, and survived its group's SIGTERM: stopping the build's group alone left Ninja and
    its compiles running into the next project's measurement (on the GPU machine, step times of
    the next build up to three times longer). The tree is read before each signal, while every
    process in it is still a descendant, and the signal goes to each one."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 30.0)):
        tree = process_tree(process.pid)
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            process.poll()
            if not any(os.path.exists(f"/proc/{pid}") for pid in tree):
                return
            time.sleep(0.2)


def build_command(
    build_toml: Path, backend: str, capability: str, defines: Sequence[str], jobs: int
) -> list[str]:
    """The `build2cmake build` command line the benchmark times."""
    command = [sys.executable, "-m", "build2cmake", "build", str(build_toml)]
    command += ["--backend", backend, "--force", "--jobs", str(jobs)]
    if backend == "cuda" and capability:
        command += ["-D", f"BUILD2CMAKE_CUDA_CAPABILITIES={capability}"]
        command += ["-D", "BUILD2CMAKE_CUDA_CAPABILITIES_OVERRIDE=ON"]
    for define in defines:
        command += ["-D", define]
    return command


def measure(
    source: Path,
    work: Path,
    *,
    backend: str,
    capability: str,
    defines: Sequence[str],
    jobs: int,
    cores: int,
    timeout: float,
    top: int,
    carried: Path | None = None,
) -> Report:
    """Copies `source` into `work`, builds it once, and reads the build folder's Ninja records."""
    report = Report(project=source.name, jobs=jobs)
    project = work / source.name
    # Symlinks stay links: the build must meet the project as published, planted links included.
    shutil.copytree(source, project, symlinks=True)
    if carried is not None:
        shutil.copyfile(carried, project / "build2cmake-costs.tsv")
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    log_path = work / f"{source.name}.log"
    started = time.monotonic()
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            build_command(project / "build.toml", backend, capability, defines, jobs),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,  # one process group to stop at the timeout
        )
        with TreeMemory(process.pid) as memory:
            try:
                returncode = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _stop_tree(process)
                returncode = None
    report.wall_s = time.monotonic() - started
    report.cpu_s = memory.cpu_seconds
    report.cores = cores
    report.peak_rss_mib = memory.peak_bytes / 2**20
    report.peak_process_mib = memory.peak_process_bytes / 2**20
    report.peak_process = printable(memory.peak_process)
    if returncode is None:
        report.status = "timeout"
    elif returncode != 0:
        report.status = "failed"
        tail = log_path.read_text(errors="replace").splitlines()[-15:]
        report.error_tail = printable("\n".join(tail))
    build_dir = project / "build" / f"cmake-variant-{backend}"
    ninja_log = build_dir / ".ninja_log"
    if not ninja_log.is_file():
        return report
    steps = read_ninja_log(ninja_log)
    if not steps:
        return report
    seconds: dict[str, float] = {}
    for line in ninja_log.read_text(errors="replace").splitlines():
        fields = line.split("\t")
        if len(fields) >= 5 and fields[0].isdigit() and fields[1].isdigit():
            seconds[fields[3]] = (int(fields[1]) - int(fields[0])) / 1000
    report.ninja_s = span(steps)
    report.sum_steps_s = sum(s.seconds for s in steps)
    report.sum_over_jobs_s = report.sum_steps_s / cores
    report.longest_step_s = max(s.seconds for s in steps)
    report.link_s = sum(s.seconds for s in steps if s.output.endswith((".so", ".pyd")))
    report.max_parallel = max_parallel(steps)
    report.steps_done = len(steps)
    graph = subprocess.run(
        [ninja_program(), "-C", str(build_dir), "-t", "graph"],
        capture_output=True,
        text=True,
        check=False,
    )
    commands = subprocess.run(
        [ninja_program(), "-C", str(build_dir), "-t", "commands"],
        capture_output=True,
        text=True,
        check=False,
    )
    report.steps_total = max(len(commands.stdout.splitlines()), report.steps_done)
    if graph.returncode == 0:
        report.critical_s, chain = critical_path(graph.stdout, seconds)
        report.critical_path = [printable(c) for c in chain]
    else:  # no graph: the longest step and the link are a chain every schedule must run
        longest = max(steps, key=lambda s: s.seconds)
        report.critical_s = longest.seconds + report.link_s
        report.critical_path = [printable(longest.output)]
    report.floor_s = max(report.critical_s, report.sum_over_jobs_s, report.cpu_s / cores)
    report.serial_estimate_s = report.sum_steps_s * report.steps_total / report.steps_done
    ranked = sorted(steps, key=lambda s: s.seconds, reverse=True)[:top]
    report.top_steps = [(printable(s.output), round(s.seconds, 1)) for s in ranked]
    origin = min(s.start_s for s in steps)
    report.top_starts = [round(s.start_s - origin, 1) for s in ranked]
    return report


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _short(output: str) -> str:
    """A step's output without CMake's object-folder prefix (CMakeFiles/<target>.dir/)."""
    return re.sub(r"^CMakeFiles/[^/]+\.dir/", "", output)


def markdown(reports: Sequence[Report], *, machine: str, command: str) -> str:
    """The reports as one Markdown table plus the top steps of each project."""
    lines = [
        f"Machine: {machine}. Command: `{command}`.",
        "",
        "| project | status | wall (s) | ninja (s) | critical (s) | sum/cores (s) "
        "| cpu/cores (s) | floor (s) | ninja/floor | wall/floor | CPU use | steps "
        "| serial est. (s) | jobs (max seen) | peak RSS (GiB) | largest process (GiB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        # A stopped build's graph figures cover the finished steps only: lower bounds.
        partial = "≥ " if r.steps_done < r.steps_total else ""
        ratio = f"{r.ninja_s / r.floor_s:.2f}" if r.floor_s and not partial else "-"
        wall_ratio = f"{r.wall_s / r.floor_s:.2f}" if r.floor_s and not partial else "-"
        span = r.wall_s if partial else r.ninja_s
        use = f"{100 * r.cpu_s / span:.0f} % of {100 * r.cores} %" if span else "-"
        steps = f"{r.steps_done}" + (f"/{r.steps_total}" if partial else "")
        lines.append(
            f"| {_cell(r.project)} | {r.status} | {r.wall_s:.0f} | {partial}{r.ninja_s:.0f} "
            f"| {partial}{r.critical_s:.0f} | {partial}{r.sum_over_jobs_s:.0f} "
            f"| {r.cpu_s / max(r.cores, 1):.0f} | {partial}{r.floor_s:.0f} | {ratio} "
            f"| {wall_ratio} | {use} "
            f"| {steps} | {r.serial_estimate_s:.0f} | {r.jobs} ({r.max_parallel}) "
            f"| {r.peak_rss_mib / 1024:.1f} | {r.peak_process_mib / 1024:.1f} "
            f"({_cell(r.peak_process)}) |"
        )
    lines.append("")
    for r in reports:
        starts = r.top_starts or [None] * len(r.top_steps)
        top = ", ".join(
            f"`{_cell(_short(o))}` {s:.0f} s"
            + (f" (started at {at:.0f} s)" if at is not None else "")
            for (o, s), at in zip(r.top_steps, starts, strict=True)
        )
        lines.append(f"- {_cell(r.project)}: {top or 'no steps recorded'}")
        if r.critical_path:
            chain = " → ".join(f"`{_cell(_short(o))}`" for o in r.critical_path[-4:])
            lines.append(f"  critical path (last steps): {chain}")
        if r.error_tail:
            lines.append(f"  error: {_cell(r.error_tail.splitlines()[-1])}")
    return "\n".join(lines) + "\n"


def machine_description() -> str:
    """Cores, memory and (when nvidia-smi answers) the GPU of this machine."""
    memory = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f", {int(line.split()[1]) / 2**20:.0f} GiB memory"
    except OSError:
        pass
    gpu = ""
    if shutil.which("nvidia-smi"):
        query = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        )
        gpu = ", " + query.stdout.strip().replace("\n", " + ") if query.returncode == 0 else ""
    return f"{os.cpu_count()} cores{memory}{gpu}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("projects", nargs="*", help="project folders or names under --corpus")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--backend", default="cuda", choices=("cpu", "cuda", "rocm"))
    parser.add_argument("--capability", default="9.0a", help="cuda only; '' keeps build.toml's")
    parser.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--costs-dir", type=Path, help="keep recorded compile costs here")
    parser.add_argument("--cache", action="store_true", help="let the compiler cache be used")
    parser.add_argument(
        "--carried",
        type=Path,
        help="put this file into the project's copy as build2cmake-costs.tsv (an author's "
        "record: the first build's order, issue #61)",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per project")
    parser.add_argument("--top", type=int, default=5, help="longest steps listed per project")
    parser.add_argument("--work", type=Path, help="keep the build folders here (default: temp)")
    parser.add_argument("--json", type=Path, help="write the reports as JSON here")
    parser.add_argument("--machine", help="with --from-json: the machine the reports came from")
    parser.add_argument("--shown", default="", help="with --from-json: the command to show")
    parser.add_argument("--markdown", type=Path, help="write the Markdown table here")
    parser.add_argument(
        "--from-json", type=Path, nargs="+", help="build nothing: one table from these reports"
    )
    parser.add_argument(
        "--replay",
        type=Path,
        metavar="NINJA_LOG",
        help="build nothing: the span of this finished build's steps started longest first",
    )
    parser.add_argument(
        "--slots", type=int, nargs="+", default=[], help="with --replay: the compiles at once"
    )
    args = parser.parse_args(argv)
    if args.replay:
        steps = read_ninja_log(args.replay)
        print(f"{printable(str(args.replay))}: {len(steps)} steps, logged span {span(steps):.0f} s")
        for slots in args.slots or [max_parallel(steps)]:
            print(f"  {slots} at once, longest first: {longest_first_span(steps, slots):.0f} s")
        return 0
    if args.from_json:
        merged = [Report(**r) for f in args.from_json for r in json.loads(f.read_text())]
        text = markdown(merged, machine=args.machine or machine_description(), command=args.shown)
        print(text, end="")
        return 0
    sources = []
    for p in args.projects or DEFAULT_PROJECTS:
        if (Path(p) / "build.toml").is_file():
            sources.append(Path(p))
        elif args.corpus is None:
            parser.error(f"{printable(p)}: not a project folder; pass --corpus DIR, or {NO_CORPUS}")
        else:
            sources.append(args.corpus / p)
    for source in sources:
        if not (source / "build.toml").is_file():
            parser.error(f"{printable(str(source))}: no build.toml there")
    reports = []
    with tempfile.TemporaryDirectory(prefix="b2c-big-") as temporary:
        work = args.work or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        extra = [f"BUILD2CMAKE_COSTS_DIR={(args.costs_dir or work / 'costs').resolve()}"]
        if not args.cache:
            extra.append("BUILD2CMAKE_COMPILER_LAUNCHER=none")
        args.defines = [*extra, *args.defines]
        for source in sources:
            report = measure(
                source,
                work,
                backend=args.backend,
                capability=args.capability,
                defines=args.defines,
                jobs=args.jobs,
                cores=args.cores,
                timeout=args.timeout,
                top=args.top,
                carried=args.carried,
            )
            print(
                f"{printable(report.project)}: {report.status}, wall {report.wall_s:.0f} s, "
                f"floor {report.floor_s:.0f} s, peak RSS {report.peak_rss_mib / 1024:.1f} GiB",
                flush=True,
            )
            reports.append(report)
    shown = ["python", "benchmarks/big_kernels.py", *(argv if argv is not None else sys.argv[1:])]
    text = markdown(reports, machine=machine_description(), command=" ".join(shown))
    if args.markdown:
        args.markdown.write_text(text)
    else:
        print(text)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in reports], indent=1) + "\n")
    return 0 if all(r.status == "ok" for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
