"""The `digest` of a build variant's metadata.json, as the Hugging Face tooling computes it.

`kernels` (kernels-data's `Digest::hash_variant`) checks a downloaded variant against it: one
entry per shipped file, its path relative to the variant folder with '/' separators, mapped to
the base64 (standard alphabet, padded) SHA-256 of its bytes. Left out: the variant's own
metadata.json and metadata.json.sigstore (only at the top: the digest lives in the first and the
second signs it), anything under a `__pycache__` folder and any `*.pyc` file (the interpreter
writes those next to a loaded kernel). Entries are sorted by path; JSON does not care, but our
output is deterministic.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from pathlib import PurePosixPath

ALGORITHM = "sha256"
# Top-level files the digest cannot cover: metadata.json holds it, the .sigstore bundle signs it.
_UNHASHED_TOP_LEVEL = frozenset({"metadata.json", "metadata.json.sigstore"})


def is_hashed(relative: str) -> bool:
    """Whether the file at `relative` (inside the variant folder) is one the digest covers."""
    path = PurePosixPath(relative)
    if len(path.parts) == 1 and path.name in _UNHASHED_TOP_LEVEL:
        return False
    return "__pycache__" not in path.parts and path.suffix != ".pyc"


def _lossy(name: str) -> str:
    # Rust's to_string_lossy: bytes that are not UTF-8 (surrogate escapes here) become U+FFFD.
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def file_hash(content: bytes) -> str:
    """Base64 of the SHA-256 of `content`, as a digest entry holds it."""
    return base64.b64encode(hashlib.sha256(content).digest()).decode("ascii")


def variant_digest(files: Mapping[str, bytes]) -> dict[str, object]:
    """The `digest` value for a variant holding `files` (relative posix path -> bytes)."""
    return digest_of({rel: file_hash(data) for rel, data in files.items()})


def digest_of(hashes: Mapping[str, str]) -> dict[str, object]:
    """The `digest` value for a variant whose files have `hashes` (relative posix path ->
    file_hash of its bytes): the files the digest leaves out dropped, names as Rust shows them,
    sorted."""
    entries = {_lossy(rel): value for rel, value in hashes.items() if is_hashed(rel)}
    return {"algorithm": ALGORITHM, "files": dict(sorted(entries.items()))}
