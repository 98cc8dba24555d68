"""`clean`: remove what generate-torch wrote (per its manifest), the build folders and the
variants `build` made, and nothing else."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from build2cmake.builds.variant_folders import (
    VARIANTS_RECORD,
    owned_variants,
    read_record,
    remove_staging,
    retire_variants,
    write_record,
)
from build2cmake.config import read_bytes
from build2cmake.generate.fileset import MANIFEST_NAME, Manifest, current_bytes
from build2cmake.generate.project import BUILD_DIR_PREFIX, BUILD_FOLDER
from build2cmake.generate.render import METADATA_PROVIDER, METADATA_PROVIDER_FOLDER
from build2cmake.ground.errors import Build2CMakeError
from build2cmake.ground.safefs import ProjectFolder, checked_target

# The folders generate makes for files of its own alone: the metadata provider's folder and
# cmake/ above it (the static scripts). clean removes them when empty even after their files
# went; a folder that also holds the user's files (torch-ext/<package>/) is left alone.
GENERATED_FOLDERS = frozenset(
    {METADATA_PROVIDER_FOLDER, str(PurePosixPath(METADATA_PROVIDER_FOLDER).parent)}
)


@dataclass(frozen=True)
class CleanReport:
    """What clean removed (or would remove with --dry-run) and what it kept."""

    removed: tuple[str, ...]
    kept_edited: tuple[str, ...]
    warnings: tuple[str, ...] = ()


def clean(
    build_toml: Path, target_dir: Path | None = None, *, dry_run: bool = False, force: bool = False
) -> CleanReport:
    """Remove what generate-torch wrote (per its manifest) and the build folders, nothing else.

    A generated file the user edited since is kept (and listed) unless `force`. Only files
    generate writes are taken from the manifest; build folders come from our own rule.
    """
    target = checked_target(target_dir if target_dir is not None else build_toml.parent)
    # As for generate, build_toml must be a readable file: `clean DIR` or a mistyped name is
    # one error, not a clean of the folder around it. Its content may be anything (a project
    # whose build.toml no longer validates can still be cleaned).
    read_bytes(build_toml)
    with ProjectFolder(target) as folder, folder.locked():
        return _clean_locked(folder, dry_run=dry_run, force=force)


def build_folders(folder: ProjectFolder) -> list[str]:
    """The build/cmake* folders clean removes: real folders, never symlinks."""
    return [
        f"{BUILD_FOLDER}/{name}"
        for name in folder.listdir(BUILD_FOLDER)
        if name.startswith(BUILD_DIR_PREFIX) and folder.is_dir(f"{BUILD_FOLDER}/{name}")
    ]


def _clean_locked(folder: ProjectFolder, *, dry_run: bool, force: bool) -> CleanReport:
    manifest = Manifest.read(folder)
    if manifest is None:
        if folder.lstat(MANIFEST_NAME) is not None:
            raise Build2CMakeError(
                f"{folder.path / MANIFEST_NAME}: unreadable; clean deletes nothing without it. "
                "Run generate-torch again to rewrite it, then clean."
            )
        if not dry_run:
            # A generate killed before its first manifest was in place left at most that.
            folder.remove_stale_temporaries([PurePosixPath(MANIFEST_NAME)])
        return CleanReport((), ())
    files: list[str] = []
    kept: list[str] = []
    gone: list[str] = []
    for name in sorted(manifest.files):
        current = current_bytes(folder, name)
        if current is None:
            gone.append(name)  # gone, or replaced by a symlink or folder: not ours
            continue
        if force or manifest.is_ours(name, current):
            files.append(name)
        else:
            kept.append(name)
    folders = build_folders(folder)
    variants, record_warnings = owned_variants(folder)
    record, _ = read_record(folder)
    staging = [f"{BUILD_FOLDER}/{name}" for name in record.staging]
    records = [VARIANTS_RECORD] if folder.is_file(VARIANTS_RECORD) else []
    if _is_our_compile_commands_link(folder):
        files.append(COMPILE_COMMANDS)
    if not dry_run:
        # Records last: a clean killed part-way leaves the records of what is still there, and
        # the next clean finishes it. Folders first (what a killed build staged, the variants,
        # the build folders), then the generated files, then the variants record, the manifest.
        build_is_real = folder.is_dir(BUILD_FOLDER)  # never through a planted link
        if build_is_real and record.staging:
            remove_staging(folder, record)
            write_record(folder, record)
        if variants:
            retire_variants(folder, variants)
        for name in folders:
            folder.rmtree(name)
            folder.remove_empty_parents(name)
        if METADATA_PROVIDER in files and folder.is_dir(f"{METADATA_PROVIDER_FOLDER}/__pycache__"):
            # What Python cached of our provider, so that its folder goes too.
            folder.rmtree(f"{METADATA_PROVIDER_FOLDER}/__pycache__")
        # The temporary files a killed write of ours left beside them go too.
        ours = [*manifest.files, *files, MANIFEST_NAME]
        ours += [VARIANTS_RECORD] if build_is_real else []
        folder.remove_stale_temporaries([PurePosixPath(name) for name in ours])
        for name in [*files, *records]:
            folder.unlink(name)
            folder.remove_empty_parents(name)
        # A clean killed between a file's removal and its folder's leaves the folder empty and
        # its entry's file gone: the folders generate makes for its own files alone go now.
        for name in gone:
            if str(PurePosixPath(name).parent) in GENERATED_FOLDERS:
                folder.remove_empty_parents(name)
        # A manifest with entries we ignored stays, for the user to look at.
        if not kept and not manifest.ignored:
            folder.unlink(MANIFEST_NAME)
        # build/ itself once nothing is left in it (a clean killed part-way may leave it empty).
        folder.remove_empty_parents(PurePosixPath(BUILD_FOLDER) / MANIFEST_NAME)
    files += records
    variant_folders = [f"{BUILD_FOLDER}/{v}" for v in variants]
    removed = sorted(files) + sorted(f + "/" for f in [*folders, *variant_folders, *staging])
    return CleanReport(tuple(removed), tuple(kept), (*manifest.ignored, *record_warnings))


COMPILE_COMMANDS = "compile_commands.json"


def _is_our_compile_commands_link(folder: ProjectFolder) -> bool:
    """Whether compile_commands.json is the link a generated build made: a symlink to
    build/cmake*/compile_commands.json of this project (a link of the user's is kept)."""
    info = folder.lstat(COMPILE_COMMANDS)
    if info is None or not stat.S_ISLNK(info.st_mode):
        return False
    try:
        destination = os.readlink(COMPILE_COMMANDS, dir_fd=folder.fd)
    except OSError:
        return False
    # CMake writes the link with the build folder's absolute path, resolved or as given.
    for root in {str(folder.path.resolve()), os.path.abspath(folder.path)}:
        target = os.path.normpath(os.path.join(root, destination))
        if target.startswith(root + os.sep):
            parts = PurePosixPath(target[len(root) + 1 :]).parts
            if (
                len(parts) == 3
                and parts[0] == BUILD_FOLDER
                and parts[1].startswith(BUILD_DIR_PREFIX)
                and parts[2] == COMPILE_COMMANDS
            ):
                return True
    return False
