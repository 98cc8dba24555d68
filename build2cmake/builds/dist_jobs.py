"""Distributed compiles through sccache-dist: how many jobs a build runs when sccache hands its
compiles to a cluster (a scheduler and build servers) rather than to this machine's cores.

sccache's client config names the scheduler (`[dist] scheduler_url`, in the file `SCCACHE_CONF`
names, else `$XDG_CONFIG_HOME/sccache/config` or `~/.config/sccache/config`; sccache 0.16 has no
environment variable for it). When it does, the compiler cache is sccache (unless the user chose
a launcher) and `sccache --dist-status` says how many slots (build servers' cores) the cluster
has: that is the default `--jobs`, and the Ninja pools, which size local compiles from local
memory, are raised to the job count, since the compiles run on the build servers (only the
preprocessing runs here; sccache runs a compile the cluster does not take locally, within its own
limit of one per local core). Any failure falls back to the local default, with one line saying
why. A rocm build uses the cluster only when sccache is chosen explicitly: its HIP compiles need a
toolchain archive that holds the ROCm device libraries (docs/building.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomlkit reads it (the user's own file, bounded in size)
    tomllib = None

LAUNCHER_DEFINE = "BUILD2CMAKE_COMPILER_LAUNCHER"
# The Ninja pools each backend's templates declare (build2cmake_torch.cmake and the backends').
POOL_DEFINES = {
    "cpu": ("BUILD2CMAKE_COMPILE_JOBS",),
    "cuda": ("BUILD2CMAKE_COMPILE_JOBS", "BUILD2CMAKE_CUDA_JOBS"),
    "rocm": ("BUILD2CMAKE_COMPILE_JOBS", "BUILD2CMAKE_HIP_JOBS"),
}
# The user's own file, but read before every build: bounded all the same.
CONFIG_LIMIT_BYTES = 1 << 20
# `--dist-status` prints one JSON line; more than this is not its answer.
STATUS_LIMIT_BYTES = 64 << 10
# It starts sccache's server if none runs (which asks the scheduler once): seconds, not minutes.
STATUS_TIMEOUT_S = 30.0
# More slots than this is a misread status, not a cluster (and would make Ninja's pools absurd).
SLOTS_LIMIT = 100_000
# The most a pool may hold (the CUDA template refuses more).
POOL_LIMIT = 9999
# A reason quoted from sccache's answer is cut to this many characters.
REASON_LIMIT = 200


@dataclass(frozen=True)
class Cluster:
    """What sccache's scheduler reports: build servers and their slots (cores) in all."""

    scheduler: str  # scheme://host:port, never the URL's credentials or path
    servers: int
    slots: int


@dataclass(frozen=True)
class DistPlan:
    """How a build compiles through the cluster: its job count and the -D values that go with it
    (the launcher, where the user chose none, and the Ninja pools the user did not size)."""

    jobs: int | None  # None: the cluster did not answer; the local default stands
    defines: tuple[str, ...]
    note: str  # the one line the build prints (through errors.printable: it quotes sccache)


class DistStatusError(Exception):
    """`sccache --dist-status` gave no usable cluster; the message says why."""


def client_config_path(env: Mapping[str, str]) -> Path | None:
    """The client config file sccache reads, as sccache finds it on Linux."""
    if env.get("SCCACHE_CONF"):
        return Path(env["SCCACHE_CONF"])
    base = env.get("XDG_CONFIG_HOME") or (
        str(Path(env["HOME"]) / ".config") if env.get("HOME") else ""
    )
    return Path(base) / "sccache" / "config" if base else None


def configured_scheduler(env: Mapping[str, str]) -> str | None:
    """The scheduler URL sccache's client config names, shown without credentials; None when
    there is no config or it names none. A config that cannot be read is a DistStatusError."""
    path = client_config_path(env)
    if path is None:
        return None
    try:
        with open(path, "rb") as file:
            raw = file.read(CONFIG_LIMIT_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise DistStatusError(f"cannot read sccache's config {path}: {error.strerror}") from None
    if len(raw) > CONFIG_LIMIT_BYTES:
        raise DistStatusError(f"sccache's config {path} is over {CONFIG_LIMIT_BYTES} bytes")
    try:
        data = _parse_toml(raw.decode("utf-8"))
    except (ValueError, RecursionError, tomlkit.exceptions.TOMLKitError) as error:
        # tomllib's TOMLDecodeError and UnicodeDecodeError are ValueErrors.
        raise DistStatusError(f"sccache's config {path} is not valid TOML: {error}") from None
    dist = data.get("dist")
    url = dist.get("scheduler_url") if isinstance(dist, dict) else None
    if not isinstance(url, str) or not url.strip():
        return None
    return shown_url(url)


def _parse_toml(text: str) -> dict[str, Any]:
    if tomllib is None:
        return dict(tomlkit.parse(text).unwrap())
    return tomllib.loads(text)


def shown_url(url: str) -> str:
    """scheme://host:port of a URL: a userinfo part or query could carry a credential."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(an unparsable URL)"
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def parse_dist_status(stdout: str) -> Cluster:
    """The cluster in `sccache --dist-status`'s JSON line (sccache's `DistInfo`):
    `{"SchedulerStatus": [url, {"num_servers": S, "num_cpus": C, "in_progress": P}]}`, or
    `{"Disabled": why}`, `{"NotConnected": [url, why]}`. Anything else is a DistStatusError."""
    if len(stdout) > STATUS_LIMIT_BYTES:
        raise DistStatusError(f"sccache --dist-status printed over {STATUS_LIMIT_BYTES} bytes")
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if len(lines) != 1:
        raise DistStatusError("sccache --dist-status printed no status line")
    try:
        status = json.loads(lines[0])
    except (ValueError, RecursionError):
        raise DistStatusError("sccache --dist-status printed no valid JSON") from None
    if not isinstance(status, dict) or len(status) != 1:
        raise DistStatusError("sccache --dist-status printed an unknown status")
    ((kind, value),) = status.items()
    if kind == "Disabled":
        raise DistStatusError(
            f"sccache's server has distributed compiles off ({_reason(value)}); a server started "
            "before its config named the scheduler keeps them off: sccache --stop-server"
        )
    if kind == "NotConnected" and isinstance(value, list) and len(value) == 2:
        raise DistStatusError(f"sccache is not connected to the scheduler ({_reason(value[1])})")
    if kind != "SchedulerStatus" or not isinstance(value, list) or len(value) != 2:
        raise DistStatusError("sccache --dist-status printed an unknown status")
    url, counts = value
    if not isinstance(counts, dict):
        raise DistStatusError("sccache --dist-status printed an unknown status")
    servers, slots = counts.get("num_servers"), counts.get("num_cpus")
    for name, number in (("num_servers", servers), ("num_cpus", slots)):
        # bool is an int to Python; JSON's true is no count.
        if type(number) is not int or not 0 <= number <= SLOTS_LIMIT:
            raise DistStatusError(
                f"sccache --dist-status: {name} is not a count of 0 to {SLOTS_LIMIT}"
            )
    assert isinstance(servers, int) and isinstance(slots, int)
    scheduler = shown_url(url) if isinstance(url, str) else "(no URL)"
    if servers == 0 or slots == 0:
        raise DistStatusError(f"the scheduler at {scheduler} has no build server connected")
    return Cluster(scheduler, servers, slots)


def _reason(value: object) -> str:
    text = value if isinstance(value, str) else "no reason given"
    return text[:REASON_LIMIT]


def query_cluster(sccache: str, env: Mapping[str, str]) -> Cluster:
    """Ask sccache (its server, started if none runs) for the cluster's status."""
    # Like the templates' --start-server: a server started here must not keep a TMPDIR that may
    # be a build folder's for its own temporary files.
    child_env = {k: v for k, v in env.items() if k != "TMPDIR"}
    try:
        result = subprocess.run(
            [sccache, "--dist-status"],
            env=child_env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=STATUS_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DistStatusError(
            f"sccache --dist-status did not answer in {STATUS_TIMEOUT_S:.0f} s"
        ) from None
    except OSError as error:
        raise DistStatusError(f"cannot run {sccache}: {error.strerror}") from None
    stdout = result.stdout[: STATUS_LIMIT_BYTES + 1].decode("utf-8", "replace")
    if result.returncode != 0:
        last = result.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        raise DistStatusError(
            f"sccache --dist-status failed (exit {result.returncode}): {_reason(last[0])}"
        )
    return parse_dist_status(stdout)


def _defined(defines: Sequence[str], name: str) -> str | None:
    """The value the last `NAME=...` or `NAME:TYPE=...` of `defines` gives `name`."""
    value = None
    for define in defines:
        key, _, rest = define.partition("=")
        if key.partition(":")[0] == name:
            value = rest
    return value


def plan(
    defines: Sequence[str],
    backend: str,
    jobs: int | None,
    env: Mapping[str, str] | None = None,
) -> DistPlan | None:
    """How this build uses the sccache-dist cluster its sccache config names; None when it
    names none or the build compiles through another launcher (nothing to say then)."""
    env = os.environ if env is None else env
    chosen = _defined(defines, LAUNCHER_DEFINE)
    if chosen is not None and Path(chosen).name.lower() != "sccache":
        return None  # another launcher, or none: nothing is distributed
    if chosen is None and any(
        _defined(defines, f"CMAKE_{lang}_COMPILER_LAUNCHER") is not None
        or env.get(f"CMAKE_{lang}_COMPILER_LAUNCHER")
        for lang in ("CXX", "CUDA", "HIP")
    ):
        return None  # the user's own launcher wins in the templates
    local = "jobs and pools from this machine's cores and memory"
    try:
        scheduler = configured_scheduler(env)
    except DistStatusError as error:
        return DistPlan(None, (), f"build2cmake: {local}: {error}")
    if scheduler is None:
        return None
    if chosen is None and backend == "rocm":
        # sccache ships the compiler and its libraries to the build server, not the ROCm device
        # libraries clang links into every HIP object: out of the box each HIP compile fails
        # there ("cannot find ROCm device library"), and sccache does not retry it here.
        return DistPlan(
            None,
            (),
            f"build2cmake: {local}: the sccache-dist scheduler {scheduler} is not used for a "
            "rocm build unless chosen (-D BUILD2CMAKE_COMPILER_LAUNCHER=sccache), with a HIP "
            "toolchain archive in sccache's config that holds the ROCm device libraries",
        )
    # A scheduler is named: the compiles go through sccache (its choice, like a remote storage
    # in the templates), whether the cluster answers now or not: sccache compiles locally what
    # the cluster does not take, and the launcher does not change with the network.
    launcher = chosen or "sccache"
    extra = () if chosen is not None else (f"{LAUNCHER_DEFINE}=sccache",)
    program = shutil.which(launcher, path=env.get("PATH"))
    if program is None:
        return DistPlan(
            None,
            (),
            f"build2cmake: {local}: sccache's config names the scheduler "
            f"{scheduler}, but no {launcher} program is on PATH",
        )
    try:
        cluster = query_cluster(program, env)
    except DistStatusError as error:
        return DistPlan(None, extra, f"build2cmake: {local}: {error}")
    count = jobs or cluster.slots
    pools = tuple(
        f"{name}={min(count, POOL_LIMIT)}"
        for name in POOL_DEFINES.get(backend, POOL_DEFINES["cpu"])
        if _defined(defines, name) is None
    )
    note = (
        f"build2cmake: distributed compiles: the sccache-dist scheduler {cluster.scheduler} has "
        f"{cluster.slots} slots on {cluster.servers} build server(s): {count} compile jobs"
        + (f" ({', '.join(pools)})" if pools else "")
    )
    return DistPlan(count, (*extra, *pools), note)


def cluster_slots(
    defines: Sequence[str], backends: Iterable[str], env: Mapping[str, str] | None = None
) -> int | None:
    """The cluster's slots when builds of `backends` with `defines` all compile through
    sccache-dist (see `plan`), else None: the default total of jobs that concurrent variant
    builds share. A rocm build compiles here unless sccache is chosen, so with rocm among the
    backends the rocm rule decides (the cluster's slots would over-run this machine)."""
    found = plan(defines, "rocm" if "rocm" in set(backends) else "cpu", None, env)
    return found.jobs if found is not None else None
