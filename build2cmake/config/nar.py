"""Nix's archive (NAR) serialization and its SRI hash: the `hash` of a kernels.lock entry.

kernels-data's `NixKernelLock.hash` is "the SRI hash of the repository snapshot, as used by
fixed-output derivations": nix-builder's `fetchFromHuggingFace` downloads a Hub repository at a
commit (huggingface_hub's `snapshot_download`, then removes the download's `.cache` folder) into
a fixed-output derivation with `outputHashMode = "recursive"`, whose hash is the SHA-256 of the
NAR serialization of that folder, written `sha256-<base64>`.

The NAR format (Nix's `nix-store --dump`): every string is its length as 8 little-endian bytes,
the bytes, then zero padding to a multiple of 8. A file is
`( type regular [executable ""] contents <bytes> )`, a folder
`( type directory (entry ( name <name> node <node> ))* )` with its entries sorted by name as
bytes, all after the magic string `nix-archive-1`. A downloaded snapshot holds only regular,
non-executable files, so that is all `NarHasher` writes.

`NarHasher` streams: files are fed in chunks, in the order `walk_order` gives, so a repository of
many gigabytes needs one file on disk at a time and no memory of its size.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Sequence

MAGIC = b"nix-archive-1"
SRI_PREFIX = "sha256-"


def _string(data: bytes) -> bytes:
    """One NAR string: length (u64, little-endian), the bytes, zero padding to 8."""
    return len(data).to_bytes(8, "little") + data + b"\0" * (-len(data) % 8)


def walk_order(paths: Iterable[str]) -> list[tuple[str, ...]]:
    """The files at `paths` (posix, relative, '/'-separated) as part tuples, in the order a NAR
    visits them: folder by folder, entries sorted by their names' UTF-8 bytes."""
    return sorted(
        (tuple(p.split("/")) for p in paths), key=lambda parts: [_bytes(n) for n in parts]
    )


def _bytes(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


class NarHasher:
    """The SHA-256 of the NAR of a folder holding regular, non-executable files, fed file by
    file in `walk_order`: `begin_file(parts, size)`, `update(chunk)` until `size` bytes came,
    then the next file; `sri()` at the end."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self._open: list[str] = []  # folders whose "directory" node is open, outermost first
        self._remaining: int | None = None  # bytes still due for the current file
        self._padding = 0
        self._last: tuple[str, ...] | None = None
        self._sha.update(_string(MAGIC))
        self._sha.update(_string(b"(") + _string(b"type") + _string(b"directory"))

    def begin_file(self, parts: Sequence[str], size: int) -> None:
        """Start the file at relative path `parts` ("build", "v", "x.py") of `size` bytes."""
        self._finish_file()
        key = tuple(parts)
        if not key or any(not part for part in key):
            raise ValueError(f"not a relative file path: {'/'.join(key)!r}")
        if self._last is not None and [_bytes(n) for n in key] <= [_bytes(n) for n in self._last]:
            raise ValueError(f"{'/'.join(key)!r} comes after {'/'.join(self._last)!r} in a NAR")
        if self._last is not None and key[: len(self._last)] == self._last:
            raise ValueError(f"{'/'.join(key)!r} lies under the file {'/'.join(self._last)!r}")
        common = 0
        while (
            common < len(self._open) and common < len(key) - 1 and self._open[common] == key[common]
        ):
            common += 1
        self._close_folders(len(self._open) - common)
        for name in key[common:-1]:
            self._entry(name)
            self._sha.update(_string(b"type") + _string(b"directory"))
            self._open.append(name)
        self._entry(key[-1])
        self._sha.update(_string(b"type") + _string(b"regular") + _string(b"contents"))
        self._sha.update(size.to_bytes(8, "little"))
        self._remaining = size
        self._padding = -size % 8
        self._last = key

    def update(self, chunk: bytes) -> None:
        """Feed the next bytes of the current file."""
        if self._remaining is None or len(chunk) > self._remaining:
            raise ValueError("more bytes than the file's size")
        self._sha.update(chunk)
        self._remaining -= len(chunk)

    def sri(self) -> str:
        """`sha256-<base64>` of the whole archive (ends it; feed nothing after)."""
        self._finish_file()
        self._close_folders(len(self._open))
        self._sha.update(_string(b")"))
        return SRI_PREFIX + base64.b64encode(self._sha.digest()).decode("ascii")

    def _entry(self, name: str) -> None:
        self._sha.update(
            _string(b"entry")
            + _string(b"(")
            + _string(b"name")
            + _string(_bytes(name))
            + _string(b"node")
            + _string(b"(")
        )

    def _finish_file(self) -> None:
        if self._remaining is None:
            return
        if self._remaining:
            raise ValueError(f"{self._remaining} bytes of {'/'.join(self._last or ())} missing")
        # The contents' padding, the file node's ")" and its entry's ")".
        self._sha.update(b"\0" * self._padding + _string(b")") + _string(b")"))
        self._remaining = None

    def _close_folders(self, count: int) -> None:
        for _ in range(count):
            self._open.pop()
            self._sha.update(_string(b")") + _string(b")"))


def nar_sri(files: dict[str, bytes]) -> str:
    """The SRI hash of a folder holding `files` (relative posix path -> bytes), all regular and
    not executable: what `nix-hash --type sha256` prints for it, as `sha256-<base64>`."""
    hasher = NarHasher()
    for parts in walk_order(files):
        data = files["/".join(parts)]
        hasher.begin_file(parts, len(data))
        hasher.update(data)
    return hasher.sri()
