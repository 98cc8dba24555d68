"""`hash` and `check-builds`: the digest and the metadata.json of each built variant.

kernel-builder's `hash` recomputes each build variant's digest (kernels-data's algorithm, here
digest.py) and writes it into the variant's metadata.json; its `check-builds` checks that each
metadata.json parses as kernels-data's `Metadata`. Here both work on the real folders directly
under the project's build/ that hold a metadata.json (a symlinked variant folder, or a symlink or
special file inside one, is refused: `upload` sends regular files only, so a digest covering one
would not match what is uploaded). `check-builds` also compares each digest with the files, as
the `kernels` loader does before it loads a variant.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from build2cmake.builds import digest, variant_folders
from build2cmake.ground.bounded import walk_files
from build2cmake.ground.errors import Build2CMakeError, printable
from build2cmake.ground.safefs import RECORD_LIMIT_BYTES, ProjectFolder

BUILD = "build"
METADATA = "metadata.json"
_WHY = "`hash` and `upload` read every file of it"


@dataclass(frozen=True)
class HashResult:
    """One variant `hash` looked at: how many files its digest covers, and whether its
    metadata.json changed."""

    variant: str
    files: int
    changed: bool


@dataclass(frozen=True)
class BuildCheck:
    """One variant `check-builds` looked at, and what is wrong with it (nothing when ok)."""

    variant: str
    problems: tuple[str, ...]


def variant_names(folder: ProjectFolder) -> list[str]:
    """The variant folders of build/: real folders holding a regular metadata.json (not
    build2cmake's own build/cmake* folders, nor hidden ones)."""
    names = []
    for name in folder.listdir(BUILD):
        if name.startswith((".", "cmake")):
            continue
        info = folder.lstat(f"{BUILD}/{name}")
        if info is None or not stat.S_ISDIR(info.st_mode):
            continue
        if folder.lstat(f"{BUILD}/{name}/{METADATA}") is not None:
            names.append(name)
    return names


def _variants(folder: ProjectFolder) -> list[str]:
    names = variant_names(folder)
    if not names:
        raise Build2CMakeError(
            f"{folder.path / BUILD}/: no build variant (a folder holding metadata.json); run "
            "`build2cmake build` first"
        )
    return names


def _metadata(folder: ProjectFolder, variant: str) -> dict[str, Any]:
    where = f"{BUILD}/{variant}/{METADATA}"
    raw = folder.read(where, RECORD_LIMIT_BYTES, METADATA)
    if raw is None:
        raise Build2CMakeError(f"{folder.path / where}: missing")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as error:
        raise Build2CMakeError(f"{folder.path / where}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise Build2CMakeError(f"{folder.path / where}: not a JSON object")
    return data


def file_hashes(folder: ProjectFolder, variant: str) -> dict[str, str]:
    """Relative path -> digest.file_hash of every regular file of build/<variant>/ (one file in
    memory at a time, each read without following a symlink)."""
    top = f"{BUILD}/{variant}"
    folder.check_real_tree(top, _WHY)
    hashes: dict[str, str] = {}
    root = folder.path / top
    for path in walk_files(root, f"{top}/"):
        relative = path.relative_to(root).as_posix()
        if not digest.is_hashed(relative):
            continue
        data = folder.read(
            PurePosixPath(top) / relative, variant_folders.LIBRARY_LIMIT_BYTES, "file"
        )
        if data is None:
            raise Build2CMakeError(f"{path}: disappeared while it was hashed")
        hashes[relative] = digest.file_hash(data)
    return hashes


def hash_variants(project_dir: Path) -> list[HashResult]:
    """kernel-builder's `hash`: each variant's digest recomputed into its metadata.json
    (atomically; unchanged when it is already right). A variant `build` made stays its own."""
    results = []
    with ProjectFolder(project_dir) as folder:
        variants = _variants(folder)  # build/ is a real folder from here on
        # The lock `build` takes on build/ while it installs a variant and its record.
        with ProjectFolder(project_dir / BUILD) as build_folder, build_folder.locked():
            owned, _ = variant_folders.owned_variants(folder)
            # A killed hash's temporary files (of the record's write, of a metadata.json's) go
            # first, as build's and clean's do: one in a variant would be hashed as its own.
            folder.remove_stale_temporaries([PurePosixPath(variant_folders.VARIANTS_RECORD)])
            for variant in variants:
                folder.remove_stale_temporaries([PurePosixPath(BUILD) / variant / METADATA])
                metadata = _metadata(folder, variant)
                hashes = file_hashes(folder, variant)
                new_digest = digest.digest_of(hashes)
                changed = metadata.get("digest") != new_digest
                if changed:
                    try:
                        text = json.dumps({**metadata, "digest": new_digest}, indent=2)
                    except (RecursionError, ValueError):
                        # Nested deeper than the encoder goes (Python 3.12's reads deeper).
                        raise Build2CMakeError(
                            f"{project_dir / BUILD / variant / METADATA}: nests too deeply to "
                            "be written back; it is no metadata.json build2cmake or "
                            "kernel-builder writes"
                        ) from None
                    content = (text + "\n").encode("utf-8")
                    variant_folders.rewrite_metadata(
                        folder, variant, content, owned=variant in owned
                    )
                elif variant in owned:
                    variant_folders.settle_metadata(folder, variant)
                results.append(HashResult(variant, len(hashes), changed))
    return results


def _kernels_metadata_problem(raw: bytes) -> str | None:
    """What the `kernels` loader's own metadata parser says of `raw` (None: it parses), or None
    when that parser is not installed."""
    with contextlib.suppress(ImportError, AttributeError):
        parser = importlib.import_module("kernels._rust").Metadata
        try:
            parser.from_bytes(raw)
        except ValueError as error:
            return f"kernels' metadata parser refuses it: {printable(str(error))[:300]}"
    return None


def _digest_problems(recorded: object, current: dict[str, object]) -> list[str]:
    if not isinstance(recorded, dict):
        return ["no digest (`build2cmake hash` writes it)"]
    if recorded.get("algorithm") != current["algorithm"]:
        return [f"digest algorithm {printable(repr(recorded.get('algorithm')))[:40]} is not sha256"]
    want = recorded.get("files")
    have = current["files"]
    assert isinstance(have, dict)
    if not isinstance(want, dict):
        return ["digest has no file list"]
    problems = [f"{printable(p)}: missing" for p in sorted(set(want) - set(have))]
    problems += [f"{printable(p)}: not in the digest" for p in sorted(set(have) - set(want))]
    problems += [
        f"{printable(p)}: does not match its digest"
        for p in sorted(set(have) & set(want))
        if have[p] != want[p]
    ]
    return problems


def check_builds(project_dir: Path) -> list[BuildCheck]:
    """kernel-builder's `check-builds`, and the loader's digest check: every variant's
    metadata.json parses (by kernels' own parser when it is installed) and its digest matches
    the files."""
    checks = []
    with ProjectFolder(project_dir) as folder:
        for variant in _variants(folder):
            problems: list[str] = []
            raw = folder.read(f"{BUILD}/{variant}/{METADATA}", RECORD_LIMIT_BYTES, METADATA)
            refused = _kernels_metadata_problem(raw or b"")
            if refused is not None:
                problems.append(refused)
            metadata = _metadata(folder, variant)
            current = digest.digest_of(file_hashes(folder, variant))
            problems += _digest_problems(metadata.get("digest"), current)
            checks.append(BuildCheck(variant, tuple(problems)))
    return checks


def project_folder(build_toml: Path) -> Path:
    if not build_toml.is_file():
        raise Build2CMakeError(
            f"{build_toml}: no such build.toml; name the project's folder or its build.toml"
        )
    return build_toml.parent
