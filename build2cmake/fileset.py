"""Generated files collected in memory, then written in one place that knows about --force.

A manifest (`.build2cmake-manifest.json`) records every file generate wrote with the hash of the
content it wrote. That is how a later generate tells "ours, unchanged" (safe to replace) from
"edited by the user" (kept unless --force), and how `clean` knows exactly what it may delete.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from build2cmake.errors import Build2CMakeError, WriteRefusedError

MANIFEST_NAME = ".build2cmake-manifest.json"


def content_hash(data: bytes) -> str:
    """The hash recorded in the manifest for a file's content."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class FileSet:
    """Paths (relative to the target folder) mapped to the bytes generate wants there."""

    files: dict[PurePosixPath, bytes] = field(default_factory=dict)

    def add(self, path: str | PurePosixPath, content: str | bytes) -> None:
        """Add one file; adding the same path twice is a bug in the caller."""
        key = PurePosixPath(path)
        if key in self.files:
            raise ValueError(f"FileSet: {key} added twice")
        self.files[key] = content.encode("utf-8") if isinstance(content, str) else content

    def __iter__(self) -> Iterator[PurePosixPath]:
        return iter(sorted(self.files))


@dataclass(frozen=True)
class Manifest:
    """What the last generate wrote into a target folder."""

    files: Mapping[str, str]  # relative path -> content hash
    build_dirs: tuple[str, ...] = ()

    @classmethod
    def read(cls, target_dir: Path) -> Manifest | None:
        """The manifest in `target_dir`, or None when there is none or it is unreadable."""
        try:
            data = json.loads((target_dir / MANIFEST_NAME).read_text("utf-8"))
            files = {str(k): str(v) for k, v in data["files"].items()}
            build_dirs = tuple(str(d) for d in data.get("build_dirs", []))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return cls(files=files, build_dirs=build_dirs)

    def to_bytes(self) -> bytes:
        data = {"files": dict(sorted(self.files.items())), "build_dirs": list(self.build_dirs)}
        return (json.dumps(data, indent=2) + "\n").encode("utf-8")


@dataclass(frozen=True)
class WriteReport:
    """What `write_fileset` did, for the CLI to print."""

    written: tuple[str, ...]
    unchanged: tuple[str, ...]
    removed: tuple[str, ...]


def write_fileset(
    fileset: FileSet, target_dir: Path, *, build_dirs: tuple[str, ...] = (), force: bool = False
) -> WriteReport:
    """Write `fileset` under `target_dir`: all or nothing as far as checks go, each file atomic.

    Unchanged files are not touched (their mtime stays). A file that exists with other content
    than generate last wrote there (or that generate never wrote) is refused unless `force`.
    """
    if not target_dir.is_dir():
        raise Build2CMakeError(f"{target_dir}: target folder does not exist or is not a folder")
    with locked(target_dir):
        return _write_locked(fileset, target_dir, build_dirs, force)


@contextlib.contextmanager
def locked(target_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on the target folder itself, so that concurrent generate and clean
    runs on one project take turns (and never sweep each other's temporary files)."""
    fd = os.open(target_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _write_locked(
    fileset: FileSet, target_dir: Path, build_dirs: tuple[str, ...], force: bool
) -> WriteReport:
    previous = Manifest.read(target_dir)
    recorded = previous.files if previous else {}

    to_write: list[PurePosixPath] = []
    unchanged: list[str] = []
    refused: list[str] = []
    for path in fileset:
        on_disk = target_dir / path
        content = fileset.files[path]
        blocker = _blocking_parent(target_dir, path)
        if blocker is not None:
            raise Build2CMakeError(f"{blocker}: is a file, but generate needs a folder there")
        if on_disk.is_dir():
            raise Build2CMakeError(f"{on_disk}: is a folder, but generate writes a file there")
        if not on_disk.exists():
            to_write.append(path)
            continue
        try:
            current = on_disk.read_bytes()
        except OSError as e:
            raise Build2CMakeError(f"{on_disk}: cannot be read ({e.strerror})") from None
        if current == content:
            unchanged.append(str(path))
        elif force or recorded.get(str(path)) == content_hash(current):
            to_write.append(path)
        else:
            refused.append(str(path))
    if refused:
        listing = "\n".join(f"  {target_dir / p}" for p in refused)
        raise WriteRefusedError(
            "refusing to overwrite files that build2cmake did not write or that were edited "
            f"since:\n{listing}\nMove your changes elsewhere, or pass --force to overwrite them."
        )

    # Files the previous generate wrote that this one does not (e.g. a renamed package).
    stale = sorted(set(recorded) - {str(p) for p in fileset})
    removed: list[str] = []
    for name in stale:
        on_disk = target_dir / name
        with contextlib.suppress(OSError):
            if content_hash(on_disk.read_bytes()) == recorded[name]:
                on_disk.unlink()
                removed.append(name)

    _remove_stale_temporaries(target_dir, [*fileset, PurePosixPath(MANIFEST_NAME)])
    for path in to_write:
        _atomic_write(target_dir / path, fileset.files[path])
    manifest = Manifest(
        files={str(p): content_hash(fileset.files[p]) for p in fileset}, build_dirs=build_dirs
    )
    manifest_path = target_dir / MANIFEST_NAME
    new_manifest = manifest.to_bytes()
    if not manifest_path.exists() or manifest_path.read_bytes() != new_manifest:
        _atomic_write(manifest_path, new_manifest)
    return WriteReport(tuple(str(p) for p in to_write), tuple(unchanged), tuple(removed))


def _blocking_parent(target_dir: Path, path: PurePosixPath) -> Path | None:
    """The first parent folder of `path` that exists as a file, if any."""
    current = target_dir
    for part in path.parts[:-1]:
        current = current / part
        if current.exists() and not current.is_dir():
            return current
    return None


def _temporary_prefix(path: Path) -> str:
    return f".{path.name}."


def _remove_stale_temporaries(target_dir: Path, paths: list[PurePosixPath]) -> None:
    """Delete temporary files a killed generate left next to the files it writes."""
    for path in paths:
        on_disk = target_dir / path
        if on_disk.parent.is_dir():
            for stale in on_disk.parent.glob(f"{_temporary_prefix(on_disk)}*.tmp"):
                with contextlib.suppress(OSError):
                    stale.unlink()


def _atomic_write(path: Path, content: bytes) -> None:
    """Write through a temporary file in the same folder and rename it over the target."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temporary_prefix(path), suffix=".tmp")
    except OSError as e:
        raise Build2CMakeError(f"{path}: cannot write ({e.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise Build2CMakeError(f"{path}: cannot write ({e.strerror})") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
