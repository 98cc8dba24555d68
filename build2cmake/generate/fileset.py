"""Generated files collected in memory, then written in one place that knows about --force.

A manifest (`.build2cmake-manifest.json`) records every file generate wrote with the hash of the
content it wrote. That is how a later generate tells "ours, unchanged" (safe to replace) from
"edited by the user" (kept unless --force), and how `clean` knows exactly what it may delete.
The manifest lives in the project, so it is untrusted input: only entries that name a file
generate could have written are used; the rest are ignored with a warning and never deleted.
All disk access goes through `safefs.ProjectFolder`, which never leaves the project folder.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from build2cmake.ground.errors import Build2CMakeError, WriteRefusedError
from build2cmake.ground.safefs import (
    RECORD_LIMIT_BYTES,
    ProjectFolder,
    checked_target,
    relative_path,
)

MANIFEST_NAME = ".build2cmake-manifest.json"
# The files generate writes (render.render_project); a manifest entry naming anything else is
# not ours to replace or delete. tests/test_security_deletes_only_what_it_made.py checks that
# every rendered file matches, so a new generated file fails a test until it is listed here.
GENERATED_PATTERNS = (
    "CMakeLists.txt",
    "pyproject.toml",
    "cmake/*",
    "cmake/build2cmake-metadata/build2cmake_metadata.py",
    "torch-ext/registration.h",
    "torch-ext/*/_ops.py",
    "tvm-ffi-ext/*/_ops.py",
)
# A generated file is a few KiB; one the user replaced with something bigger is not ours.
GENERATED_LIMIT_BYTES = 16 << 20
_HASH = re.compile(r"sha256:[0-9a-f]{64}")


def content_hash(data: bytes) -> str:
    """The hash recorded in the manifest for a file's content."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def is_generated_name(name: str) -> bool:
    """Whether `name` is a normalized relative path of a kind generate writes."""
    rel = relative_path(name)
    if rel is None:
        return False
    # fnmatch's `*` also matches `/`; compare component counts so `cmake/*` is one level.
    return any(
        fnmatch.fnmatchcase(name, pattern) and len(rel.parts) == pattern.count("/") + 1
        for pattern in GENERATED_PATTERNS
    )


@dataclass
class FileSet:
    """Paths (relative to the target folder) mapped to the bytes generate wants there."""

    files: dict[PurePosixPath, bytes] = field(default_factory=dict)
    # Files a project may ship a copy of its own (kernel-builder's registration.h, committed by
    # its authors): the macros such a copy must define for generate to use it instead of ours.
    own_copy_defines: dict[PurePosixPath, tuple[str, ...]] = field(default_factory=dict)

    def add(
        self,
        path: str | PurePosixPath,
        content: str | bytes,
        own_copy_defines: tuple[str, ...] = (),
    ) -> None:
        """Add one file; adding the same path twice is a bug in the caller. With
        `own_copy_defines`, a copy the project ships that #defines all of those names is used
        as it is (and stays the project's) instead of being refused."""
        key = PurePosixPath(path)
        if key in self.files:
            raise ValueError(f"FileSet: {key} added twice")
        self.files[key] = content.encode("utf-8") if isinstance(content, str) else content
        if own_copy_defines:
            self.own_copy_defines[key] = own_copy_defines

    def __iter__(self) -> Iterator[PurePosixPath]:
        return iter(sorted(self.files))


@dataclass(frozen=True)
class Manifest:
    """What the last generate wrote into a target folder.

    Written before the files it describes (intent first): while generate replaces a file, its
    entry lists the hash of the old content and of the new, so that a generate killed part-way
    leaves a manifest under which every file is either one of ours or the user's, and the next
    generate or clean finishes the job without --force. A settled entry holds one hash.
    """

    files: Mapping[str, tuple[str, ...]]  # relative path -> the content hashes that are ours
    ignored: tuple[str, ...] = ()  # warnings about entries that were not used

    def is_ours(self, name: str, content: bytes) -> bool:
        """Whether `content` at `name` is what generate wrote there."""
        return content_hash(content) in self.files.get(name, ())

    @classmethod
    def read(cls, folder: ProjectFolder) -> Manifest | None:
        """The manifest in `folder`, None when there is none or it is not JSON of the right
        shape. Entries that are not generated file names with a sha256 hash are dropped (and
        listed in `ignored`); a manifest that is not a regular file is one Build2CMakeError."""
        raw = folder.read(MANIFEST_NAME, RECORD_LIMIT_BYTES, "manifest")
        if raw is None:
            return None
        try:
            data = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
            return None
        files: dict[str, tuple[str, ...]] = {}
        ignored: list[str] = []
        for name, recorded in data["files"].items():
            hashes = recorded if isinstance(recorded, list) else [recorded]
            if not is_generated_name(name):
                ignored.append(f"{MANIFEST_NAME}: ignoring {name!r}: not a file generate writes")
            elif not 1 <= len(hashes) <= 2 or not all(
                isinstance(h, str) and _HASH.fullmatch(h) for h in hashes
            ):
                ignored.append(f"{MANIFEST_NAME}: ignoring {name!r}: its hash is not sha256:<hex>")
            else:
                files[name] = tuple(hashes)
        return cls(files=files, ignored=tuple(ignored))

    def to_bytes(self) -> bytes:
        """The manifest as written to disk (sorted, so identical runs write identical bytes; a
        settled entry as one hash, as every manifest before 2026-11-28 was)."""
        data = {
            "files": {
                name: hashes[0] if len(hashes) == 1 else list(hashes)
                for name, hashes in sorted(self.files.items())
            }
        }
        return (json.dumps(data, indent=2) + "\n").encode("utf-8")


@dataclass(frozen=True)
class WriteReport:
    """What `write_fileset` did, for the CLI to print."""

    written: tuple[str, ...]
    unchanged: tuple[str, ...]
    removed: tuple[str, ...]
    warnings: tuple[str, ...] = ()


def write_fileset(fileset: FileSet, target_dir: Path, *, force: bool = False) -> WriteReport:
    """Write `fileset` under `target_dir`: all or nothing as far as checks go, each file atomic.

    Unchanged files are not touched (their mtime stays). A file that exists with other content
    than generate last wrote there (or that generate never wrote) is refused unless `force`.
    """
    checked_target(target_dir)
    with ProjectFolder(target_dir) as folder, folder.locked():
        return write_fileset_locked(fileset, folder, force=force)


def current_bytes(folder: ProjectFolder, name: str) -> bytes | None:
    """The content of generated file `name` if it is a regular file we may compare, else None."""
    if not folder.is_file(name):
        return None
    try:
        return folder.read(name, GENERATED_LIMIT_BYTES, "generated file")
    except Build2CMakeError:
        return None


def write_fileset_locked(fileset: FileSet, folder: ProjectFolder, *, force: bool) -> WriteReport:
    """`write_fileset` for a caller that already holds `folder`'s lock."""
    for path in fileset:
        if relative_path(path) is None:
            raise ValueError(f"FileSet: {str(path)!r} is not a normalized relative path")
    previous = Manifest.read(folder) or Manifest(files={})
    recorded = previous.files

    to_write: list[PurePosixPath] = []
    # The hash of what is there now, for the files generate replaces that are ours.
    ours_now: dict[str, str] = {}
    unchanged: list[str] = []
    refused: list[str] = []
    project_own: list[PurePosixPath] = []
    for path in fileset:
        _check_parents(folder, path)
        content = fileset.files[path]
        info = folder.lstat(path)
        if info is None:
            to_write.append(path)
            continue
        if stat.S_ISDIR(info.st_mode):
            raise Build2CMakeError(
                f"{folder.path / str(path)}: is a folder, but generate writes a file there"
            )
        # A symlink or other non-regular file is never ours; the rename replaces it (never
        # writes through it), so --force may.
        current = current_bytes(folder, str(path))
        if current == content:
            unchanged.append(str(path))
        elif force or (current is not None and previous.is_ours(str(path), current)):
            to_write.append(path)
            if current is not None and previous.is_ours(str(path), current):
                ours_now[str(path)] = content_hash(current)
        elif current is not None and _defines_all(current, fileset.own_copy_defines.get(path, ())):
            project_own.append(path)
        else:
            refused.append(str(path))
    if refused:
        raise WriteRefusedError(
            "refusing to overwrite files that build2cmake did not write or that were edited "
            "since (move your changes elsewhere, or pass --force to overwrite them):",
            *(str(folder.path / p) for p in refused),
        )

    # Files the previous generate wrote that this one does not (e.g. a renamed package); an
    # edited one is the user's now and stays.
    stale = sorted(set(recorded) - {str(p) for p in fileset})
    # The project's own copies are not ours: the manifest leaves them out, so clean keeps them.
    settled: dict[str, tuple[str, ...]] = {
        str(p): (content_hash(fileset.files[p]),) for p in fileset if p not in project_own
    }
    # Intent first: until the writes and removals below are done, each file to be written may
    # hold what is there now (when it is ours) or the new content, and each stale file is still
    # ours. What is there now, not what was recorded: after two kills in a row the record's old
    # hash may be of content that never reached the file.
    pending = dict(settled)
    for path in to_write:
        if path not in project_own and str(path) in ours_now:
            pending[str(path)] = (ours_now[str(path)], *settled[str(path)])
    pending.update({name: recorded[name] for name in stale})
    _write_manifest(folder, Manifest(files=pending))

    removed: list[str] = []
    for name in stale:
        current = current_bytes(folder, name)
        if current is not None and previous.is_ours(name, current):
            folder.unlink(name)
            folder.remove_empty_parents(name)
            removed.append(name)

    folder.remove_stale_temporaries([*fileset, PurePosixPath(MANIFEST_NAME)])
    for path in to_write:
        folder.write_atomic(path, fileset.files[path])
    _write_manifest(folder, Manifest(files=settled))
    own_notes = tuple(
        f"{p}: using the project's own copy (it defines "
        f"{', '.join(fileset.own_copy_defines[p])}) instead of build2cmake's, which also records "
        "the torch version the build was compiled against for the import check; --force "
        "replaces it"
        for p in project_own
    )
    return WriteReport(
        tuple(str(p) for p in to_write),
        tuple(unchanged),
        tuple(removed),
        (*previous.ignored, *own_notes),
    )


def _write_manifest(folder: ProjectFolder, manifest: Manifest) -> None:
    """Write `manifest` unless the one on disk already says the same (no needless write)."""
    content = manifest.to_bytes()
    if current_bytes(folder, MANIFEST_NAME) != content:
        folder.write_atomic(MANIFEST_NAME, content)


def _defines_all(content: bytes, names: tuple[str, ...]) -> bool:
    """Whether C/C++ source `content` has a #define of every one of `names` (none: False)."""
    text = content.decode("utf-8", errors="replace")
    return bool(names) and all(
        re.search(rf"^[ \t]*#[ \t]*define[ \t]+{re.escape(name)}\b", text, re.MULTILINE)
        for name in names
    )


def _check_parents(folder: ProjectFolder, path: PurePosixPath) -> None:
    """Refuse before writing anything when a parent of `path` exists but is not a real folder."""
    for parent in reversed(list(path.parents)[:-1]):
        info = folder.lstat(parent)
        if info is None:
            return
        if stat.S_ISLNK(info.st_mode):
            raise Build2CMakeError(
                f"{folder.path / str(parent)}: is a symlink; generate writes only into real "
                "folders inside the project (remove the link)"
            )
        if not stat.S_ISDIR(info.st_mode):
            raise Build2CMakeError(
                f"{folder.path / str(parent)}: is a file, but generate needs a folder there"
            )
