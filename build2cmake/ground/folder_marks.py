"""Which build folders build2cmake made on this machine, and so may let CMake build in.

A build folder is state CMake trusts: CMakeCache.txt entries run code (CMAKE_PROJECT_INCLUDE, a
compiler launcher, a <Package>_DIR naming a planted config file), CMakeFiles/ holds the compiler
descriptions CMake includes, and object files with a matching `.ninja_log` are linked without
being recompiled. A cloned project (or a restored CI cache) can ship all of that under
build/cmake*, and nothing in the tree can prove its own origin: whatever build2cmake writes
there, a clone can write too.

So the proof is a secret the clone cannot know. Each build folder build2cmake makes holds a mark,
`build2cmake-made`, an HMAC (keyed by a per-user random key in build2cmake's cache folder,
outside every project) of the folder's device and inode. A folder shipped in a clone, restored
from an archive or made by something else has no valid mark: it is removed and made afresh
before CMake reads anything in it. `cmake/build2cmake-metadata/build2cmake_metadata.py`, the
first code of ours `pip install` runs, applies the same rule with a copy of this code
(tests/test_security_planted_code_never_runs.py checks that the two agree).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from build2cmake.ground.errors import Build2CMakeError
from build2cmake.ground.safefs import ProjectFolder, read_regular_file

MARK = "build2cmake-made"
KEY_NAME = "build-folder.key"
_KEY_BYTES = 32
_MARK_PREFIX = "hmac-sha256:"


def key_folder() -> Path:
    """build2cmake's cache folder: $BUILD2CMAKE_CACHE, else the XDG cache folder."""
    explicit = os.environ.get("BUILD2CMAKE_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "build2cmake"


def folder_key() -> bytes:
    """The per-user key, made (32 random bytes, mode 0600) on first use.

    Written to a temporary file and hard-linked into place, so that a concurrent first use
    reads either no key or the whole key, never half of one.
    """
    folder = key_folder()
    path = folder / KEY_NAME
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not os.path.lexists(path):
            temporary = folder / f".{KEY_NAME}.{secrets.token_hex(4)}.tmp"
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, secrets.token_bytes(_KEY_BYTES))
            finally:
                os.close(fd)
            try:
                with contextlib.suppress(FileExistsError):
                    os.link(temporary, path)
            finally:
                os.unlink(temporary)
    except OSError as error:
        raise Build2CMakeError(
            f"{path}: cannot make build2cmake's build-folder key ({error.strerror or error}); "
            "set BUILD2CMAKE_CACHE to a folder you can write"
        ) from None
    key = read_regular_file(path, 1024, "build-folder key")
    if len(key) != _KEY_BYTES:
        raise Build2CMakeError(
            f"{path}: is not a build2cmake build-folder key ({_KEY_BYTES} bytes); remove it"
        )
    return key


def mark_for(key: bytes, info: os.stat_result) -> str:
    """The mark of the folder whose lstat is `info`."""
    message = f"build2cmake build folder\0{info.st_dev}\0{info.st_ino}".encode()
    return _MARK_PREFIX + hmac.new(key, message, hashlib.sha256).hexdigest() + "\n"


def made_here(folder: ProjectFolder, name: str, key: bytes) -> bool:
    """Whether real folder `name` holds the mark build2cmake gave it."""
    info = folder.lstat(name)
    if info is None or not stat.S_ISDIR(info.st_mode):
        return False
    try:
        recorded = folder.read(f"{name}/{MARK}", 1024, "build-folder mark")
    except Build2CMakeError:
        return False
    return recorded is not None and hmac.compare_digest(
        recorded, mark_for(key, info).encode("ascii")
    )


def claim(folder: ProjectFolder, name: str) -> str | None:
    """Make `name` (a build folder below `folder`) one build2cmake made: a folder without a
    valid mark is removed first. Returns a note for the user when one was removed."""
    key = folder_key()
    note = None
    if folder.lstat(name) is not None and not made_here(folder, name, key):
        info = folder.lstat(name)
        assert info is not None
        if stat.S_ISDIR(info.st_mode):
            folder.rmtree(name)
        else:
            folder.unlink(name)
        note = (
            f"build2cmake: {folder.path / name}: removed; it was not made by build2cmake on this "
            "machine (a cloned project can ship a build folder whose CMake cache runs code), "
            "so the build starts from a fresh one"
        )
    folder.makedirs(name)
    info = folder.lstat(name)
    assert info is not None
    folder.write_atomic(f"{name}/{MARK}", mark_for(key, info).encode("ascii"))
    return note
