"""The one error family for everything a user must fix (the CLI turns it into exit code 2)."""

from __future__ import annotations

from pathlib import Path


class Build2CMakeError(Exception):
    """Something the user must fix; never a bug of ours. The message is complete on its own."""


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
