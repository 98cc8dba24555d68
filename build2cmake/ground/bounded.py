"""Bounded readers for the files of a cloned project that build2cmake reads but did not write.

A hostile tree may hold a FIFO where a file is expected, a sparse file of terabytes, JSON nested
a million levels deep, Python whose expressions nest deeper than the parser's recursion, names
that are not UTF-8 and folder trees thousands of levels deep. Every reader here is bounded in
size and depth, never blocks, never follows a symlink out of the project, and turns every such
failure into one `Build2CMakeError` naming the file; callers never see RecursionError,
MemoryError or UnicodeError.
"""

from __future__ import annotations

import ast
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from build2cmake.ground.errors import Build2CMakeError
from build2cmake.ground.safefs import RECORD_LIMIT_BYTES, read_regular_file

# A package's Python file or a binding source: real ones are tens of KiB; generated tables can
# reach a few MiB.
SOURCE_LIMIT_BYTES = 8 << 20
# Folders below the folder a walk starts in; real kernel packages and tests nest a few levels.
WALK_DEPTH_LIMIT = 32
# Entries a walk visits before it refuses: a package or tests/ of real kernels holds < 1000.
WALK_ENTRY_LIMIT = 100_000


def read_text(path: Path, what: str, *, root: Path, limit_bytes: int = SOURCE_LIMIT_BYTES) -> str:
    """The text of regular file `path` (inside `root`), at most `limit_bytes`; bytes that are not
    UTF-8 become U+FFFD. A FIFO, device, folder, bigger file or link out of `root` is an error."""
    return read_regular_file(path, limit_bytes, what, root=root).decode("utf-8", "replace")


def read_json_record(path: Path, what: str, *, root: Path) -> Any:
    """The JSON value in record `path` (at most 1 MiB); nesting too deep for Python's parser
    (RecursionError) is an error naming the file like any other invalid JSON."""
    raw = read_regular_file(path, RECORD_LIMIT_BYTES, what, root=root)
    return parse_json_record(raw, path, what, remedy="rebuild, or remove the folder")


def parse_json_record(raw: bytes, path: Path | str, what: str, *, remedy: str = "") -> Any:
    """The JSON value in `raw`, the (bounded) bytes of record `path`; bytes that are not UTF-8
    become U+FFFD. Invalid JSON and nesting too deep for Python's parser (RecursionError) are
    one error naming the file."""
    try:
        return json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError) as error:
        raise Build2CMakeError(
            f"{path}: {what} is not valid JSON ({error})" + (f"; {remedy}" if remedy else "")
        ) from None


def parse_python(path: Path, source: str) -> ast.Module:
    """`source` (the text of `path`) parsed, without running it; one error naming the file when
    it is not Python or nests too deeply for the parser (RecursionError, MemoryError)."""
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as error:
        raise Build2CMakeError(
            f"{path}:{error.lineno or 0}: not valid Python ({error.msg})"
        ) from None
    except (RecursionError, MemoryError, ValueError):
        raise Build2CMakeError(
            f"{path}: its expressions nest too deeply (or it holds NUL bytes) for Python's parser; "
            "simplify the file"
        ) from None


def walk_files(top: Path, what: str) -> Iterator[Path]:
    """Every regular file under folder `top` (not following symlinks, skipping __pycache__),
    in sorted order per folder; iterative, so a deep tree cannot exhaust the recursion.

    A tree deeper than WALK_DEPTH_LIMIT folders or with more than WALK_ENTRY_LIMIT entries is one
    error naming where it stopped. Names that are not UTF-8 come back as Python keeps them
    (surrogate escapes): print them only through `errors.printable`.
    """
    seen = 0
    pending: list[tuple[Path, int]] = [(top, 0)]
    while pending:
        folder, depth = pending.pop()
        try:
            with os.scandir(folder) as entries:
                listed = sorted(entries, key=lambda e: e.name, reverse=True)
        except OSError as error:
            raise Build2CMakeError(
                f"{folder}: cannot list {what} ({error.strerror or error})"
            ) from None
        seen += len(listed)
        if seen > WALK_ENTRY_LIMIT:
            raise Build2CMakeError(
                f"{top}: {what} holds more than {WALK_ENTRY_LIMIT} entries; that is not a kernel's"
            )
        files: list[Path] = []
        for entry in listed:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode) and entry.name != "__pycache__":
                if depth + 1 > WALK_DEPTH_LIMIT:
                    raise Build2CMakeError(
                        f"{entry.path}: {what} nests deeper than {WALK_DEPTH_LIMIT} folders; "
                        "flatten it"
                    )
                pending.append((Path(entry.path), depth + 1))
            elif stat.S_ISREG(mode):
                files.append(Path(entry.path))
        yield from reversed(files)
