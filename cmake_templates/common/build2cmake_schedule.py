"""The order a build compiles its kernels' sources in, and the costs that order comes from.

Ninja starts ready steps of equal depth in the order build.ninja lists them, which is the order
of each target's sources. A big kernel's build is bound by its longest translation units when
they start last (kernels-community's layer-norm: its three longest units started after the
others and ran alone while 13 of 16 cores idled), so each kernel's sources are listed longest
first: by the seconds each took in an earlier build, else by a cold estimate (the bytes of the
source and of the project headers it includes, which is what the compiler reads and instantiates).

  cores                   the CPUs this process may use: its affinity, within its cgroup's quota
  order --costs FILE --source-dir DIR --binary-dir DIR [--build-dir DIR] [--include DIR ...]
        [--carried FILE --backend NAME]
        -- SOURCE ...     the sources' indices, longest first, as a CMake list; with --build-dir,
                          the compile times of its .ninja_log are merged into FILE first; with
                          --carried, the project's record of NAME's compiles orders what this
                          machine has no seconds for
  record --costs FILE --build-dir DIR
                          the compile times of .ninja_log, merged into FILE

A build records its times after its link (a POST_BUILD step). A build that stopped before it
(a timeout, a failed source, Ctrl-C) leaves the times of what it finished in .ninja_log, and
the next configure of that folder records them: a flash-attn2 build stopped after 49 of its 77
steps still tells the next runner (through the cache's folder) what those 49 cost.

The costs file lives beside the compiler cache (build2cmake_torch.cmake), so a fresh runner that
restores its cache knows them too. Its lines are "<seconds>\t<object key>", where the key is the
object's path under CMakeFiles/<target>.dir/ without ".o": the source's path relative to the
project (or to the build folder, for generated sources), the same in every checkout. The file is
read bounded, and a line that is not a number and a plain relative path is skipped, never used.

A machine that never built the kernel has no such file. For it, the project may carry its
author's record, build2cmake-costs.tsv beside build.toml (`build2cmake costs` writes it), of
lines "<seconds>\t<backend>\t<object key>". Another machine's seconds are put on this one's
scale and decide the order only. The file is the project's, so it is read as untrusted: a
regular file (not a link), bounded, each line checked; a stale key, a line it does not know or a
broken file changes the order at most, never the build.

Standard library only; run with the build's Python from a neutral working folder (the build's
rule for every script it runs). It never fails a build: a problem is one line, and the order
falls back to the cold estimate.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import re
import stat
import sys
import tempfile

HEADER = "# build2cmake compile costs, v1: <seconds>\t<object key>\n"
CARRIED_NAME = "build2cmake-costs.tsv"
BACKEND = re.compile(r"[a-z][a-z0-9]{0,15}")
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


def read_bounded(path: str, limit: int, *, follow: bool = True) -> bytes:
    """A regular file's bytes, if it holds at most `limit`: never a FIFO or a device, which could
    block or never end, and with follow=False (the carried record, the project's) not a link."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    descriptor = os.open(path, flags)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise OSError("not a regular file")
    with os.fdopen(descriptor, "rb") as file:
        raw = file.read(limit + 1)
    if len(raw) > limit:
        raise OSError(f"larger than {limit} bytes")
    return raw


def seconds_of(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and 0 <= value < 1e6 else None


def read_costs(path: str) -> dict[str, float]:
    costs: dict[str, float] = {}
    try:
        raw = read_bounded(path, COSTS_LIMIT)
    except OSError:
        return costs  # none yet, or not a file this script wrote
    for line in raw.decode("utf-8", "replace").splitlines():
        seconds, _, key = line.partition("\t")
        value = seconds_of(seconds)
        if value is not None and plain_key(key):
            costs[key] = value
    return costs


def read_carried(path: str) -> dict[str, dict[str, float]]:
    """The project's record, backend -> object key -> seconds; a line that is not three checked
    fields is skipped. Raises OSError for a file not to be read."""
    return parse_carried(read_bounded(path, COSTS_LIMIT, follow=False))


def parse_carried(raw: bytes) -> dict[str, dict[str, float]]:
    record: dict[str, dict[str, float]] = {}
    for line in raw.decode("utf-8", "replace").splitlines():
        fields = line.split("\t")
        if len(fields) != 3 or not BACKEND.fullmatch(fields[1]):
            continue
        value = seconds_of(fields[0])
        if value is None or not plain_key(fields[2]):
            continue
        costs = record.setdefault(fields[1], {})
        if len(costs) < ENTRIES_LIMIT:
            costs[fields[2]] = value
    return record


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


def median(values: list[float]) -> float | None:
    values = sorted(values)
    return values[len(values) // 2] if values else None


def scale_onto(
    reference: list[float | None], other: list[float | None], cold: list[float]
) -> float:
    """The factor that puts `other`'s figures on `reference`'s scale: the median ratio over the
    sources both know, else the ratio of their seconds per estimated byte (1 with neither)."""
    pairs = list(zip(reference, other, cold))  # noqa: B905 (Python 3.9 runs it)
    both = median([r / o for r, o, _ in pairs if r is not None and o])
    if both is not None and usable(both):
        return both
    ours = median([r / c for r, _, c in pairs if r is not None and c > 0])
    theirs = median([o / c for _, o, c in pairs if o is not None and c > 0])
    through_bytes = ours / theirs if ours and theirs else 1.0
    return through_bytes if usable(through_bytes) else 1.0


def usable(factor: float) -> bool:
    """A scale that keeps every weight a number (an edited record's 1e-300 s would make it
    infinite, and 0 s times infinity is no number to sort by)."""
    return math.isfinite(factor) and factor > 0


def order(
    costs_path: str,
    source_dir: str,
    binary_dir: str,
    includes: list[str],
    sources: list[str],
    build_dir: str = "",
    carried_path: str = "",
    backend: str = "",
) -> tuple[list[int], str, list[float]]:
    """The sources' indices, longest first; how they were weighed, in one line; and each
    source's weight: seconds on this machine's scale, or estimated bytes when nothing is
    recorded."""
    if not sources:
        return [], "nothing to order", []
    if costs_path and build_dir:
        # What an earlier build in this folder finished, stopped or not; left unrecorded if the
        # folder cannot be written, and the order still follows what is recorded.
        with contextlib.suppress(OSError):
            record(costs_path, build_dir)
    costs = read_costs(costs_path) if costs_path else {}
    carried: dict[str, float] = {}
    unused = ""
    if carried_path and BACKEND.fullmatch(backend):
        try:
            carried = read_carried(carried_path).get(backend, {})
        except FileNotFoundError:
            pass
        except OSError as error:
            reason = "a symbolic link" if error.errno == errno.ELOOP else error.strerror or error
            unused = f"; {CARRIED_NAME} not used: {shown(str(reason))}"
    keys = [object_key(source, source_dir, binary_dir) for source in sources]
    estimate = ColdEstimate([source_dir, binary_dir], includes)
    cold = [estimate(os.path.join(source_dir, source)) for source in sources]
    # Three sources of a figure, the first that knows a source decides: this machine's record,
    # the project's carried one, the cold estimate. Each is put on the scale of the first that
    # knows any source, so that a source new since (or absent from a record) falls in place.
    tiers: list[list[float | None]] = [
        [costs.get(key) if key else None for key in keys],
        [carried.get(key) if key else None for key in keys],
        list(cold),
    ]
    known = [sum(value is not None for value in tier) for tier in tiers]
    reference = next(tier for tier, count in zip(tiers, known) if count)  # noqa: B905 (Python 3.9 runs it)
    scaled = [(tier, scale_onto(reference, tier, cold)) for tier in tiers]
    weights = [
        next(value * scale for tier, scale in scaled if (value := tier[i]) is not None)
        for i in range(len(sources))
    ]
    here = known[0]
    # The record's seconds decide only where this machine has none.
    kept = sum(own is None and theirs is not None for own, theirs in zip(*tiers[:2]))  # noqa: B905 (Python 3.9 runs it)
    if here and kept:
        how = (
            f"by recorded seconds ({here} of {len(sources)} recorded, {kept} in the project's "
            f"{CARRIED_NAME})"
        )
    elif here:
        how = f"by recorded seconds ({here} of {len(sources)} recorded)"
    elif kept:
        how = f"by the project's {CARRIED_NAME} ({kept} of {len(sources)} recorded there)"
    elif costs_path:
        how = f"by size (no recorded costs yet in {shown(costs_path)})"
    else:
        how = "by size (compile costs not kept: BUILD2CMAKE_COSTS_DIR=OFF, or no home folder)"
    ranked = sorted(range(len(sources)), key=lambda i: (-weights[i], i))
    return ranked, how + unused, weights


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
            ranked, how, weights = order(
                first.get("costs", ""),
                first["source-dir"],
                first["binary-dir"],
                options.get("include", []),
                positional,
                first.get("build-dir", ""),
                first.get("carried", ""),
                first.get("backend", ""),
            )
            # The weights in thousandths, as whole numbers (CMake sorts them as such), in the
            # order of the indices: the build ranks every kernel's sources by them together.
            thousandths = [str(min(10**15, max(0, round(weights[i] * 1000)))) for i in ranked]
            print(",".join(map(str, ranked)) + "\n" + how + "\n" + ",".join(thousandths), end="")
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
