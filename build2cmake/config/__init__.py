"""Read build.toml in any format kernel-builder has used and validate it into one `Project`.

One reader per format (v1.py ... v5.py), each a set of key tables plus a small conversion into
the model; `detect_format` picks the reader; `migrate.py` rewrites older files as edition 5.
Every problem of a file is reported in one run (`BuildConfigErrors`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomlkit reads (with the dotted-key bound below)
    tomllib = None

from build2cmake.config import v1, v2, v3, v4, v5
from build2cmake.config.model import Project
from build2cmake.config.schema import KNOWN_DEPENDS, SOURCE_SUFFIXES
from build2cmake.ground.errors import BuildConfigError
from build2cmake.ground.safefs import BUILD_TOML_LIMIT_BYTES, read_regular_file

READERS: Mapping[str, Callable[[Mapping[str, Any], Path], Project]] = {
    v1.FORMAT: v1.read,
    v2.FORMAT: v2.read,
    v3.FORMAT: v3.read,
    v4.FORMAT: v4.read,
    v5.FORMAT: v5.read,
}
CURRENT_FORMAT = v5.FORMAT


def read_bytes(build_toml: Path) -> bytes:
    """build.toml's bytes: an existing regular file of bounded size; every problem is one error."""
    try:
        if build_toml.is_dir():
            raise BuildConfigError(build_toml, "", "is a directory, expected a build.toml file")
        if not build_toml.exists() and not build_toml.is_symlink():
            raise BuildConfigError(build_toml, "", "file not found")
    except (OSError, ValueError) as e:
        raise BuildConfigError(build_toml, "", f"cannot be examined ({e})") from None
    return read_regular_file(build_toml, BUILD_TOML_LIMIT_BYTES, "build.toml")


def read_text(build_toml: Path) -> str:
    """build.toml's text: a regular UTF-8 file of bounded size; every problem is one error."""
    data = read_bytes(build_toml)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BuildConfigError(build_toml, "", f"is not UTF-8 text ({e.reason})") from None


# tomlkit (which keeps comments, for update-build) takes time quadratic in the dotted keys
# (`a.b.c = 1`) of a table: 300 of them took 2 s, 31 KB of them 244 s. build.toml files write
# tables ([kernel.name]) and need few or none, so a file with more is refused before tomlkit
# sees it. The count errs high (a `.` before any `=` on a line counts, quoted or not): it only
# ever refuses more, and 64 such lines cost tomlkit well under a second.
DOTTED_KEY_LIMIT = 64
# What ends a key's text on its left: an inline table or array opening, a separator.
_KEY_START = re.compile(r"[{},\[]")


def dotted_keys(text: str) -> int:
    """How many keys of `text` may be dotted: each `=` whose left side, from the last `{`, `}`,
    `,` or `[` of its line, holds a `.` (a count that errs high; linear in the text)."""
    found = 0
    for line in text.splitlines():
        for left in line.split("=")[:-1]:
            if "." in _KEY_START.split(left)[-1]:
                found += 1
    return found


def _check_dotted_keys(build_toml: Path, text: str) -> None:
    found = dotted_keys(text)
    if found > DOTTED_KEY_LIMIT:
        raise BuildConfigError(
            build_toml,
            "",
            f"has {found} dotted keys (`a.b = ...`, or a `.` before an `=`), more than "
            f"{DOTTED_KEY_LIMIT}; the TOML library that keeps comments takes minutes on such "
            "files: write them as [tables]",
        )


def read_data(build_toml: Path) -> dict[str, Any]:
    """build.toml's data, parsed with the standard library's `tomllib` (linear time, whatever
    the file holds); on Python 3.10 with tomlkit, after the dotted-key bound."""
    if tomllib is None:
        return dict(read_document(build_toml).unwrap())
    text = read_text(build_toml)
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError) as e:
        raise BuildConfigError(build_toml, "", f"invalid TOML: {e}") from None


def read_document(build_toml: Path) -> tomlkit.TOMLDocument:
    """Parse build.toml with tomlkit (which keeps comments, for update-build); bounded in
    time by first reading it with tomllib (invalid files stop there) and counting its dotted
    keys."""
    text = read_text(build_toml)
    if tomllib is not None:
        try:
            tomllib.loads(text)
        except (tomllib.TOMLDecodeError, ValueError, RecursionError) as e:
            raise BuildConfigError(build_toml, "", f"invalid TOML: {e}") from None
    _check_dotted_keys(build_toml, text)
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.TOMLKitError as e:
        raise BuildConfigError(build_toml, "", f"invalid TOML: {e}") from None
    except (ValueError, RecursionError) as e:
        # tomlkit lets a few malformed values (huge dates, very deep nesting) escape as these.
        raise BuildConfigError(build_toml, "", f"invalid TOML: {e}") from None


def detect_format(data: Mapping[str, Any], build_toml: Path) -> str:
    """Which format a document is in: `edition = 5`, else recognised by its keys."""
    general = data.get("general")
    if isinstance(general, Mapping) and "edition" in general:
        edition = general["edition"]
        if not isinstance(edition, int) or isinstance(edition, bool):
            raise BuildConfigError(
                build_toml, "[general].edition", f"expected an integer, got {edition!r}"
            )
        if edition == 5:
            return v5.FORMAT
        hint = (
            " (edition 4 files carry no edition key: remove it, or write edition = 5)"
            if edition == 4
            else ""
        )
        raise BuildConfigError(
            build_toml,
            "[general].edition",
            f"edition {edition} is not one this build2cmake reads; it reads edition 5 and "
            f"the older files without an edition (v1 to v4){hint}",
        )
    kernels = data.get("kernel")
    torch = data.get("torch")
    if isinstance(kernels, Mapping) and any(
        isinstance(k, Mapping) and ("language" in k or "backend" not in k) for k in kernels.values()
    ):
        return v1.FORMAT
    if isinstance(torch, Mapping) and "universal" in torch:
        return v1.FORMAT
    if not isinstance(general, Mapping) or "backends" not in general:
        return v2.FORMAT
    if (
        "torch-noarch" in data
        or (isinstance(torch, Mapping) and ("cxx-flags" in torch or "stable-abi" in torch))
        or "source" in general
    ):
        return v4.FORMAT
    return v3.FORMAT


def load_project(build_toml: Path) -> Project:
    """Read and validate build.toml; the project folder is the folder holding it."""
    return parse_project(read_data(build_toml), build_toml)


def parse_project(data: Mapping[str, Any], build_toml: Path) -> Project:
    """Validate already-parsed build.toml data into a Project, checking paths on disk."""
    return READERS[detect_format(data, build_toml)](data, build_toml)


__all__ = [
    "CURRENT_FORMAT",
    "KNOWN_DEPENDS",
    "SOURCE_SUFFIXES",
    "detect_format",
    "load_project",
    "parse_project",
    "read_bytes",
    "read_data",
    "read_document",
    "read_text",
]
