"""What the command line prints: every line escaped with errors.printable."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from build2cmake.ground.errors import printable


def out(*lines: str, flush: bool = False) -> None:
    """Print each of `lines` as one line of standard output, escaped with errors.printable: a
    name or path from a cloned repository can neither forge a line nor reach the terminal as an
    escape sequence."""
    for line in lines:
        print(printable(line), flush=flush)


def err(text: str) -> None:
    """Print a message to standard error: each line escaped (a Build2CMakeError's only line
    breaks are its own, before each detail)."""
    for line in text.split("\n"):
        print(printable(line), file=sys.stderr)


def warn(warnings: Sequence[str]) -> None:
    for warning in warnings:
        err(f"build2cmake: warning: {printable(warning)}")
