"""The order a build compiles its kernels' sources in, and the costs that order comes from.

Ninja starts ready steps of equal depth in the order build.ninja lists them, which is the order
of each target's sources. A big kernel's build is bound by its longest translation units when
they start last (kernels-community's layer-norm: its three longest units started after the
others and ran alone while 13 of 16 cores idled), so each kernel's sources are listed longest
first: by the seconds each took in an earlier build, else by a cold estimate (the bytes of the
source and of the project headers it includes, which is what the compiler reads and instantiates).

  cores                   the CPUs this process may use: its affinity, within its cgroup's quota
  order --costs FILE --source-dir DIR --binary-dir DIR [--build-dir DIR] [--include DIR ...]
        -- SOURCE ...     the sources' indices, longest first, as a CMake list; with --build-dir,
                          the compile times of its .ninja_log are merged into FILE first
  record --costs FILE --build-dir DIR
                          the compile times of .ninja_log, merged into FILE

A build records its times after its link (a POST_BUILD step). A build that stopped before it
(a timeout, a failed source, Ctrl-C) leaves the times of what it finished in .ninja_log, and
the next configure of that folder records them: a flash-attn2 build stopped after 49 of its 77
steps still tells the next runner (through the cache's folder) what those 49 cost.

The costs file lives beside the compiler cache (build2cmake_torch.cmake), so a fresh runner that
restores its cache knows them too. Its lines are "<seconds>\\t<object key>", where the key is
the object's path under CMakeFiles/<target>.dir/ without ".o": the source's path relative to the
project (or to the build folder, for generated sources), the same in every checkout. The file is
read bounded, and a line that is not a number and a plain relative path is skipped, never used.

Standard library only; run with the build's Python from a neutral working folder (the build's
rule for every script it runs). It never fails a build: a problem is one line, and the order
falls back to the cold estimate.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import tempfile

HEADER = "# build2cmake compile costs, v1: <seconds>\t<object key>\n"
# Bounds on what is read: the costs file and the tail of .ninja_log that holds a build's steps.
COSTS_LIMIT = 1 << 20
LOG_LIMIT = 8 << 20
ENTRIES_LIMIT = 20000
SCAN_LIMIT = 4000  # headers followed per order call, for the cold estimate
KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+/=-]{0,500}")
OBJECT = re.compile(r"CMakeFiles/[^/]+\.dir/(.+)\.(?:o|obj)")
INCLUDE = re.compile(rb'^\s*#\s*include\s*"([^"\n]+)"', re.M)
# A compile a cache answered takes a fraction of a second: a recorded cost more than this many
# times what the log says is kept (the log measured the cache, not the compiler).
CACHE_HIT_RATIO = 10.0


def plain_key(key: str) -> bool:
    return bool(KEY.fullmatch(key)) and ".." not in key.split("/") and "//" not in key


def cores() -> int:
    """CPUs this process may run on, within the cgroup (v2 cpu.max, v1 cfs quota) it is in."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    quota = _cgroup_quota()
    return max(1, min(count, quota)) if quota else max(1, count)


def _cgroup_quota() -> int | None:
    candidates = []
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as file:
            for line in file.read(1 << 16).splitlines():
                if line.startswith("0::"):
                    candidates.append("/sys/fs/cgroup" + line[3:].rstrip("/") + "/cpu.max")
    except OSError:
        pass
    candidates.append("/sys/fs/cgroup/cpu.max")
    for path in candidates:
        try:
            with open(path, encoding="utf-8") as file:
                quota, period = file.read(256).split()[:2]
        except (OSError, ValueError):
            continue
        if quota != "max" and int(period) > 0:
            return math.ceil(int(quota) / int(period))
        return None
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", encoding="utf-8") as file:
            quota_us = int(file.read(64))
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us", encoding="utf-8") as file:
            period_us = int(file.read(64))
    except (OSError, ValueError):
        return None
    return math.ceil(quota_us / period_us) if quota_us > 0 and period_us > 0 else None


def read_costs(path: str) -> dict[str, float]:
    costs: dict[str, float] = {}
    try:
        with open(path, "rb") as file:
            raw = file.read(COSTS_LIMIT + 1)
    except OSError:
        return costs
    if len(raw) > COSTS_LIMIT:
        return costs  # not a file this script wrote
    for line in raw.decode("utf-8", "replace").splitlines():
        seconds, _, key = line.partition("\t")
        try:
            value = float(seconds)
        except ValueError:
            continue
        if plain_key(key) and math.isfinite(value) and 0 <= value < 1e6:
            costs[key] = value
    return costs


def write_costs(path: str, costs: dict[str, float]) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    kept = sorted(costs.items(), key=lambda item: -item[1])[:ENTRIES_LIMIT]
    text = HEADER + "".join(
        f"{value:.3f}\t{key}\n" for key, value in sorted(kept, key=lambda i: i[0])
    )
    descriptor, temporary = tempfile.mkstemp(prefix=".costs-", dir=folder)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def log_times(build_dir: str) -> dict[str, float]:
    """Seconds per object key of the newest run of each step in the build's .ninja_log."""
    path = os.path.join(build_dir, ".ninja_log")
    try:
        with open(path, "rb") as file:
            file.seek(0, os.SEEK_END)
            size = file.tell()
            file.seek(max(0, size - LOG_LIMIT))
            raw = file.read(LOG_LIMIT)
    except OSError:
        return {}
    times: dict[str, float] = {}
    for line in raw.decode("utf-8", "replace").splitlines():
        fields = line.split("\t")
        if len(fields) != 5:
            continue
        match = OBJECT.fullmatch(fields[3])
        try:
            start, end = int(fields[0]), int(fields[1])
        except ValueError:
            continue
        if match and plain_key(match[1]) and 0 <= start <= end:
            times[match[1]] = (end - start) / 1000.0
    return times


def record(costs_path: str, build_dir: str) -> None:
    costs = read_costs(costs_path)
    changed = False
    for key, seconds in log_times(build_dir).items():
        known = costs.get(key)
        if known is not None and seconds * CACHE_HIT_RATIO < known:
            continue  # a cache hit
        if known != seconds:
            costs[key] = seconds
            changed = True
    if changed:
        write_costs(costs_path, costs)


def object_key(source: str, source_dir: str, binary_dir: str) -> str | None:
    """CMake's name for a source's object under CMakeFiles/<target>.dir/, without ".o": its path
    relative to the build folder when it lies there (generated sources), else to the project."""
    path = os.path.normpath(os.path.join(source_dir, source))
    for base in (binary_dir, source_dir):
        relative = os.path.relpath(path, base)
        if not relative.startswith(".."):
            key = relative.replace(os.sep, "/")
            return key if plain_key(key) else None
    return None


def shown(text: str) -> str:
    """`text` for one line of a terminal: what is not printable, escaped."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


class ColdEstimate:
    """Bytes a source makes the compiler read from the project: the source and every header it
    includes with quotes that resolves inside the project, each counted once."""

    def __init__(self, roots: list[str], includes: list[str]) -> None:
        self.roots = [os.path.realpath(root) for root in roots]
        self.includes = includes
        self.sizes: dict[str, tuple[int, list[bytes]]] = {}
        self.scanned = 0

    def inside(self, path: str) -> bool:
        return any(path == root or path.startswith(root + os.sep) for root in self.roots)

    def read(self, path: str) -> tuple[int, list[bytes]]:
        if path not in self.sizes:
            self.scanned += 1
            try:
                with open(path, "rb") as file:
                    raw = file.read(4 << 20)
                self.sizes[path] = (len(raw), INCLUDE.findall(raw))
            except OSError:
                self.sizes[path] = (0, [])
        return self.sizes[path]

    def __call__(self, source: str) -> float:
        seen: set[str] = set()
        pending = [os.path.realpath(source)]
        total = 0
        while pending and self.scanned < SCAN_LIMIT:
            path = pending.pop()
            if path in seen or not self.inside(path):
                continue
            seen.add(path)
            size, names = self.read(path)
            total += size
            for name in names:
                text = name.decode("utf-8", "replace")
                for folder in (os.path.dirname(path), *self.includes):
                    candidate = os.path.realpath(os.path.join(folder, text))
                    if os.path.isfile(candidate):
                        pending.append(candidate)
                        break
        return float(total)


def order(
    costs_path: str,
    source_dir: str,
    binary_dir: str,
    includes: list[str],
    sources: list[str],
    build_dir: str = "",
) -> tuple[list[int], str]:
    if costs_path and build_dir:
        # What an earlier build in this folder finished, stopped or not; left unrecorded if the
        # folder cannot be written, and the order still follows what is recorded.
        with contextlib.suppress(OSError):
            record(costs_path, build_dir)
    costs = read_costs(costs_path) if costs_path else {}
    keys = [object_key(source, source_dir, binary_dir) for source in sources]
    known = [costs.get(key) if key else None for key in keys]
    estimate = ColdEstimate([source_dir, binary_dir], includes)
    cold = [estimate(os.path.join(source_dir, source)) for source in sources]
    recorded = [(k, c) for k, c in zip(known, cold) if k is not None]  # noqa: B905 (Python 3.9 runs it)
    if recorded:
        # A source without a record of its own (new since) is estimated on the recorded ones'
        # scale: its cold estimate times their median seconds per estimated byte.
        ratios = sorted(k / c for k, c in recorded if c > 0) or [0.0]
        scale = ratios[len(ratios) // 2]
        weights = [k if k is not None else c * scale for k, c in zip(known, cold)]  # noqa: B905 (Python 3.9 runs it)
        how = f"by recorded seconds ({len(recorded)} of {len(sources)} recorded)"
    else:
        weights = cold
        how = (
            f"by size (no recorded costs yet in {shown(costs_path)})"
            if costs_path
            else "by size (compile costs not kept: BUILD2CMAKE_COSTS_DIR=OFF, or no home folder)"
        )
    ranked = sorted(range(len(sources)), key=lambda i: (-weights[i], i))
    return ranked, how


def main(argv: list[str]) -> int:
    command, *rest = argv or [""]
    options: dict[str, list[str]] = {}
    positional: list[str] = []
    while rest:
        item = rest.pop(0)
        if item == "--":
            positional.extend(rest)
            break
        if item.startswith("--") and rest:
            options.setdefault(item[2:], []).append(rest.pop(0))
        else:
            positional.append(item)
    first = {name: values[0] for name, values in options.items()}
    try:
        if command == "cores":
            print(cores(), end="")
        elif command == "order":
            ranked, how = order(
                first.get("costs", ""),
                first["source-dir"],
                first["binary-dir"],
                options.get("include", []),
                positional,
                first.get("build-dir", ""),
            )
            print(",".join(map(str, ranked)) + "\n" + how, end="")
        elif command == "record":
            record(first["costs"], first["build-dir"])
        else:
            print(f"build2cmake_schedule.py: unknown command {command!r}", file=sys.stderr)
            return 2
    except (OSError, KeyError, ValueError) as error:
        # Never a failed build over a schedule: the order falls back to the listed one.
        print(f"build2cmake: compile costs not used: {error}", file=sys.stderr)
        return 0 if command == "record" else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
