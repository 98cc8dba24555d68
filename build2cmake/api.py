"""The library behind the CLI: validate, generate-torch, clean and update-build."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import tomlkit

from build2cmake import builder
from build2cmake.builder import BuildReport
from build2cmake.config import load_project, read_document
from build2cmake.errors import Build2CMakeError, BuildConfigError
from build2cmake.fileset import (
    MANIFEST_NAME,
    Manifest,
    WriteReport,
    content_hash,
    current_bytes,
    write_fileset_locked,
)
from build2cmake.model import BUILDABLE_BACKENDS, Project
from build2cmake.render import BUILD_DIR, RenderOptions, extension_name, render_project
from build2cmake.safefs import (
    BUILD_TOML_LIMIT_BYTES,
    ProjectFolder,
    checked_target,
    read_regular_file,
)

# What clean removes besides the generated files: real folders (not symlinks) directly under
# build/ whose name starts with `cmake`: the generated pyproject's build folder, its variants
# (e.g. `-C build-dir=build/cmake-rocm`) and build's own build/cmake-variant-<backend>.
BUILD_FOLDER, BUILD_DIR_PREFIX = BUILD_DIR.split("/")

# re.ASCII: \w and friends would accept non-ASCII letters; fullmatch: `$` accepts a trailing
# newline.
_OPS_ID = re.compile(r"[A-Za-z0-9_]{1,32}", re.ASCII)
# A CMake cache entry NAME[:TYPE]=VALUE, as `cmake -D` takes it.
_DEFINE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=.*", re.ASCII | re.DOTALL)


def validate(build_toml: Path) -> Project:
    """Check build.toml and everything it points to; raise BuildConfigError on the first problem."""
    return load_project(build_toml)


def default_ops_id(build_toml: Path) -> str:
    """The ops id used without --ops-id: derived from build.toml's bytes, so it is reproducible."""
    data = read_regular_file(build_toml, BUILD_TOML_LIMIT_BYTES, "build.toml")
    return hashlib.sha256(data).hexdigest()[:10]


def check_ops_id(ops_id: str | None) -> None:
    """Refuse an --ops-id that is not 1 to 32 ASCII letters, digits or '_'."""
    if ops_id is not None and not _OPS_ID.fullmatch(ops_id):
        raise Build2CMakeError(
            f"--ops-id {ops_id!r}: use 1 to 32 letters, digits or '_' (it becomes part of the "
            "torch op namespace)"
        )


def check_build_arguments(defines: tuple[str, ...], jobs: int | None) -> None:
    """Refuse bad -D and -j arguments before anything is written."""
    for define in defines:
        if not _DEFINE.fullmatch(define) or "\0" in define:
            raise Build2CMakeError(
                f"-D {define!r}: use -D NAME=VALUE with NAME of ASCII letters, digits and '_', "
                "e.g. -D BUILD2CMAKE_ROCM_ARCHS=gfx90a"
            )
    if jobs is not None and jobs < 1:
        raise Build2CMakeError(f"-j {jobs}: the number of parallel jobs must be 1 or more")


def _checked_request(
    project: Project, build_toml: Path, backend: str | None, ops_id: str | None
) -> None:
    unsupported = [b for b in project.backends if b not in BUILDABLE_BACKENDS]
    if unsupported:
        raise BuildConfigError(
            build_toml,
            "[general].backends",
            f"{unsupported[0]!r} is not supported by this build2cmake "
            f"(it builds {', '.join(BUILDABLE_BACKENDS)}); remove it to build the others",
        )
    if backend is not None and backend not in project.backends:
        raise Build2CMakeError(
            f"--backend {backend}: build.toml declares only {', '.join(project.backends)}"
        )
    check_ops_id(ops_id)


def generate_torch(
    build_toml: Path,
    target_dir: Path | None = None,
    *,
    force: bool = False,
    backend: str | None = None,
    ops_id: str | None = None,
) -> WriteReport:
    """Write the CMake build, pyproject.toml and torch glue for build.toml into target_dir."""
    project = load_project(build_toml)
    target = checked_target(target_dir if target_dir is not None else build_toml.parent)
    _checked_request(project, build_toml, backend, ops_id)
    with ProjectFolder(target) as folder, folder.locked():
        return _generate_locked(project, build_toml, folder, force, backend, ops_id)


def _generate_locked(
    project: Project,
    build_toml: Path,
    folder: ProjectFolder,
    force: bool,
    backend: str | None,
    ops_id: str | None,
) -> WriteReport:
    prefix = os.path.relpath(build_toml.parent.resolve(), folder.path.resolve())
    options = RenderOptions(
        ops_id=ops_id or default_ops_id(build_toml),
        default_backend=backend or "auto",
        build_toml_name=build_toml.name,
        source_prefix="" if prefix == "." else prefix.replace(os.sep, "/") + "/",
    )
    fileset = render_project(project, options)
    # pip (scikit-build-core) builds in build/cmake, following symlinks: a planted `build` or
    # `build/cmake` link would send CMake's writes out of the project.
    for name in (BUILD_FOLDER, BUILD_DIR):
        info = folder.lstat(name)
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise Build2CMakeError(
                f"{folder.path / name}: is a symlink; the build writes there, so it must be a "
                "real folder inside the project (remove the link)"
            )
    return write_fileset_locked(fileset, folder, force=force)


def build(
    build_toml: Path,
    *,
    backend: str | None = None,
    ops_id: str | None = None,
    defines: tuple[str, ...] = (),
    jobs: int | None = None,
    force: bool = False,
) -> tuple[WriteReport, BuildReport]:
    """generate-torch in the project folder, then compile and write build/<variant>/.

    All arguments are checked before anything is written, and the project folder stays locked
    from generate to the last write, so a concurrent clean cannot delete the build folder
    CMake is compiling in.
    """
    check_build_arguments(defines, jobs)
    project = load_project(build_toml)
    target = checked_target(build_toml.parent)
    _checked_request(project, build_toml, backend, ops_id)
    chosen_id = ops_id or default_ops_id(build_toml)
    names = [*BUILDABLE_BACKENDS, "universal"]
    extension_for = {
        b: extension_name(project, b, chosen_id)
        for b in names
        if b in project.backends or (b == "universal" and project.universal)
    }
    with ProjectFolder(target) as folder, folder.locked():
        report = _generate_locked(project, build_toml, folder, force, backend, ops_id)
        built = builder.build(
            project,
            folder,
            backend=backend,
            extension_for=extension_for,
            defines=defines,
            jobs=jobs,
            force=force,
        )
    return report, built


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
        return CleanReport((), ())
    files: list[str] = []
    kept: list[str] = []
    for name, recorded in sorted(manifest.files.items()):
        current = current_bytes(folder, name)
        if current is None:
            continue  # gone, or replaced by a symlink or folder: not ours
        if force or content_hash(current) == recorded:
            files.append(name)
        else:
            kept.append(name)
    folders = build_folders(folder)
    variants, record_warnings = builder.owned_variants(folder)
    folders.extend(f"{BUILD_FOLDER}/{v}" for v in variants if f"{BUILD_FOLDER}/{v}" not in folders)
    if folder.is_file(builder.VARIANTS_RECORD):
        files.append(builder.VARIANTS_RECORD)
    if _is_our_compile_commands_link(folder):
        files.append(COMPILE_COMMANDS)
    if not dry_run:
        for name in files:
            folder.unlink(name)
            folder.remove_empty_parents(name)
        for name in folders:
            folder.rmtree(name)
            folder.remove_empty_parents(name)
        # A manifest with entries we ignored stays, for the user to look at.
        if not kept and not manifest.ignored:
            folder.unlink(MANIFEST_NAME)
    removed = sorted(files) + sorted(f + "/" for f in folders)
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


def update_build(build_toml: Path) -> bool:
    """Rewrite an older-format build.toml in the current format, keeping comments.

    Returns False when the file is already current. The older format has no
    `[general].backends`; the current one lists them.
    """
    project = load_project(build_toml)
    if not project.backends_inferred:
        return False
    document = read_document(build_toml)
    general = document["general"]
    assert isinstance(general, dict)
    backends = tomlkit.array()
    backends.extend(project.backends)
    general["backends"] = backends
    if general.get("universal") is False:
        # The current format writes universal only for universal kernels.
        del general["universal"]
    text = tomlkit.dumps(document)
    folder_path = checked_target(build_toml.parent)
    with ProjectFolder(folder_path) as folder, folder.locked():
        info = folder.lstat(build_toml.name)
        if info is None or not stat.S_ISREG(info.st_mode):
            raise Build2CMakeError(
                f"{build_toml}: update-build rewrites only a regular file, not a symlink"
            )
        # write_atomic never writes through a planted temporary file or symlink.
        folder.write_atomic(build_toml.name, text.encode("utf-8"), mode=info.st_mode & 0o777)
    return True
