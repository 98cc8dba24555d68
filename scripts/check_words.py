"""The project's own words for time: fail where a file says "session" other than in its code
meanings.

The project marks time by dates (YYYY-MM-DD), commits and issue numbers, never by the periods of
work or the tools that made it ("the twenty-third session", "this session's device time"). The
word stays where it means what code means by it: a process session (a process that started a
session of its own, `os.getsid`, the fields of /proc/<pid>/stat) and pytest's session scope.
`start_new_session` and `setsid` are words of their own and never match.

    python scripts/check_words.py            # the repository's files (tracked and new ones)
    python scripts/check_words.py PATH...    # these files, and the files under these folders

Prints `path:line: text` for every line where the word appears outside those meanings and exits
1; exits 0 when there is none. The lint stage of scripts/test.sh runs it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORD = re.compile(r"\bsessions?\b", re.IGNORECASE)
# Each occurrence of the word must lie inside a match of one of these: its code meanings.
ALLOWED = (
    # pytest: @pytest.fixture(scope="session")
    re.compile(r"""scope\s*=\s*["']session["']"""),
    # a process (a daemon, a child started with setsid or start_new_session) in a session of its own
    re.compile(r"\bsessions? of (?:its|their) own\b", re.IGNORECASE),
    # a process session, named beside its process in the same sentence
    re.compile(r"\bprocess(?:es)?\b[^.]*?\bsessions?\b", re.IGNORECASE),
    re.compile(r"\bsessions?\b[^.]*?\bprocess(?:es)?\b", re.IGNORECASE),
    # a process session id in code: `me, session = os.getpid(), os.getsid(0)`,
    # `pid_session == session`
    re.compile(r"\bsession\b.*?\bos\.getsid\("),
    re.compile(r"\b\w+_session\s*==\s*session\b"),
    # the fields of /proc/<pid>/stat: pid (comm) state ppid pgrp session ...
    re.compile(r"\bpgrp session\b"),
)
# The rule itself and its test spell out what they refuse.
EXEMPT = frozenset({"scripts/check_words.py", "tests/test_check_words.py"})
SKIPPED_FOLDERS = frozenset({".git", ".venv", "__pycache__", "build", "node_modules"})
LARGEST = 4 << 20  # bytes: larger files are data, not the project's words


def forbidden(line: str) -> bool:
    """Whether `line` says the word anywhere outside its code meanings."""
    allowed = [m.span() for pattern in ALLOWED for m in pattern.finditer(line)]
    return any(
        not any(start <= m.start() and m.end() <= end for start, end in allowed)
        for m in WORD.finditer(line)
    )


def hits(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of each line of the text file `path` that fails the rule."""
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > LARGEST:
            return
        data = path.read_bytes()
    except OSError:
        return
    if b"\0" in data[:8192]:
        return  # binary
    text = data.decode("utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), start=1):
        if WORD.search(line) and forbidden(line):
            yield number, line


def repository_files(root: Path) -> list[Path]:
    """The files git tracks under `root` and the new ones it does not ignore."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout
    names = sorted({name for name in listed.decode("utf-8", "replace").split("\0") if name})
    return [root / name for name in names if name not in EXEMPT]


def files_under(paths: Iterable[Path]) -> Iterator[Path]:
    """The files named, and the files under the folders named (skipping tool folders)."""
    for path in paths:
        if not path.is_dir():
            yield path
            continue
        for folder, subfolders, files in os.walk(path):
            subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED_FOLDERS)
            yield from (Path(folder) / name for name in sorted(files))


def shown(text: str) -> str:
    """`text` with control characters escaped, at most 160 characters: safe for a terminal."""
    escaped = "".join(
        c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii")
        for c in text.strip()
    )
    return escaped if len(escaped) <= 160 else escaped[:157] + "..."


def main(argv: Sequence[str]) -> int:
    """Check the files `argv` names (default: the repository's); 1 when any line fails."""
    files = list(files_under(Path(arg) for arg in argv)) if argv else repository_files(REPO)
    failures = 0
    for path in files:
        name = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        for number, line in hits(path):
            print(f"{shown(str(name))}:{number}: {shown(line)}")
            failures += 1
    if failures:
        print(
            f"check_words: {failures} line(s) say 'session' for a period of work or the tools "
            "that did it: mark time by a date (YYYY-MM-DD), a commit or an issue number (code "
            "meanings that pass: process sessions, pytest's session scope)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
