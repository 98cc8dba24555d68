"""Run build2cmake over real kernel projects: validate, generate and build each one, one row each.

    PYTHONPATH=<checkout> python benchmarks/corpus.py ROOT... [--stage validate|generate|build]
        [--backends cpu,rocm[,cuda]] [-j 2] [--timeout 1200] [--budget SECONDS] [-D NAME=VALUE]...
        [--only GLOB]... [--json FILE [--resume]] [--markdown FILE|-] [--logs DIR] [--keep]
        [--rocm-chroot]

The ROOTs of the kernel corpus are $BUILD2CMAKE_CORPUS/kernels-community and
$BUILD2CMAKE_CORPUS/kernel-builder-examples (scripts/fetch-corpus.sh fills that folder).

A project is a folder holding a build.toml (folders inside a project are not searched further;
a build.toml with Jinja placeholders, such as kernel-builder's `init` template, is a template and
is skipped). Each project is copied to a temporary folder first (regular files, folders and
symlinks as links; nothing else), so nothing is ever written inside ROOT. In the copy it runs,
as `<this interpreter> -P -m build2cmake` (PYTHONPATH picks the checkout under test):

    validate        build2cmake validate build.toml
    generate        build2cmake generate-torch build.toml
    build           build2cmake build build.toml --backend B -j N [-D ...]   for each backend B
                    that the project has kernels for and this machine can build:
                      cpu   always (a C++ compiler is needed)
                      rocm  when a ROCm toolchain (hipcc) is found
                      cuda  when nvcc is found and `cuda` is in --backends (real CUDA kernels
                            take very long on a few cores, so it is opt-in)
                    and once without --backend for a noarch/universal project (no compiler).

First every project is validated and generated (seconds each), then the builds run in a fresh
copy, smallest project first; --budget stops starting builds after that many seconds (the rest
are "not run"). Each backend ends "built" (with the archs its metadata.json names), "skipped
(why)", "failed" (the first error line of its output), "timeout" or "not run". Each project
gets one row (stage reached, backends, first error, seconds); the end prints totals and the
distinct failure reasons, grouped. --json writes everything after each step, so a long run can
be read while it goes and continued with --resume; --markdown writes the table section into a
Markdown file, replacing an earlier one (benchmarks/README.md summarises the last runs).
--timeout bounds each project's checks, and again its builds. Ctrl-C or SIGTERM ends the
running command's process group and still writes the results so far.

--rocm-chroot runs the whole thing again inside the ROCm chroot of scripts/rocm-chroot.sh
(Debian sid: ROCm 6.4, clang-21, rocThrust, a CPU torch; made first when it is not cached; needs
root), with the ROOTs and the folders of --json, --markdown, --logs and --work-dir mounted at
their own paths; use it with --backends rocm. Its --markdown section is a separate one
("rocm in the ROCm chroot"), so the host's table and the chroot's stand side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import fnmatch
import json
import os
import platform
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import tomlkit
from tomlkit.exceptions import TOMLKitError

# The backends this script knows how to build; anything else a project declares (metal, xpu,
# neuron, tpu, cann) is reported as skipped.
COMPILED_BACKENDS = ("cpu", "rocm", "cuda")
NOARCH = "noarch"
# Upstream examples that exist to fail, and the stage at which they must.
EXPECTED_FAILURES = {
    "relu-invalid-capability": "validate",  # cuda-capabilities/rocm-archs that do not exist
    "silu-and-mul-bad-registration": "build",  # registers an op outside its build's namespace
}
# Folders never searched for projects: VCS data, caches, build output.
PRUNED_DIRS = {"node_modules", "__pycache__", "build", "target", "result"}
MAX_MESSAGE = 400
# `python -m build2cmake` without the working folder (a project's copy) on sys.path: -P on 3.11+;
# before, the same by hand.
PYTHON_MODULE = (
    [sys.executable, "-P", "-m", "build2cmake"]
    if sys.version_info >= (3, 11)
    else [
        sys.executable,
        "-c",
        "import sys, runpy; sys.path.pop(0); sys.argv[0] = 'build2cmake'; "
        "runpy.run_module('build2cmake', run_name='__main__', alter_sys=True)",
    ]
)
SECTION_BEGIN = "<!-- corpus.py begin -->"
SECTION_END = "<!-- corpus.py end -->"
# The section of a --rocm-chroot run: its own markers, so it does not replace the host's.
CHROOT_SECTION_BEGIN = "<!-- corpus.py rocm-chroot begin -->"
CHROOT_SECTION_END = "<!-- corpus.py rocm-chroot end -->"
REPO = Path(__file__).resolve().parent.parent
CHROOT_SCRIPT = REPO / "scripts" / "rocm-chroot.sh"


@dataclass(frozen=True)
class Found:
    """One build.toml under a root: a project, or a template that is skipped."""

    name: str
    path: Path
    skip_reason: str | None = None


@dataclass(frozen=True)
class Plan:
    """What build.toml says there is to build (read with tomlkit, independent of build2cmake)."""

    compiled: tuple[str, ...]
    noarch: bool


@dataclass
class BackendResult:
    """One backend of one project: pending, built, skipped/not run (why), failed, timeout."""

    backend: str
    status: str
    detail: str = ""
    seconds: float = 0.0
    variant: str = ""
    archs: list[str] = field(default_factory=list)

    def short(self) -> str:
        """A few words for the table: `rocm: built (gfx90a, gfx940)`, `cuda: skipped (...)`."""
        if self.status == "built":
            return f"{self.backend}: built ({', '.join([*self.archs, f'{self.seconds:.0f} s'])})"
        if self.status in ("skipped", "not run"):
            return f"{self.backend}: {self.status} ({self.detail})"
        if self.status in ("failed", "timeout"):
            return f"{self.backend}: {self.status} ({self.seconds:.0f} s)"
        return f"{self.backend}: {self.status}"


@dataclass
class ProjectResult:
    """Everything one project's run found out."""

    name: str
    stage: str
    seconds: float
    first_error: str = ""
    expected: str = ""  # the stage at which the project must fail (upstream's failing examples)
    notes: str = ""
    steps: dict[str, float] = field(default_factory=dict)
    backends: list[BackendResult] = field(default_factory=list)

    def backends_text(self) -> str:
        """All backends in one cell."""
        return "; ".join(b.short() for b in self.backends) or "-"


@dataclass(frozen=True)
class Outcome:
    """How one build2cmake command ended."""

    returncode: int
    output: str
    seconds: float
    timed_out: bool


@dataclass(frozen=True)
class Toolchains:
    """The compilers this machine has, for deciding which backends can be built."""

    cxx: str | None
    hipcc: str | None
    nvcc: str | None

    @staticmethod
    def find() -> Toolchains:
        """Look for a C++ compiler, hipcc and nvcc where build2cmake's CMake looks for them."""
        cxx = next(
            (found for name in ("c++", "g++", "clang++") if (found := shutil.which(name))), None
        )
        return Toolchains(
            cxx=os.environ.get("CXX") or cxx,
            hipcc=_first_program(
                "hipcc",
                [os.environ.get("ROCM_PATH"), os.environ.get("HIP_PATH"), "/opt/rocm"],
            ),
            nvcc=_first_program(
                "nvcc",
                [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), None, "/usr/local/cuda"],
            ),
        )

    def missing(self, backend: str) -> str | None:
        """Why `backend` cannot be built here, or None when it can."""
        if self.cxx is None:
            return "no C++ compiler (c++, g++, clang++) on PATH"
        if backend == "rocm" and self.hipcc is None:
            return "no ROCm toolchain: no hipcc in $ROCM_PATH, $HIP_PATH, PATH or /opt/rocm"
        if backend == "cuda" and self.nvcc is None:
            return "no nvcc in $CUDA_HOME, $CUDA_PATH, PATH or /usr/local/cuda"
        return None


def _first_program(name: str, prefixes: Sequence[str | None]) -> str | None:
    """`name` under the first prefix's bin/ that has it; a None prefix means PATH."""
    for prefix in prefixes:
        if prefix is None:
            found = shutil.which(name)
            if found:
                return found
        elif prefix:
            candidate = Path(prefix) / "bin" / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return shutil.which(name)


def find_projects(roots: Sequence[Path]) -> list[Found]:
    """Every folder holding a build.toml under `roots`, sorted per root; templates marked."""
    found: list[Found] = []
    seen: set[Path] = set()  # overlapping roots give each project once
    for root in roots:
        root = root.resolve()
        here: list[Found] = []
        # followlinks=False: a symlinked folder in a project must not lead the search elsewhere.
        for folder, dirs, files in os.walk(root, followlinks=False):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in PRUNED_DIRS)
            if "build.toml" not in files:
                continue
            dirs[:] = []  # a project's own folders are not projects
            path = Path(folder)
            if path in seen:
                continue
            seen.add(path)
            relative = path.relative_to(root)
            name = root.name if relative == Path(".") else f"{root.name}/{relative.as_posix()}"
            here.append(Found(name, path, _template_reason(path / "build.toml")))
        found.extend(sorted(here, key=lambda f: f.name))
    return found


def _template_reason(build_toml: Path) -> str | None:
    """Why this build.toml is not a project (Jinja placeholders), or None."""
    try:
        with build_toml.open("rb") as handle:
            head = handle.read(256 * 1024).decode("utf-8", "replace")
    except OSError as error:
        return f"unreadable: {error.strerror}"
    if "{{" in head or "{%" in head:
        return "a template (Jinja placeholders), not a project"
    return None


def read_plan(build_toml: Path) -> Plan:
    """The compiled backends (from the kernel sections) and whether the project is noarch.

    Facts of the formats: v1 kernels have `language` ("cuda", or "cuda-hipify" = CUDA + ROCm)
    instead of `backend`; v1/v2 mark pure-Python kernels with `universal = true`; edition 5 has
    `[torch-noarch]`; v3 without a framework section (`[torch]`/`[tvm-ffi]`) is noarch.
    An unreadable file gives an empty plan: validate reports it.
    """
    if build_toml.is_symlink():
        return Plan((), False)  # its target may be outside the project; validate judges it
    try:
        data = tomlkit.parse(build_toml.read_text("utf-8")).unwrap()
    except (OSError, UnicodeDecodeError, TOMLKitError):
        return Plan((), False)
    kernels = data.get("kernel")
    compiled: set[str] = set()
    if isinstance(kernels, dict):
        for section in kernels.values():
            if not isinstance(section, dict):
                continue
            backend = section.get("backend")
            if isinstance(backend, str):
                compiled.add(backend)
            elif "language" in section or "cuda-capabilities" in section:
                compiled.add("cuda")
                if section.get("language") == "cuda-hipify":
                    compiled.add("rocm")
    general = data.get("general")
    torch = data.get("torch")
    universal = (isinstance(general, dict) and general.get("universal") is True) or (
        isinstance(torch, dict) and torch.get("universal") is True
    )
    no_framework = "torch" not in data and "tvm-ffi" not in data and not compiled
    noarch = "torch-noarch" in data or universal or no_framework
    return Plan(tuple(sorted(compiled)), noarch)


def copy_project(source: Path, destination: Path) -> list[str]:
    """Copy a project: folders, regular files, symlinks as symlinks; returns what it left out.

    FIFOs, sockets and devices are left out (opening a FIFO would hang the run); symlinks are
    not followed, so the copy never reads outside the project (build2cmake judges the links).
    """
    left_out: list[str] = []
    destination.mkdir(parents=True)
    with os.scandir(source) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name == ".git":
                continue
            target = destination / entry.name
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                os.symlink(os.readlink(entry.path), target)
            elif stat.S_ISDIR(mode):
                left_out += copy_project(Path(entry.path), target)
            elif stat.S_ISREG(mode):
                shutil.copy2(entry.path, target, follow_symlinks=False)
            else:
                left_out.append(entry.path)
    return left_out


def child_environment() -> dict[str, str]:
    """The environment for build2cmake: ours, with PYTHONPATH made absolute (cwd changes)."""
    env = dict(os.environ)
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(
            str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep) if p
        )
    return env


def run_tool(arguments: Sequence[str], cwd: Path, deadline: float, env: dict[str, str]) -> Outcome:
    """Run `python -P -m build2cmake ARGS` in `cwd` until done or `deadline` (monotonic).

    -P keeps the project folder off sys.path: a project's own `build2cmake` folder must not be
    what runs. On timeout the command's whole process group (compilers included) is ended.
    """
    command = [*PYTHON_MODULE, *arguments]
    start = time.monotonic()
    remaining = deadline - start
    if remaining <= 0:
        return Outcome(-1, "", 0.0, True)
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=remaining)
        timed_out = False
    except subprocess.TimeoutExpired:
        _end_group(process)
        output, _ = process.communicate()
        timed_out = True
    except BaseException:
        _end_group(process)
        process.wait()
        raise
    text = output.decode("utf-8", "replace")
    return Outcome(process.returncode, text, time.monotonic() - start, timed_out)


def _end_group(process: subprocess.Popen[bytes]) -> None:
    """End the process group we started for one command (TERM, then KILL after 10 s)."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


_CMAKE_ERROR = re.compile(r"^CMake Error(?: at [^:]+:\d+(?: \([^)]*\))?)?:\s*(.*)$")
_COMPILER_ERROR = re.compile(r"^(?P<where>\S+?(:\d+)+|\S+\(\d+\)):\s+(fatal )?error( \w+)?:\s*")
_PLAIN_ERROR = re.compile(r"^(\S+: )?(fatal )?error:\s*", re.IGNORECASE)
_LINKER_ERROR = re.compile(r"undefined reference to|undefined symbol|cannot find -l")


def first_error(output: str, project_dir: Path) -> str:
    """The first line that says what went wrong, with the temporary folder's path removed.

    Order of trust: a Python traceback (a bug of ours, flagged), CMake's first error message,
    the first compiler/linker error, then build2cmake's own `error:` line.
    """
    lines = [line.rstrip() for line in output.replace(str(project_dir) + "/", "").splitlines()]
    tool_line = ""
    for index, line in enumerate(lines):
        if line.startswith("+ "):  # the commands build2cmake echoes
            continue
        if line.startswith("Traceback (most recent call last)"):
            tail = next((x for x in lines[index + 1 :] if x and not x.startswith(" ")), "")
            return _clip(f"TRACEBACK: {tail}")
        if cmake := _CMAKE_ERROR.match(line):
            # "CMake Error: text", or "CMake Error at file:line (message):" + indented text.
            message = [cmake.group(1)] if cmake.group(1) else []
            for x in lines[index + 1 : index + 8]:  # the message runs to the first blank line
                if x.startswith("Call Stack"):
                    break
                if not x.strip():
                    if message:
                        break
                    continue
                message.append(x.strip())
            return _clip(f"CMake: {' '.join(message)}" if message else line)
        if line.startswith("build2cmake: error:"):
            if not tool_line:
                # A message of several lines (e.g. the files a refusal names): its first three,
                # whether its continuation lines repeat the prefix or are indented under it.
                following = [line.removeprefix("build2cmake: error:").strip()]
                for x in lines[index + 1 : index + 3]:
                    other = x.startswith(("+ ", "CMake ", "-- ", "build2cmake: "))
                    if not x.strip() or (other and not x.startswith("build2cmake: error:")):
                        break
                    following.append(x.removeprefix("build2cmake: error:").strip())
                tool_line = " ".join(following)
            continue
        if _COMPILER_ERROR.match(line) or _PLAIN_ERROR.match(line) or _LINKER_ERROR.search(line):
            return _clip(line.strip())
    if tool_line:
        return _clip(tool_line)
    last = next((x for x in reversed(lines) if x.strip()), "")
    return _clip(last or "failed without output")


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def failure_reason(message: str) -> str:
    """`message` with what differs between projects (names, paths, indices, values) removed.

    A compiler's message keeps its values (which header is missing is the point) and loses only
    its file:line; build2cmake's and CMake's messages lose kernel names, indices and quoted values.
    """
    located = re.match(r"^(\w+: )?(\S+?(:\d+)+|\S+\(\d+\)):\s+(?=(fatal )?error)", message)
    if located:
        return (located.group(1) or "") + message[located.end() :]
    reason = re.sub(r"^\S*build\.toml: ", "", message)
    reason = re.sub(r"\[kernel\.[^\]]+\]", "[kernel.*]", reason)
    reason = re.sub(r"\b(kernel|target) [A-Za-z0-9_]+", r"\1 …", reason)
    reason = re.sub(r"\bkernel_[A-Za-z0-9_]+", "kernel_…", reason)  # CMake's kernel targets
    reason = re.sub(r"\[\d+\]", "[N]", reason)
    reason = re.sub(r"'[^']*'", "'…'", reason)
    reason = re.sub(r'"[^"]*"', '"…"', reason)
    return reason


def _safe_name(name: str) -> str:
    """A project name as one harmless path component (for log folders)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "_"


class Runner:
    """Runs the stages for one project after another and collects the results."""

    def __init__(self, args: argparse.Namespace, toolchains: Toolchains) -> None:
        self.args = args
        self.toolchains = toolchains
        self.env = child_environment()
        self.asked = set(args.backends)

    def log(self, name: str, step: str, output: str) -> None:
        """Keep a step's whole output under --logs (when given)."""
        if self.args.logs is None:
            return
        folder = self.args.logs / _safe_name(name)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{step}.log").write_text(output, "utf-8")

    @contextlib.contextmanager
    def _workspace(self, found: Found) -> Iterator[tuple[Path, dict[str, str], list[str]]]:
        """A fresh copy of the project (removed afterwards unless --keep), its environment."""
        work = Path(tempfile.mkdtemp(prefix="corpus-", dir=self.args.work_dir))
        # Compiler-cache hits across runs although every run copies to a new folder.
        env = {"CCACHE_BASEDIR": str(work), **self.env}
        copy = work / _safe_name(found.path.name)
        try:
            left_out = copy_project(found.path, copy)
            yield copy, env, left_out
        finally:
            if self.args.keep:
                print(f"   kept {work}", flush=True)
            else:
                shutil.rmtree(work, ignore_errors=True)

    def check(self, found: Found) -> ProjectResult:
        """Copy, validate and generate one project, and plan its backends (pending or skipped).

        Never raises for the project's faults: they end up in the result.
        """
        start = time.monotonic()
        deadline = start + self.args.timeout
        result = ProjectResult(found.name, "started", 0.0)
        # The stage at which this project must fail, if it is one of those that exist to fail.
        result.expected = EXPECTED_FAILURES.get(found.path.name, "")
        try:
            with self._workspace(found) as (copy, env, left_out):
                if left_out:
                    result.notes = _clip(f"not copied (not files): {', '.join(left_out)}")
                self._check(found, copy, env, deadline, result)
        except OSError as error:
            result.stage = "copy failed"
            result.first_error = _clip(f"copying {found.path}: {error}")
        result.seconds = time.monotonic() - start
        return result

    def _check(
        self,
        found: Found,
        copy: Path,
        env: dict[str, str],
        deadline: float,
        result: ProjectResult,
    ) -> None:
        for step, arguments in (
            ("validate", ["validate", "build.toml"]),
            ("generate", ["generate-torch", "build.toml"]),
        ):
            outcome = run_tool(arguments, copy, deadline, env)
            result.steps[step] = round(outcome.seconds, 2)
            self.log(found.name, step, outcome.output)
            if outcome.timed_out:
                result.stage = f"{step} timeout"
                result.first_error = f"{step}: no result within --timeout {self.args.timeout} s"
                return
            if outcome.returncode != 0:
                result.stage = f"{step} failed"
                result.first_error = first_error(outcome.output, copy)
                return
            result.stage = "validated" if step == "validate" else "generated"
            if self.args.stage == step:
                return
        result.backends = self._backend_plan(read_plan(copy / "build.toml"))
        if not any(b.status == "pending" for b in result.backends):
            result.stage = "generated; nothing to build here"

    def build(self, found: Found, result: ProjectResult) -> None:
        """Build the pending backends of a checked project in a fresh copy; updates `result`."""
        start = time.monotonic()
        deadline = start + self.args.timeout
        try:
            with self._workspace(found) as (copy, env, _):
                for backend in result.backends:
                    if backend.status in ("pending", "not run"):
                        self._build(found.name, copy, backend, deadline, env)
        except OSError as error:
            result.first_error = result.first_error or _clip(f"copying {found.path}: {error}")
        result.seconds += time.monotonic() - start
        failed = next((b for b in result.backends if _failed(b)), None)
        if failed is not None and not result.first_error:
            result.first_error = f"{failed.backend}: {failed.detail}"
        result.stage = build_stage(result.backends)

    def not_run(self, result: ProjectResult) -> None:
        """Mark the pending backends of a project the --budget left no time for."""
        for backend in result.backends:
            if backend.status == "pending":
                backend.status, backend.detail = "not run", "--budget spent"
        result.stage = "builds not run (--budget)"

    def _backend_plan(self, plan: Plan) -> list[BackendResult]:
        """One entry per backend the project has: pending (to build) or skipped with why."""
        results: list[BackendResult] = []
        if plan.noarch:
            results.append(BackendResult(NOARCH, "pending"))
        for backend in plan.compiled:
            if backend not in COMPILED_BACKENDS:
                results.append(BackendResult(backend, "skipped", "not built by this script"))
            elif backend not in self.asked:
                results.append(BackendResult(backend, "skipped", "not in --backends"))
            elif (why := self.toolchains.missing(backend)) is not None:
                results.append(BackendResult(backend, "skipped", why))
            else:
                results.append(BackendResult(backend, "pending"))
        order = {b: i for i, b in enumerate((NOARCH, *COMPILED_BACKENDS))}
        results.sort(key=lambda r: (order.get(r.backend, len(order)), r.backend))
        return results

    def _build(
        self,
        name: str,
        copy: Path,
        backend: BackendResult,
        deadline: float,
        env: dict[str, str],
    ) -> None:
        arguments = ["build", "build.toml", "-j", str(self.args.jobs)]
        if backend.backend != NOARCH:
            arguments += ["--backend", backend.backend]
        for define in self.args.defines:
            arguments += ["-D", define]
        outcome = run_tool(arguments, copy, deadline, env)
        backend.seconds = round(outcome.seconds, 2)
        self.log(name, f"build-{backend.backend}", outcome.output)
        if outcome.timed_out:
            backend.status = "timeout"
            backend.detail = f"no result within --timeout {self.args.timeout} s"
            return
        if outcome.returncode != 0:
            backend.status = "failed"
            backend.detail = first_error(outcome.output, copy)
            return
        metadata = _built_metadata(outcome.output, copy)
        if metadata is None:
            backend.status = "failed"
            backend.detail = "build exited 0 but no build/<variant>/metadata.json was written"
            return
        backend.status = "built"
        backend.variant, backend.archs = metadata


def build_stage(backends: Sequence[BackendResult]) -> str:
    """The stage a project's builds reached, from its backends."""
    attempted = [b for b in backends if b.status != "skipped"]
    if not attempted:
        return "generated; nothing to build here"
    if all(b.status == "built" for b in attempted):
        return "built"
    if any(b.status == "timeout" for b in attempted):
        return "build timeout"
    if any(b.status == "failed" for b in attempted):
        return "build failed"
    return "builds not run (--budget)"


def source_bytes(folder: Path) -> int:
    """Bytes in a project's files (symlinks not followed): the order builds run in, small first."""
    total = 0
    for path, _, files in os.walk(folder, followlinks=False):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(path, name)).st_size
    return total


def _built_metadata(output: str, copy: Path) -> tuple[str, list[str]] | None:
    """The variant folder `build` reported and the archs its metadata.json lists."""
    matches = re.findall(r"^built (\S+)", output, re.MULTILINE)
    candidates = [Path(m) for m in matches] or sorted((copy / "build").glob("*/metadata.json"))
    for candidate in candidates:
        folder = candidate if candidate.name != "metadata.json" else candidate.parent
        folder = folder if folder.is_absolute() else copy / folder
        try:
            folder.resolve().relative_to(copy.resolve())
            data = json.loads((folder / "metadata.json").read_text("utf-8"))
        except (OSError, ValueError):
            continue
        backend = data.get("backend") if isinstance(data, dict) else None
        archs = backend.get("archs", []) if isinstance(backend, dict) else []
        return folder.name, [str(a) for a in archs] if isinstance(archs, list) else []
    return None


def totals(results: Sequence[ProjectResult], skipped: Sequence[Found]) -> dict[str, object]:
    """Counts for the summary: how far projects got, and per backend built/attempted/skipped."""
    reached_validate = [r for r in results if r.stage not in ("validate failed", "copy failed")]
    validated = [r for r in reached_validate if r.stage != "validate timeout"]
    generated = [r for r in validated if r.stage not in ("generate failed", "generate timeout")]
    per_backend: dict[str, dict[str, int]] = {}
    for r in results:
        for b in r.backends:
            counts = per_backend.setdefault(b.backend, {"built": 0, "failed": 0, "skipped": 0})
            key = "failed" if b.status == "timeout" else b.status
            counts[key] = counts.get(key, 0) + 1
    expected_ok = [r for r in results if r.expected and r.stage == f"{r.expected} failed"]
    return {
        "projects": len(results),
        "templates skipped": len(skipped),
        "validated": len(validated),
        "generated": len(generated),
        "all asked backends built": sum(r.stage == "built" for r in results),
        "expected failures that failed as expected": len(expected_ok),
        "backends": dict(sorted(per_backend.items())),
        "seconds": round(sum(r.seconds for r in results), 1),
    }


def short_names(results: Sequence[ProjectResult]) -> dict[str, str]:
    """Project name -> its folder name, or the whole name where two projects share a folder name."""
    bases = [r.name.rsplit("/", 1)[-1] for r in results]
    return {
        r.name: base if bases.count(base) == 1 else r.name
        for r, base in zip(results, bases, strict=True)
    }


@dataclass(frozen=True)
class FailureGroup:
    """Projects that failed at the same stage for the same reason."""

    stage: str
    reason: str
    projects: list[str]


def failure_groups(results: Sequence[ProjectResult]) -> list[FailureGroup]:
    """Distinct failure reasons (per stage), most frequent first, with the projects showing them."""
    groups: dict[tuple[str, str], list[str]] = {}
    short = short_names(results)
    for r in results:
        failures: list[tuple[str, str]] = []
        if r.stage.endswith(("failed", "timeout")) and not r.stage.startswith("build"):
            failures.append((r.stage.split()[0], r.first_error))
        failures += [(f"build {b.backend}", b.detail) for b in r.backends if _failed(b)]
        for stage, message in failures:
            # Long messages (a compiler's whole arch list) group on their beginning.
            reason = failure_reason(message)[:160]
            groups.setdefault((stage, reason), []).append(short[r.name])
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    return [FailureGroup(stage, reason, sorted(names)) for (stage, reason), names in ordered]


def _failed(backend: BackendResult) -> bool:
    return backend.status in ("failed", "timeout")


def text_table(results: Sequence[ProjectResult]) -> str:
    """The rows for a terminal."""
    width = max((len(r.name) for r in results), default=10)
    lines = []
    for r in results:
        lines.append(
            f"{r.name:<{width}}  {r.stage:<16} {r.seconds:7.1f}s  {r.backends_text()}"
            + (f"\n{'':<{width}}  first error: {r.first_error}" if r.first_error else "")
            + (f"\n{'':<{width}}  note: {r.notes}" if r.notes else "")
        )
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or "-"


def markdown(
    results: Sequence[ProjectResult], meta: dict[str, object], summary: dict[str, object]
) -> str:
    """The run's Markdown section: how it ran, the table, totals, failure groups."""
    chroot = meta.get("chroot")
    title = "## The kernel corpus (benchmarks/corpus.py)"
    if chroot:
        title = "## The kernel corpus, rocm in the ROCm chroot (benchmarks/corpus.py --rocm-chroot)"
    lines = [
        title,
        "",
        # The chroot's folder is this machine's; what it holds is the part in parentheses.
        (
            f"In scripts/rocm-chroot.sh's chroot ({str(chroot).rpartition(' (')[2]}. "
            if chroot
            else ""
        )
        + f"{meta['date']}; build2cmake {meta['build2cmake']}; {meta['machine']}; "
        f"torch {meta['torch']}; stage {meta['stage']}; backends asked: {meta['backends']}; "
        f"-j {meta['jobs']}; timeout {meta['timeout']} s per project"
        + (f"; builds started within {meta['budget']} s" if meta["budget"] else "")
        + "".join(f"; -D {define}" for define in _strings(meta["defines"]))
        + ".",
        f"Toolchains: C++ {meta['cxx'] or 'none'}, hipcc {meta['hipcc'] or 'none'}, "
        f"nvcc {meta['nvcc'] or 'none'}. Command: `{meta['command']}`",
        "",
        "| project | stage reached | backends | first error | s |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        stage = r.stage + (f" (must fail at {r.expected}: upstream example)" if r.expected else "")
        lines.append(
            f"| {_cell(r.name)} | {_cell(stage)} | {_cell(r.backends_text())} "
            f"| {_cell(r.first_error)} | {r.seconds:.1f} |"
        )
    lines += ["", "Totals: " + _totals_line(summary), ""]
    groups = failure_groups(results)
    if groups:
        lines += ["Failures, grouped (stage: reason — count: projects):", ""]
        lines += [
            f"- {g.stage}: {_cell(g.reason)} — {len(g.projects)}: {_cell(', '.join(g.projects))}"
            for g in groups
        ]
        lines.append("")
    return "\n".join(lines)


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _totals_line(summary: dict[str, object]) -> str:
    backends = summary["backends"]
    assert isinstance(backends, dict)
    per = "; ".join(
        f"{name} " + ", ".join(f"{n} {status}" for status, n in counts.items() if n)
        for name, counts in backends.items()
    )
    return (
        f"{summary['projects']} projects ({summary['templates skipped']} templates skipped), "
        f"{summary['validated']} validated, {summary['generated']} generated, "
        f"{summary['all asked backends built']} built every backend attempted; "
        f"expected failures as expected: {summary['expected failures that failed as expected']}; "
        f"backends: {per or 'none attempted'}; {summary['seconds']} s in all."
    )


def write_markdown(path: str, section: str, chroot: bool = False) -> None:
    """Print the section (`-`), or put it into a Markdown file, replacing an earlier one.

    A --rocm-chroot run's section has markers of its own: it replaces only an earlier one of those.
    """
    if path == "-":
        print(section)
        return
    begin, end = (
        (CHROOT_SECTION_BEGIN, CHROOT_SECTION_END) if chroot else (SECTION_BEGIN, SECTION_END)
    )
    target = Path(path)
    text = target.read_text("utf-8") if target.exists() else "# Measured results\n"
    block = f"{begin}\n{section}{end}"
    if begin in text and end in text:
        before, _, rest = text.partition(begin)
        _, _, after = rest.partition(end)
        text = before + block + after
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    target.write_text(text, "utf-8")


def read_earlier(path: Path) -> dict[str, ProjectResult]:
    """The project results of an earlier run's --json file (none when it is missing or bad)."""
    try:
        data = json.loads(path.read_text("utf-8"))
        earlier = {}
        for entry in data["projects"]:
            backends = [BackendResult(**b) for b in entry.pop("backends")]
            result = ProjectResult(**entry, backends=backends)
            earlier[result.name] = result
        return earlier
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"--resume: nothing usable in {path} ({error}); running every project")
        return {}


def write_json(path: Path, document: dict[str, object]) -> None:
    """Write the JSON record atomically (it is rewritten after every project)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=1) + "\n", "utf-8")
    os.replace(tmp, path)


def run_metadata(args: argparse.Namespace, toolchains: Toolchains) -> dict[str, object]:
    """How this run was made: which build2cmake (path, git commit), torch, machine, compilers."""
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.pop(0); import build2cmake; print(build2cmake.__file__)",
        ],
        capture_output=True,
        text=True,
        env=child_environment(),
        check=False,
    )
    location = probe.stdout.strip() or f"not importable: {probe.stderr.strip()[-200:]}"
    revision = "?"
    if args.revision:  # the run outside the chroot, which has no git, said which
        revision = args.revision
    elif probe.returncode == 0:
        checkout = Path(location).parent.parent
        git = subprocess.run(
            ["git", "-C", str(checkout), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=False,
        )
        # The checkout's folder name and commit: no machine paths in the published table.
        revision = f"{checkout.name} @ {git.stdout.strip()}" if git.returncode == 0 else location
    try:
        from importlib.metadata import version

        torch_version = version("torch")
    except Exception:
        torch_version = "not installed"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "build2cmake": revision,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "torch": torch_version,
        "stage": args.stage,
        "backends": ",".join(args.backends),
        "jobs": args.jobs,
        "timeout": args.timeout,
        "budget": args.budget,
        "defines": list(args.defines),
        "cxx": _with_version(toolchains.cxx, "++"),
        "hipcc": _with_version(toolchains.hipcc, "HIP version"),
        "nvcc": _with_version(toolchains.nvcc, "release"),
        "command": "python benchmarks/corpus.py " + " ".join(_shown_arguments(args)),
        "chroot": args.in_chroot,
    }


def _shown_arguments(args: argparse.Namespace) -> list[str]:
    """This run's arguments as the user gave them (in the chroot: the outer --rocm-chroot run)."""
    if args.in_chroot is None:
        return sys.argv[1:]
    shown = list(sys.argv[1:])
    for hidden in ("--in-chroot", "--revision"):
        if hidden in shown:
            index = shown.index(hidden)
            del shown[index : index + 2]
    return [*shown, "--rocm-chroot"]


def chroot_arguments(args: argparse.Namespace) -> tuple[list[str], list[Path]]:
    """This run's arguments for the run inside the chroot, every path absolute, and the folders
    that run needs mounted (the ROOTs and where its outputs go; the repository always is)."""
    inner: list[str] = [str(root.resolve()) for root in args.roots]
    binds = [root.resolve() for root in args.roots]
    inner += ["--stage", args.stage, "--backends", ",".join(args.backends)]
    inner += ["-j", str(args.jobs), "--timeout", str(args.timeout)]
    if args.budget:
        inner += ["--budget", str(args.budget)]
    for define in args.defines:
        inner += ["-D", define]
    for pattern in args.only:
        inner += ["--only", pattern]
    outputs: list[tuple[str, Path | None, bool]] = [
        ("--json", args.json, False),
        ("--markdown", None if args.markdown in (None, "-") else Path(args.markdown), False),
        ("--logs", args.logs, True),
        ("--work-dir", args.work_dir, True),
    ]
    for option, path, is_folder in outputs:
        if path is None:
            continue
        path = path.resolve()
        if is_folder:
            path.mkdir(parents=True, exist_ok=True)
        binds.append(path if is_folder else path.parent)
        inner += [option, str(path)]
    if args.markdown == "-":
        inner += ["--markdown", "-"]
    inner += ["--resume"] if args.resume else []
    inner += ["--keep"] if args.keep else []
    kept: list[Path] = []
    for folder in binds:
        if folder != REPO and REPO not in folder.parents and folder not in kept:
            kept.append(folder)
    return inner, kept


def run_in_chroot(args: argparse.Namespace) -> int:
    """Make (or reuse) the ROCm chroot and run this script inside it with the same arguments."""
    ensure = subprocess.run(
        ["bash", str(CHROOT_SCRIPT), "ensure"], stdout=subprocess.PIPE, text=True, check=False
    )
    if ensure.returncode != 0:
        print("--rocm-chroot: no chroot could be made (see above)", file=sys.stderr)
        return 2
    label = ensure.stdout.strip().splitlines()[-1]
    print(f"--rocm-chroot: running in {label}", flush=True)
    inner, binds = chroot_arguments(args)
    # The checkout that runs there is this one (rocm-chroot.sh puts it on PYTHONPATH).
    git = subprocess.run(
        ["git", "-C", str(REPO), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    inner += ["--revision", f"{REPO.name} @ {git.stdout.strip() or '?'}"]
    command = ["bash", str(CHROOT_SCRIPT), "run"]
    for folder in binds:
        command += ["--bind", str(folder)]
    command += ["--", "python", str(Path(__file__).resolve()), *inner, "--in-chroot", label]
    # The chroot starts in the current folder, which must be mounted there: the repository is.
    return subprocess.run(command, cwd=REPO, check=False).returncode


def _with_version(program: str | None, marker: str) -> str | None:
    """`program (the line of its --version output holding marker)`, for the record."""
    if program is None:
        return None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        output = subprocess.run(
            [program, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
        line = next((x.strip() for x in output.splitlines() if marker in x), "")
        if line:
            return f"{program} ({line})"
    return program


def _backends(text: str) -> list[str]:
    names = [b.strip() for b in text.split(",") if b.strip()]
    unknown = [b for b in names if b not in COMPILED_BACKENDS]
    if unknown:
        valid = ", ".join(COMPILED_BACKENDS)
        raise argparse.ArgumentTypeError(
            f"{', '.join(unknown)}: not a backend this script builds ({valid})"
        )
    return names


def _selected(found: Found, patterns: Iterable[str]) -> bool:
    patterns = list(patterns)
    if not patterns:
        return True
    return any(
        fnmatch.fnmatch(found.name, p) or fnmatch.fnmatch(found.path.name, p) for p in patterns
    )


def report(
    results: Sequence[ProjectResult],
    templates: Sequence[Found],
    meta: dict[str, object],
    markdown_path: str | None,
) -> None:
    """Print the table, totals and failure groups; write the Markdown section when asked."""
    summary = totals(results, templates)
    print("\n" + text_table(results))
    print("\nTotals: " + _totals_line(summary))
    groups = failure_groups(results)
    if groups:
        print("\nFailures, grouped:")
        for g in groups:
            print(f"  {len(g.projects):3d}  {g.stage}: {g.reason}  ({', '.join(g.projects)})")
    if markdown_path:
        write_markdown(markdown_path, markdown(results, meta, summary), bool(meta.get("chroot")))


def render_only(path: Path, markdown_path: str | None) -> int:
    """The tables of an earlier run's JSON, without running anything."""
    try:
        data = json.loads(path.read_text("utf-8"))
        meta = dict(data["meta"])
        templates = [Found(str(t["name"]), Path(), str(t["reason"])) for t in data["skipped"]]
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"{path}: not a corpus.py JSON record ({error})", file=sys.stderr)
        return 2
    results = list(read_earlier(path).values())
    for result in results:
        result.expected = EXPECTED_FAILURES.get(result.name.rsplit("/", 1)[-1], "")
    report(results, templates, meta, markdown_path)
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the corpus; exit 0 when every project ran (whatever it reached), 2 on bad usage."""
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join((__doc__ or "").splitlines()[1:]),
    )
    parser.add_argument("roots", nargs="*", type=Path, metavar="ROOT")
    parser.add_argument(
        "--stage",
        choices=("validate", "generate", "build"),
        default="build",
        help="how far to go (default: build)",
    )
    parser.add_argument(
        "--backends",
        type=_backends,
        default=["cpu", "rocm"],
        help="compiled backends to build where possible (default: cpu,rocm; add cuda to build "
        "CUDA kernels when nvcc is here)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        metavar="SECONDS",
        help="start no build after this many seconds of building (the rest: `not run`)",
    )
    parser.add_argument("-j", "--jobs", type=int, default=2, help="compile jobs (default: 2)")
    parser.add_argument(
        "--timeout", type=float, default=1200.0, help="seconds per project (default: 1200)"
    )
    parser.add_argument(
        "-D",
        dest="defines",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="passed to every `build2cmake build`, e.g. -D BUILD2CMAKE_ROCM_ARCHS='gfx90a;gfx940'",
    )
    parser.add_argument(
        "--only", action="append", default=[], metavar="GLOB", help="run matching projects only"
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="write all results as JSON")
    parser.add_argument(
        "--markdown", metavar="FILE", help="write the table section into FILE (`-`: print it)"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the results of projects already in --json FILE and run only the others",
    )
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="run nothing: print (and --markdown) the tables of the run in --json FILE",
    )
    parser.add_argument("--logs", type=Path, metavar="DIR", help="keep every step's output here")
    parser.add_argument("--work-dir", type=Path, help="where the temporary copies go")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copies")
    parser.add_argument(
        "--rocm-chroot",
        action="store_true",
        help="run inside scripts/rocm-chroot.sh's chroot (ROCm 6.4; needs root); see above",
    )
    # Set by --rocm-chroot for the run inside: the chroot's description, for the record.
    parser.add_argument("--in-chroot", metavar="LABEL", help=argparse.SUPPRESS)
    parser.add_argument("--revision", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for root in args.roots:
        if not root.is_dir():
            parser.error(f"{root}: not a folder")
    if (args.resume or args.render_only) and args.json is None:
        parser.error("--resume and --render-only need --json FILE (an earlier run)")
    if args.render_only:
        return render_only(args.json, args.markdown)
    if not args.roots:
        parser.error("give at least one ROOT folder")
    if args.work_dir is not None:
        args.work_dir.mkdir(parents=True, exist_ok=True)
    if args.jobs < 1 or args.timeout <= 0:
        parser.error("-j and --timeout must be positive")
    if args.rocm_chroot:
        return run_in_chroot(args)

    # A terminated run ends like an interrupted one: the running command's process group is
    # ended, temporary copies removed, and the results so far written.
    signal.signal(signal.SIGTERM, _interrupt)
    toolchains = Toolchains.find()
    meta = run_metadata(args, toolchains)
    print(f"build2cmake: {meta['build2cmake']}", flush=True)
    found = [f for f in find_projects(args.roots) if _selected(f, args.only)]
    templates = [f for f in found if f.skip_reason]
    for f in templates:
        print(f"skip {f.name}: {f.skip_reason}", flush=True)
    projects = [f for f in found if not f.skip_reason]
    runner = Runner(args, toolchains)
    results: list[ProjectResult] = []
    earlier = read_earlier(args.json) if args.resume else {}

    def document() -> dict[str, object]:
        return {
            "meta": meta,
            "skipped": [{"name": f.name, "reason": f.skip_reason} for f in templates],
            "projects": [asdict(r) for r in results],
            "totals": totals(results, templates),
            "failure_groups": [asdict(g) for g in failure_groups(results)],
        }

    def save() -> None:
        if args.json:
            write_json(args.json, document())

    interrupted = False
    try:
        # Pass 1: validate and generate everything (seconds each), so the table has every row
        # even when the builds do not all fit into --budget.
        for index, project in enumerate(projects, 1):
            print(f"[{index}/{len(projects)}] {project.name}", flush=True)
            earlier_result = earlier.get(project.name)
            if earlier_result is not None and earlier_result.stage != "started":
                result = earlier_result
                print("   (from the earlier run in --json)")
            else:
                result = runner.check(project)
            results.append(result)
            print(text_table([result]), flush=True)
            save()
        # Pass 2: the builds, smallest project first.
        pending = [
            (project, result)
            for project, result in zip(projects, results, strict=True)
            if any(b.status in ("pending", "not run") for b in result.backends)
        ]
        pending.sort(key=lambda item: source_bytes(item[0].path))
        budget_end = time.monotonic() + args.budget if args.budget else None
        for index, (project, result) in enumerate(pending, 1):
            if budget_end is not None and time.monotonic() >= budget_end:
                runner.not_run(result)
                continue
            print(f"[build {index}/{len(pending)}] {project.name}", flush=True)
            runner.build(project, result)
            print(text_table([result]), flush=True)
            save()
    except KeyboardInterrupt:
        interrupted = True
        print("interrupted; the results so far follow", flush=True)
    save()

    report(results, templates, meta, args.markdown)
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
