"""scripts/check_words.py, the lint stage's check that the project marks time by dates, commits
and issue numbers: the lines it refuses, the code meanings it keeps, and how it reports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, load_script

SCRIPT = REPO / "scripts" / "check_words.py"
check_words = load_script(SCRIPT)

REFUSED = [
    "Run 30 (twenty-third session): 128 x 256 from 20 waves",
    "About 1270 of the session's 1800 s of device time.",
    "Later (session 11, tuning log run 18): clusters of two CTAs",
    "Last run (this session, 2 loaded cores): 48/48 killed.",
    "# within its launch timeout (Session 10, calls D and E).",
    "the layer-norm build did not finish in this device session's time",
    "Two sessions later the table changed.",
]
KEPT = [
    '@pytest.fixture(scope="session")',
    "@pytest.fixture(scope='session')",
    "Processes that made a session of their own (daemons: the sccache server",
    "leaves daemons that started a session of their own running",
    "    # A session of its own: on a hang, the blocked CMake is killed with it.",
    '    """Stop every live descendant of this process in its session: SIGTERM, then SIGKILL',
    "    me, session = os.getpid(), os.getsid(0)",
    '        if run_state not in ("Z", "X") and pid_session == session:',
    "        # pid (comm) state ppid pgrp session ...: comm may hold spaces and parentheses.",
    "subprocess.Popen(command, start_new_session=True)  # setsid: its own process group",
    "Measured on 2026-11-26 at ab28764 (issue #53).",
]


@pytest.mark.parametrize("line", REFUSED)
def test_a_period_of_work_named_a_session_is_refused(line: str) -> None:
    assert check_words.forbidden(line)


@pytest.mark.parametrize("line", KEPT)
def test_process_sessions_and_pytest_scopes_are_kept(line: str) -> None:
    assert not check_words.forbidden(line)


def test_a_line_with_a_kept_and_a_refused_use_is_refused() -> None:
    assert check_words.forbidden(
        "A process in a session of its own, measured in the fifth session."
    )


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_check_lists_each_refused_line_as_file_and_line_and_fails(tmp_path: Path) -> None:
    notes = tmp_path / "docs" / "notes.md"
    notes.parent.mkdir()
    notes.write_text("# Notes\n\n" + "\n".join([*KEPT, REFUSED[0], "", REFUSED[3]]) + "\n")
    (tmp_path / "clean.py").write_text("\n".join(KEPT) + "\n")
    (tmp_path / "data.bin").write_bytes(b"\0\1 the fifth session \0")  # binary: not text
    result = run(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    first = 2 + len(KEPT) + 1
    assert result.stdout.splitlines() == [
        f"{notes}:{first}: {REFUSED[0]}",
        f"{notes}:{first + 2}: {REFUSED[3]}",
    ]
    assert "check_words: 2 line(s)" in result.stderr and "YYYY-MM-DD" in result.stderr


def test_check_passes_files_with_only_code_meanings(tmp_path: Path) -> None:
    (tmp_path / "interrupts.py").write_text("\n".join(KEPT) + "\n")
    result = run(tmp_path / "interrupts.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "" and result.stderr == ""


def test_check_escapes_control_characters_in_what_it_prints(tmp_path: Path) -> None:
    planted = tmp_path / "planted.md"
    planted.write_text("\x1b]0;owned\x07 in the fifth session\n")
    result = run(planted)
    assert result.returncode == 1
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert f"{planted}:1: \\x1b]0;owned\\x07 in the fifth session" in result.stdout
