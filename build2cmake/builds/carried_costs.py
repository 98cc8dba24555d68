"""`costs`: the compile times this machine recorded for a project, written into the project as
build2cmake-costs.tsv (#61).

A build orders each kernel's compiles longest first by the seconds an earlier build on the same
machine recorded (cmake/build2cmake_schedule.py). A machine that never built the kernel has no
such record and orders by size, which can start the slowest units last (kernels-community's
layer-norm: 1.5x its floor). The project's author, who has built it, keeps those seconds in the
project with this command; every first build elsewhere (`build`, `pip install -e .`, `--variants`,
the CI workflow) then starts the longest compiles first. The schedule reads the file as the
project's, untrusted: it decides the order only, and a stale or broken file changes nothing else.

Where the seconds come from: each build folder under build/ names the costs file its build
recorded into (build2cmake-costs-file.txt, written at configure). Those names are the build
folder's, which a cloned project may plant, so a name is used only when it is an absolute path
to a file called `<package>-<backend>.tsv`, the file is a regular one of bounded size, and of its
lines only those giving seconds for a source of this project are kept.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from build2cmake.builds.builder import COSTS_FILE_RECORD, named_costs_file, schedule_module
from build2cmake.config import load_project
from build2cmake.config.schema import HEADER_SUFFIXES
from build2cmake.ground.errors import Build2CMakeError, printable
from build2cmake.ground.safefs import ProjectFolder, read_regular_file

RECORD_NAME = "build2cmake-costs.tsv"
RECORD_FIRST_LINE = (
    "# build2cmake compile costs of this project, v1: <seconds>\t<backend>\t<object key>"
)
RECORD_HEADER = (
    f"{RECORD_FIRST_LINE}\n"
    "# Written by `build2cmake costs` from the builds of one machine. A first build elsewhere\n"
    "# starts its longest compiles first by these seconds; nothing else depends on them, so the\n"
    "# file may be stale, edited or deleted.\n"
)
POINTER_NAME = COSTS_FILE_RECORD
BUILD_FOLDER = "build"
HIPIFIED = "hipified/"


@functools.cache
def schedule() -> ModuleType:
    """The schedule script, whose rules the record follows (what a key, seconds and a backend
    are; its bounds): `costs` writes only what it reads."""
    module = schedule_module()
    if module is None:
        raise Build2CMakeError(
            "build2cmake's schedule script (cmake_templates/common/build2cmake_schedule.py) "
            "cannot be loaded; reinstall build2cmake"
        )
    return module


@dataclass
class CostsReport:
    path: Path
    # backend -> the number of compiles whose seconds the record now holds for it
    written: dict[str, int] = field(default_factory=dict)
    # the costs files read, for the message
    sources: list[Path] = field(default_factory=list)


def source_of(root: Path, key: str) -> bool:
    """Whether object key `key` is a compile of one of the project's files: the file itself, or
    (a ROCm build's hipified copy in the build folder) the .cu or .hip it was made from."""
    if not schedule().plain_key(key):
        return False
    candidates = [key]
    if key.startswith(HIPIFIED):
        original = key[len(HIPIFIED) :]
        candidates += [original, re.sub(r"\.hip$", ".cu", original)]
    for candidate in candidates:
        try:
            info = os.stat(root / candidate, follow_symlinks=False)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(info.st_mode):
            return True
    return False


def recorded_files(root: Path, package: str) -> dict[str, list[Path]]:
    """The costs files (backend -> paths, newest first) the build folders under build/ name."""
    found: dict[str, list[Path]] = {}
    build = root / BUILD_FOLDER
    if build.is_symlink():
        raise Build2CMakeError(
            f"{printable(str(build))}: a symlink; build2cmake's builds write a real build/ "
            "folder, and costs reads only that: remove the link and build again"
        )
    try:
        entries = sorted(os.scandir(build), key=lambda e: e.name)
    except OSError:
        return found
    pattern = re.compile(re.escape(package) + r"-([a-z][a-z0-9]{0,15})\.tsv")
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        if Path(entry.path, POINTER_NAME).is_symlink():
            continue
        named = named_costs_file(Path(entry.path))
        match = pattern.fullmatch(named.name) if named else None
        if named is None or match is None:
            continue
        paths = found.setdefault(match[1], [])
        if named not in paths:
            paths.append(named)
    for paths in found.values():
        paths.sort(key=_mtime, reverse=True)
    return found


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except (OSError, ValueError):
        return 0.0


def read_record(path: Path) -> dict[str, dict[str, float]]:
    """The project's record as backend -> key -> seconds; refuses a file build2cmake did not
    write (its first line is not ours)."""
    rules = schedule()
    raw = read_regular_file(path, rules.COSTS_LIMIT, RECORD_NAME)
    if raw.decode("utf-8", "replace").partition("\n")[0] != RECORD_FIRST_LINE:
        raise Build2CMakeError(
            f"{path}: not a record build2cmake wrote (its first line is not "
            f"{RECORD_FIRST_LINE!r}); move it away, or pass --force to replace it"
        )
    record: dict[str, dict[str, float]] = rules.parse_carried(raw)
    return record


def shown_seconds(value: float) -> str:
    """Three significant figures (whole seconds from 1000 s, never an exponent the schedule
    would read as too large): the order needs no more, and a rebuild then rarely changes the
    file the author commits."""
    if value >= 1000:
        return f"{value:.0f}"
    return f"{value:.3g}" if value >= 0.001 else "0"


def record_lines(record: dict[str, dict[str, float]]) -> list[str]:
    """The record's lines, sorted, within what the schedule reads (COSTS_LIMIT with the header):
    past it, the cheapest compiles are left out, whose place in the order matters least."""
    entries = sorted(
        (
            (value, backend, key)
            for backend, costs in record.items()
            for key, value in costs.items()
        ),
        key=lambda entry: -entry[0],
    )
    rules = schedule()
    room = rules.COSTS_LIMIT - len(RECORD_HEADER.encode())
    kept = []
    for value, backend, key in entries[: rules.ENTRIES_LIMIT]:
        line = f"{shown_seconds(value)}\t{backend}\t{key}\n"
        room -= len(line.encode())
        if room < 0:
            break
        kept.append((backend, key, line))
    return [line for _, _, line in sorted(kept)]


def save_costs(build_toml: Path, *, force: bool = False) -> CostsReport:
    project = load_project(build_toml)
    root = build_toml.parent
    files = recorded_files(root, project.package_name)
    fresh: dict[str, dict[str, float]] = {}
    report = CostsReport(path=root / RECORD_NAME)
    for backend, paths in sorted(files.items()):
        merged: dict[str, float] = {}
        for path in reversed(paths):  # oldest first: the newest file's seconds win
            costs = schedule().read_costs(str(path))
            if costs:
                report.sources.append(path)
            merged.update(costs)
        kept = {key: value for key, value in merged.items() if source_of(root, key)}
        if kept:
            fresh[backend] = kept
    if not fresh:
        raise Build2CMakeError(
            f"{printable(str(root / BUILD_FOLDER))}: no compile times recorded for "
            f"{project.package_name}'s sources: build the project here first (`build2cmake "
            "build`, or `pip install --no-build-isolation -e .`), with compile costs kept (not "
            "BUILD2CMAKE_COSTS_DIR=OFF)"
        )
    record: dict[str, dict[str, float]] = {}
    if (report.path.exists() or report.path.is_symlink()) and not force:
        record = read_record(report.path)
    record.update(fresh)
    lines = record_lines(record)
    with ProjectFolder(root) as folder:
        folder.write_atomic(RECORD_NAME, (RECORD_HEADER + "".join(lines)).encode())
    written = [line.split("\t")[1] for line in lines]
    report.written = {backend: written.count(backend) for backend in fresh}
    return report


def suggestion(build_toml: Path, backend: str) -> str | None:
    """One line after a build whose first build elsewhere would gain from a record: the project
    carries none, and its `backend` kernels compile more sources than this machine has CPUs (so
    some wait, and which wait decides the wall time)."""
    root = build_toml.parent
    if (root / RECORD_NAME).exists() or (root / RECORD_NAME).is_symlink():
        return None
    if not any((root / BUILD_FOLDER).glob(f"*/{POINTER_NAME}")):
        return None  # nothing recorded (BUILD2CMAKE_COSTS_DIR=OFF)
    project = load_project(build_toml)
    compiled = {
        source
        for kernel in project.kernels
        if kernel.backend == backend
        for source in kernel.sources
        if not source.name.endswith(HEADER_SUFFIXES)
    }
    if len(compiled) <= (os.cpu_count() or 1):
        return None
    return (
        f"{len(compiled)} kernel sources, their compile times recorded: `build2cmake costs` keeps "
        f"them in the project ({RECORD_NAME}, to commit), so that a first build elsewhere starts "
        "its longest compiles first"
    )
