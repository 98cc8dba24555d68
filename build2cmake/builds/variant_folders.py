"""build/<variant>/ folders: a compiled variant laid out in one rename, and the record of the
folders `build` made.

Variant folders `build` made are listed in build/.build2cmake-variants.json; it replaces only
those (and `clean` removes only those), never a variant folder built by something else. The
record is written before each step it describes, so a killed build or hash leaves nothing the
next one has to guess about.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from build2cmake.builds import digest
from build2cmake.config.model import Project
from build2cmake.generate.fileset import content_hash
from build2cmake.ground.errors import Build2CMakeError, WriteRefusedError
from build2cmake.ground.safefs import RECORD_LIMIT_BYTES, ProjectFolder, read_regular_file

VARIANTS_RECORD = "build/.build2cmake-variants.json"


# A variant folder name as kernels spells them (torch213-cxx11-cpu-x86_64-linux,
# torch-universal): one path component, never hidden, never `.`/`..`.
_VARIANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}", re.ASCII)


_HASH = re.compile(r"sha256:[0-9a-f]{64}", re.ASCII)


# Python files copied into a variant and the extension: bounded so a planted device or huge
# file cannot stall the copy.
PACKAGE_FILE_LIMIT_BYTES = 64 << 20


LIBRARY_LIMIT_BYTES = 4 << 30


@dataclass(frozen=True)
class BuildReport:
    """Where `build` put the kernel and what it says about it."""

    variant: str
    path: Path
    metadata: dict[str, object]


@dataclass
class VariantsRecord:
    """build/.build2cmake-variants.json: the build/<variant>/ folders `build` made (by the hash of
    their metadata.json) and the staging folders a build is filling.

    It is written before each step it describes (intent first), so that wherever a build is
    killed, the next build or clean knows every folder it may replace or remove, and guesses
    none: a staging folder is recorded before it is made; a variant being replaced lists both
    the old hash and the new one (either may be in place) until the swap is done.
    """

    variants: dict[str, tuple[str, ...]] = field(default_factory=dict)
    staging: list[str] = field(default_factory=list)

    def to_bytes(self) -> bytes:
        """The record as written (sorted: identical records are identical bytes)."""
        data = {
            "format": _RECORD_FORMAT,
            "variants": {name: list(hashes) for name, hashes in sorted(self.variants.items())},
            "staging": sorted(self.staging),
        }
        return (json.dumps(data, indent=2) + "\n").encode("utf-8")


_RECORD_FORMAT = 2


# `.<variant>.<8 hex digits>`: the staging folders build names, and records before making them.
_STAGING_NAME = re.compile(r"\.[A-Za-z0-9][A-Za-z0-9._+-]{0,127}\.[0-9a-f]{8}", re.ASCII)


def read_record(folder: ProjectFolder) -> tuple[VariantsRecord, list[str]]:
    """The variants record, and a warning for each entry that was ignored (not a plain variant
    or staging name, or no sha256 hash). The record is the clone's too: nothing in it is used
    unchecked. (A record of build2cmake before 2026-11-28 maps names to one hash.)"""
    try:
        raw = folder.read(VARIANTS_RECORD, RECORD_LIMIT_BYTES, "variants record")
    except Build2CMakeError as error:
        return VariantsRecord(), [f"ignoring the variants record: {error}"]
    if raw is None:
        return VariantsRecord(), []
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return VariantsRecord(), [f"{VARIANTS_RECORD}: ignoring it: not JSON"]
    if not isinstance(data, dict):
        return VariantsRecord(), [f"{VARIANTS_RECORD}: ignoring it: not a JSON object"]
    record = VariantsRecord()
    warnings: list[str] = []
    structured = data.get("format") == _RECORD_FORMAT
    entries = data.get("variants") if structured else data
    for name, recorded in (entries if isinstance(entries, dict) else {}).items():
        hashes = recorded if isinstance(recorded, list) else [recorded]
        if not _VARIANT_NAME.fullmatch(name) or name.startswith("cmake"):
            warnings.append(f"{VARIANTS_RECORD}: ignoring {name!r}: not a variant folder name")
        elif (
            not hashes
            or len(hashes) > 2
            or not all(isinstance(h, str) and _HASH.fullmatch(h) for h in hashes)
        ):
            warnings.append(f"{VARIANTS_RECORD}: ignoring {name!r}: hash is not sha256:<hex>")
        else:
            record.variants[name] = tuple(hashes)
    staging = data.get("staging", []) if structured else []
    for name in staging if isinstance(staging, list) else []:
        if isinstance(name, str) and _STAGING_NAME.fullmatch(name):
            record.staging.append(name)
        else:
            warnings.append(f"{VARIANTS_RECORD}: ignoring staging {name!r}: not a staging name")
    return record, warnings


def owned_variants(folder: ProjectFolder) -> tuple[list[str], list[str]]:
    """Variant folders under build/ that `build` made and nobody replaced since (real folders
    whose metadata.json is a regular file with a recorded hash), and read warnings."""
    record, warnings = read_record(folder)
    owned = []
    for name, recorded in sorted(record.variants.items()):
        if not folder.is_dir(f"build/{name}"):
            continue
        metadata = f"build/{name}/metadata.json"
        if not folder.is_file(metadata):
            continue
        with contextlib.suppress(Build2CMakeError):
            data = folder.read(metadata, RECORD_LIMIT_BYTES, "metadata.json")
            if data is not None and content_hash(data) in recorded:
                owned.append(name)
    return owned, warnings


def remove_staging(folder: ProjectFolder, record: VariantsRecord) -> None:
    """Remove the staging folders `record` names (what a killed build left: real folders only,
    never what a link leads to) and drop them from it; the caller writes the record."""
    for name in record.staging:
        path = f"build/{name}"
        if folder.is_dir(path):
            folder.rmtree(path)
        elif folder.lstat(path) is not None:
            folder.unlink(path)
    record.staging.clear()


def retire_variants(folder: ProjectFolder, names: Sequence[str]) -> None:
    """Remove the variants `names` (owned by build) so that a kill at any point leaves each one
    either whole and recorded or recorded for removal: each is renamed to a recorded staging
    name in one step, then the staging folders are removed."""
    record, _ = read_record(folder)
    for name in names:
        staging = _new_staging(folder, record, name)  # recorded, then made (empty)
        folder.rename(PurePosixPath("build") / name, staging)  # over the empty folder
        record.variants.pop(name, None)
        write_record(folder, record)
    remove_staging(folder, record)
    write_record(folder, record)


def rewrite_metadata(folder: ProjectFolder, variant: str, content: bytes, *, owned: bool) -> None:
    """Replace build/<variant>/metadata.json with `content` (kernel-builder's `hash`). For a
    variant `build` made, the record lists the old hash and the new one while the file is
    replaced, then the new one alone: a kill at any point leaves it recorded as build's."""
    record, _ = read_record(folder)
    if owned:
        # The hash of what is there now (owned: it is one the record lists), and the new one.
        now = folder.read(f"build/{variant}/metadata.json", RECORD_LIMIT_BYTES, "metadata.json")
        old = (content_hash(now),) if now is not None else ()
        record.variants[variant] = (*old, content_hash(content))
        write_record(folder, record)
    folder.write_atomic(f"build/{variant}/metadata.json", content)
    if owned:
        record.variants[variant] = (content_hash(content),)
        write_record(folder, record)


def settle_metadata(folder: ProjectFolder, variant: str) -> None:
    """Record only the hash of an owned variant's metadata.json as it is now: what a
    `rewrite_metadata` killed after its write left listing the old hash too."""
    record, _ = read_record(folder)
    now = folder.read(f"build/{variant}/metadata.json", RECORD_LIMIT_BYTES, "metadata.json")
    if now is not None and record.variants.get(variant, ()) != (content_hash(now),):
        record.variants[variant] = (content_hash(now),)
        write_record(folder, record)


def write_record(folder: ProjectFolder, record: VariantsRecord) -> None:
    """Write `record` (atomically), or remove the file when it records nothing."""
    if not record.variants and not record.staging:
        folder.unlink(VARIANTS_RECORD)
        return
    folder.write_atomic(VARIANTS_RECORD, record.to_bytes())


def _python_files(folder: ProjectFolder, package: PurePosixPath, pyext: Sequence[str]) -> list[str]:
    """The package's Python files (relative to it), walking real folders only."""
    suffixes = tuple("." + ext for ext in pyext)
    found: list[str] = []
    pending = [PurePosixPath()]
    while pending:
        sub = pending.pop()
        for name in folder.listdir(package / sub if sub.parts else package):
            if name == "__pycache__":
                continue
            rel = sub / name
            info = folder.lstat(package / rel)
            if info is None:
                continue
            if stat.S_ISDIR(info.st_mode):
                pending.append(rel)
            elif name.endswith(suffixes) and (
                stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)
            ):
                found.append(str(rel))
    return sorted(found)


@dataclass(frozen=True)
class CompiledVariant:
    """A compiled (or universal) kernel, ready to be laid out as build/<variant>/."""

    variant: str
    library: Path | None
    metadata: dict[str, object]


def check_python_package(project: Project, project_dir: Path) -> None:
    package_dir = project_dir / project.python_source_dir / project.package_name
    if not (package_dir / "__init__.py").is_file():
        raise Build2CMakeError(
            f"{package_dir / '__init__.py'}: missing; the kernel's Python package lives in "
            f"{project.python_source_dir}/{project.package_name}/ and needs an __init__.py"
        )


def install_variant(
    project: Project, project_dir: Path, compiled: CompiledVariant, *, force: bool = False
) -> BuildReport:
    """Write build/<variant>/ (Python files, extension, metadata.json) in one rename.

    Every write and delete goes through a ProjectFolder, so nothing outside the project is
    touched whatever symlinks the project holds; package files that are symlinks leading out of
    the project are refused (the variant is what gets uploaded).
    """
    check_python_package(project, project_dir)
    package = PurePosixPath(project.python_source_dir) / project.package_name
    pyext = project.pyext
    variant, library, metadata = compiled.variant, compiled.library, compiled.metadata
    if not _VARIANT_NAME.fullmatch(variant):
        raise Build2CMakeError(f"{variant!r}: not a usable variant folder name")

    build_root = PurePosixPath("build")
    destination = build_root / variant
    with ProjectFolder(project_dir) as folder:
        folder.makedirs(build_root)
        # Variants built at once (build --variants --concurrent) take turns on the record.
        with ProjectFolder(project_dir / "build") as build_folder, build_folder.locked():
            record, _ = read_record(folder)
            owned, _ = owned_variants(folder)
            if folder.lstat(destination) is not None and variant not in owned and not force:
                raise WriteRefusedError(
                    f"{project_dir / str(destination)}: exists and was not made by build2cmake "
                    "build (or was changed since); move it away, or pass --force to replace it"
                )
            # What a killed build left is removed by its record, before anything else (and a
            # temporary file of the record's own write).
            folder.remove_stale_temporaries([PurePosixPath(VARIANTS_RECORD)])
            if record.staging:
                remove_staging(folder, record)
                write_record(folder, record)
            staging = _new_staging(folder, record, variant)
            try:
                metadata_bytes = _fill_variant(
                    folder, project_dir, staging, package, pyext, library, metadata
                )
            except Exception:
                # A refusal or a failed read: nothing of it stays (a kill is the record's).
                with contextlib.suppress(Build2CMakeError):
                    remove_staging(folder, record)
                    write_record(folder, record)
                raise
            metadata = json.loads(metadata_bytes)
            # Intent: the old variant (if ours) or the new one may be in place from here on.
            new_hash = content_hash(metadata_bytes)
            # The hash of the metadata.json in place now (owned: one the record lists), not the
            # record's last: after two kills in a row that may be of a variant never swapped in.
            old_hashes = _metadata_hash(folder, destination) if variant in owned else ()
            record.variants[variant] = (*old_hashes, new_hash)
            write_record(folder, record)
            _swap_into_place(folder, record, staging, destination)
            record.variants[variant] = (new_hash,)
            write_record(folder, record)
    return BuildReport(variant=variant, path=project_dir / str(destination), metadata=metadata)


def _fill_variant(
    folder: ProjectFolder,
    project_dir: Path,
    staging: PurePosixPath,
    package: PurePosixPath,
    pyext: tuple[str, ...],
    library: Path | None,
    metadata: dict[str, object],
) -> bytes:
    """Write the variant's files into `staging`: the package's Python files, the extension, and
    metadata.json with the digest of exactly those files. Returns metadata.json's bytes."""
    shipped: dict[str, bytes] = {}  # relative path -> bytes: what the digest covers
    for relative in _python_files(folder, package, pyext):
        data = read_regular_file(
            project_dir / str(package / relative),
            PACKAGE_FILE_LIMIT_BYTES,
            "package file",
            root=project_dir,
        )
        folder.write_atomic(staging / relative, data)
        shipped[relative] = data
    if library is not None:
        binary = read_regular_file(library, LIBRARY_LIMIT_BYTES, "extension")
        folder.write_atomic(staging / library.name, binary, mode=0o755)
        shipped[library.name] = binary
    metadata = {**metadata, "digest": digest.variant_digest(shipped)}
    metadata_bytes = (json.dumps(metadata, indent=2) + "\n").encode("utf-8")
    folder.write_atomic(staging / "metadata.json", metadata_bytes)
    return metadata_bytes


def _metadata_hash(folder: ProjectFolder, variant: PurePosixPath) -> tuple[str, ...]:
    """The hash of `variant`'s metadata.json as it is now (none when it cannot be read)."""
    with contextlib.suppress(Build2CMakeError):
        data = folder.read(variant / "metadata.json", RECORD_LIMIT_BYTES, "metadata.json")
        if data is not None:
            return (content_hash(data),)
    return ()


def _new_staging(folder: ProjectFolder, record: VariantsRecord, variant: str) -> PurePosixPath:
    """A new, empty build/.<variant>.<hex>/, recorded before it is made."""
    for _ in range(100):
        name = f".{variant}.{secrets.token_hex(4)}"
        if folder.lstat(f"build/{name}") is not None:
            continue
        record.staging.append(name)
        write_record(folder, record)
        if folder.make_dir(f"build/{name}"):
            return PurePosixPath("build") / name
        record.staging.remove(name)
    raise Build2CMakeError(f"{folder.path / 'build'}: cannot create a staging folder")


def _swap_into_place(
    folder: ProjectFolder,
    record: VariantsRecord,
    staging: PurePosixPath,
    destination: PurePosixPath,
) -> None:
    """Put the filled `staging` folder at `destination` in one step (the old variant, if any,
    stays visible until the new one is), then remove the old one and its record entry."""
    if folder.lstat(destination) is None:
        folder.rename(staging, destination)
    elif not folder.exchange(staging, destination):
        # No RENAME_EXCHANGE here: the old variant goes to a recorded staging name first.
        aside = _new_staging(folder, record, destination.name)
        folder.rename(destination, aside)  # over the empty folder just made
        folder.rename(staging, destination)
        staging = aside
    # `staging` now holds the old variant (or nothing): recorded, so removed even if killed here.
    remove_any(folder, staging)
    record.staging.remove(staging.name)


def remove_any(folder: ProjectFolder, name: PurePosixPath) -> None:
    """Remove `name` whatever it is (a folder's tree, or a file or symlink itself)."""
    info = folder.lstat(name)
    if info is None:
        return
    if stat.S_ISDIR(info.st_mode):
        folder.rmtree(name)
    else:
        folder.unlink(name)
