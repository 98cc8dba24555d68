"""SIGINT, SIGTERM and SIGHUP to build2cmake during a real build end its whole process tree.

The compiler launcher is a script that records its pid and sleeps: Ninja runs it in a process
group of its own, the case in which a plain kill of build2cmake used to leave it running."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security import Scene

LAUNCHER = """#!/bin/sh
echo $$ >> {pids}
exec sleep 600
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return state[state.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def _processes_in(folder: Path) -> list[str]:
    """Command lines of running processes that name `folder` (our build's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(folder) in line and _running(int(entry.name)):
                found.append(line)
    return found


def _dispositions(ignore: signal.Signals | None) -> None:
    """In the child: the signals build2cmake handles start at their defaults, whatever the test
    run inherited (under `nohup`, SIGHUP arrives ignored; in a shell's background job, SIGINT),
    then `ignore` is ignored."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    if ignore is not None:
        signal.signal(ignore, signal.SIG_IGN)


@contextlib.contextmanager
def compiling(
    scene: Scene, tmp_path: Path, ignore: signal.Signals | None = None
) -> Iterator[tuple[subprocess.Popen[str], list[int]]]:
    """`build2cmake build` of the scene's project, once its first compile (the sleeping
    launcher) runs: the process and the compiles' pids. Killed however the test ends. With
    `ignore`, that signal is ignored in it from the start (as nohup does for SIGHUP)."""
    pids = tmp_path / "compiles.pid"
    launcher = tmp_path / "slow-compile"
    launcher.write_text(LAUNCHER.format(pids=pids))
    launcher.chmod(0o755)
    build = subprocess.Popen(
        [sys.executable, "-m", "build2cmake", "build", str(scene.build_toml), "--backend", "cpu",
         "-D", f"CMAKE_CXX_COMPILER_LAUNCHER={launcher}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: _dispositions(ignore),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not (pids.is_file() and pids.read_text().strip()):
            assert build.poll() is None, build.communicate()
            assert time.monotonic() < deadline, "no compile started"
            time.sleep(0.1)
        yield build, [int(line) for line in pids.read_text().split()]
    finally:
        if build.poll() is None:
            build.kill()
            build.communicate()


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)]
)
def test_a_signal_during_a_compile_stops_every_process_then_releases_the_lock(
    scene: Scene, tmp_path: Path, signum: int, code: int
) -> None:
    with compiling(scene, tmp_path) as (build, compiles):
        assert all(_running(pid) for pid in compiles)
        build.send_signal(signum)
        out, err = build.communicate(timeout=60)
    assert build.returncode == code, (out, err)
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith(
        f"build2cmake: interrupted by {signal.Signals(signum).name}; stopped "
    ), err
    assert not any(_running(pid) for pid in compiles)
    assert _processes_in(scene.project) == []
    # The lock is free and the project usable: clean runs at once and removes the build folder.
    cleaned = subprocess.run(
        [sys.executable, "-m", "build2cmake", "clean", str(scene.build_toml)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert cleaned.returncode == 0, cleaned.stderr
    assert not (scene.project / "build" / "cmake-variant-cpu").exists()


def test_a_signal_ignored_at_start_stays_ignored(scene: Scene, tmp_path: Path) -> None:
    """`nohup build2cmake build ...`: SIGHUP was ignored when build2cmake started, so a hangup
    does not stop the build; SIGTERM still does."""
    with compiling(scene, tmp_path, ignore=signal.SIGHUP) as (build, compiles):
        build.send_signal(signal.SIGHUP)
        time.sleep(2)
        assert build.poll() is None, build.communicate()
        assert all(_running(pid) for pid in compiles)
        build.send_signal(signal.SIGTERM)
        _, err = build.communicate(timeout=60)
    assert build.returncode == 143, err


# A child of a fresh interpreter that stops its tree with a short grace: a compile that ignores
# SIGTERM (as a compiler's driver in the middle of writing may), and a daemon that made a session
# of its own (the shared sccache server). Prints the pids, the count stop_tree returned, and
# whether each is still running after the stop.
STOPPER = """
import os, subprocess, sys, time
from build2cmake.ground import interrupts
interrupts.install()  # the command line's: the subreaper of its tree
# A launcher that leaves its compile running in the background and exits: the orphan is
# reparented to the subreaper, so it is still found and stopped.
orphan = int(subprocess.run(["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"],
                            capture_output=True, text=True).stdout)
stubborn = subprocess.Popen(["sh", "-c", "trap '' TERM; exec sleep 600"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
daemon = subprocess.Popen(["sleep", "600"], start_new_session=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.5)
started = time.monotonic()
stopped = interrupts.stop_tree(grace=1.0)
took = time.monotonic() - started
def running(pid):
    try:
        state = open(f"/proc/{pid}/stat", "rb").read()
    except OSError:
        return False
    return state[state.rfind(b")") + 2:].split()[0] not in (b"Z", b"X")
print(stubborn.pid, daemon.pid, orphan, stopped, running(stubborn.pid), running(daemon.pid),
      running(orphan), took)
"""


def test_a_compile_that_ignores_sigterm_is_killed_and_a_daemons_own_session_is_left() -> None:
    """SIGTERM, then SIGKILL for what still runs after the grace; an orphan of the tree is still
    stopped (build2cmake is its subreaper); a descendant that started a session of its own (the
    sccache server, shared between builds) is no part of the tree."""
    result = subprocess.run(
        [sys.executable, "-c", STOPPER], capture_output=True, text=True, timeout=60, check=False,
        preexec_fn=lambda: _dispositions(None),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    stubborn, daemon, orphan, stopped, *running, took = result.stdout.split()
    try:
        assert (stopped, *running) == ("2", "False", "True", "False"), result.stdout
        assert float(took) >= 1.0  # SIGTERM was not enough: it took the grace and SIGKILL
    finally:
        for pid in (stubborn, daemon, orphan):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
