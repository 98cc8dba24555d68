"""SIGINT, SIGTERM and SIGHUP to build2cmake end everything it started, then build2cmake itself.

A build's processes outlive a parent that is simply killed: Ninja puts each compile in a process
group of its own, so neither a terminal's Ctrl-C nor a signal to build2cmake's process group
reaches the compilers, and a compile whose Ninja died is reparented to init. A CI runner that
cancels a job, `timeout`, or a supervisor would end build2cmake and leave cmake, ccache and the
compilers writing into the project after its lock was released, racing the next `clean` or
`build`. So the command line makes build2cmake a child subreaper (orphans of its tree are
reparented to it, not to init, and stay findable), and on one of those signals it stops its
whole tree (SIGTERM, then SIGKILL after a grace period) before the exception unwinds and the
locks are released. Processes that made a session of their own (daemons: the sccache server
is shared between builds) are left running.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from pathlib import Path
from types import FrameType

# prctl(2)'s PR_SET_CHILD_SUBREAPER (Linux 3.4+).
_PR_SET_CHILD_SUBREAPER = 36
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# How long the tree gets to end after SIGTERM before SIGKILL (compilers end at once; CMake and
# Ninja pass the signal on).
GRACE_SECONDS = 5.0


class Interrupted(BaseException):
    """build2cmake got SIGINT, SIGTERM or SIGHUP and has stopped every process it started.

    A BaseException, as KeyboardInterrupt is: no `except Exception` on the way may swallow it.
    """

    def __init__(self, signum: int, stopped: int) -> None:
        self.signum = signum
        self.stopped = stopped
        super().__init__(signal.Signals(signum).name)

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as a shell reports a process the signal ended."""
        return 128 + self.signum

    def message(self) -> str:
        """The one line the command line prints."""
        name = signal.Signals(self.signum).name
        stopped = f"; stopped {self.stopped} process(es) it had started" if self.stopped else ""
        return f"build2cmake: interrupted by {name}{stopped}"


def install() -> None:
    """Make this process the subreaper of its tree and stop the tree on SIGINT, SIGTERM and
    SIGHUP (raising Interrupted), each unless it was ignored at start. For the command line
    only: a library caller keeps its own signal handling."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    for signum in SIGNALS:
        # A signal ignored when build2cmake started stays ignored: `nohup`, or a background job
        # of a non-interactive shell (SIGINT), asked for the build to outlive it.
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _on_signal)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    # A second Ctrl-C while the tree is being stopped waits for that stop instead of cutting it.
    for other in SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    raise Interrupted(signum, stop_tree())


def stop_tree(grace: float = GRACE_SECONDS) -> int:
    """Stop every live descendant of this process in its session: SIGTERM, then SIGKILL for
    those still running after `grace` seconds. Returns how many were signalled."""
    signalled: set[int] = set()
    for signum, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        targets = _live_descendants()
        for pid in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
        signalled.update(targets)
        deadline = time.monotonic() + wait
        while _live_descendants() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not _live_descendants():
            break
    return len(signalled)


def _live_descendants() -> list[int]:
    """Descendants of this process that are running (not zombies) in this session."""
    me, session = os.getpid(), os.getsid(0)
    children: dict[int, list[int]] = {}
    state: dict[int, tuple[str, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_bytes()
        except OSError:
            continue  # ended while we looked
        # pid (comm) state ppid pgrp session ...: comm may hold spaces and parentheses.
        fields = raw[raw.rfind(b")") + 2 :].split()
        if len(fields) < 4:
            continue
        pid = int(entry.name)
        children.setdefault(int(fields[1]), []).append(pid)
        state[pid] = (fields[0].decode("ascii", "replace"), int(fields[3]))
    found, queue = [], list(children.get(me, []))
    while queue:
        pid = queue.pop()
        queue.extend(children.get(pid, []))
        run_state, pid_session = state.get(pid, ("Z", 0))
        if run_state not in ("Z", "X") and pid_session == session:
            found.append(pid)
    return found
