"""The one error family for everything a user must fix (the CLI turns it into exit code 2),
and `printable`, the one way an attacker-controlled string (a key, a path, a manifest entry) is
shown to the user."""

from __future__ import annotations

import unicodedata
from pathlib import Path

# Unicode categories that must not reach a terminal raw: control characters (newline, ESC, ...),
# format characters (bidirectional overrides, zero-width characters), lone surrogates (from file
# names that are not UTF-8) and the line and paragraph separators.
_UNPRINTABLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """`text` with every control or format character written as an escape (`\\n`, `\\x1b`,
    `\\u202e`), so it can neither forge a line nor send an escape sequence to a terminal.

    Idempotent: the result has no such character left, so escaping twice changes nothing.
    """
    if text.isprintable():
        return text
    out: list[str] = []
    for char in text:
        if unicodedata.category(char) not in _UNPRINTABLE_CATEGORIES:
            out.append(char)
        elif char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif ord(char) < 0x100:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return "".join(out)


class Build2CMakeError(Exception):
    """Something the user must fix; never a bug of ours. The message is complete on its own.

    The message and each detail are escaped with `printable` (they often hold paths and names
    from a cloned repository); each detail becomes one indented line below the message.
    """

    def __init__(self, message: str, *details: str) -> None:
        super().__init__(printable(message) + "".join(f"\n  {printable(d)}" for d in details))


class BuildConfigError(Build2CMakeError):
    """A build.toml that cannot be built: names the file, the key path and what would be valid."""

    def __init__(self, file: Path | str, key: str, message: str) -> None:
        self.file = Path(file)
        self.key = key
        self.message = message
        where = f"{self.file}: {key}: " if key else f"{self.file}: "
        super().__init__(where + message)


class WriteRefusedError(Build2CMakeError):
    """Writing or deleting would destroy something the user wrote or edited."""


class BuildConfigErrors(BuildConfigError):
    """Every problem found in one build.toml, reported together (one line each).

    `file`, `key` and `message` are the first problem's, so code that handles one error
    handles this too.
    """

    def __init__(self, errors: list[BuildConfigError]) -> None:
        self.errors = list(errors)
        first = self.errors[0]
        Exception.__init__(self, "\n".join(str(e) for e in self.errors))
        self.file, self.key, self.message = first.file, first.key, first.message
