"""`generate-torch`: the ops id, the checks before anything is written, and the write of the
generated CMake project, pyproject.toml and torch glue into the project folder."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from build2cmake.config import load_project
from build2cmake.config.model import Project
from build2cmake.generate.fileset import Manifest, WriteReport, write_fileset_locked
from build2cmake.generate.render import (
    BUILD_DIR,
    METADATA_PROVIDER,
    METADATA_PROVIDER_FOLDER,
    RenderOptions,
    render_project,
)
from build2cmake.ground.errors import Build2CMakeError, BuildConfigError
from build2cmake.ground.safefs import (
    BUILD_TOML_LIMIT_BYTES,
    ProjectFolder,
    checked_target,
    is_temporary_name,
    read_regular_file,
)

# What clean removes besides the generated files: real folders (not symlinks) directly under
# build/ whose name starts with `cmake`: the generated pyproject's build folder, its variants
# (e.g. `-C build-dir=build/cmake-rocm`) and build's own build/cmake-variant-<backend>.
BUILD_FOLDER, BUILD_DIR_PREFIX = BUILD_DIR.split("/")
# Who writes into build folders, following symlinks (for the error refusing one).
BUILD_FOLDER_WRITERS = "CMake, Ninja and the compilers write there"

# re.ASCII: \w and friends would accept non-ASCII letters; fullmatch: `$` accepts a trailing
# newline.
_OPS_ID = re.compile(r"[A-Za-z0-9_]{1,32}", re.ASCII)

# What the project and target folders' paths may not hold: the generated CMake lists sources
# and CMAKE_MODULE_PATH entries under them, and CMake lists split at ';', join elements at an
# unbalanced '[' or ']', and take '\\' as an escape; CMake drops a newline that starts a bracket
# argument, and no kernel project's folder has a newline or other control character.
_UNSAFE_FOLDER_CHARS = re.compile(r"[;\[\]\\\x00-\x1f\x7f]")


def default_ops_id(build_toml: Path, project: Project | None = None) -> str:
    """The ops id used without --ops-id: 10 hex digits of a SHA-256 over everything compiled.

    That is build.toml and every file it lists ([torch] and kernel `src`), plus the C/C++/CUDA/
    HIP files under the folders it lists in `include` (headers the sources include). Two
    versions of a kernel that differ in any of them get different extensions and op
    namespaces, so they load side by side; the same files give the same id on any machine
    (paths are hashed relative to the project, in sorted order).
    """
    project = project or load_project(build_toml)
    data = read_regular_file(build_toml, BUILD_TOML_LIMIT_BYTES, "build.toml")
    digest = hashlib.sha256(b"build.toml\0" + data)
    for relative, path in _compiled_files(build_toml.parent, project):
        # Bounded, regular files only: a FIFO or device planted as a source must not hang this.
        content = read_regular_file(
            path, _SOURCE_LIMIT_BYTES, "source file", root=build_toml.parent
        )
        # fsencode: a name that is not UTF-8 hashes as its bytes (UTF-8 names as before).
        digest.update(b"\0" + os.fsencode(relative) + f"\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()[:10]


_SOURCE_LIMIT_BYTES = 64 << 20

# What the compilers read from an `include` folder; other files there (data, docs, build
# outputs) do not change the extension.
_COMPILED_SUFFIXES = frozenset(
    ".h .hh .hpp .hxx .cuh .inc .inl .ipp .tcc .c .cc .cpp .cxx .cu .hip".split()  # noqa: SIM905
)

# Bounds of the walk over an include folder: real include trees nest a few levels and hold
# hundreds of files; a clone may ship one thousands of levels deep or with millions of entries.
INCLUDE_DEPTH_LIMIT = 32

INCLUDE_ENTRY_LIMIT = 200_000

# Folders whose files no compile reads as the kernel's headers (and that may be huge).
_UNHASHED_FOLDERS = frozenset({"build", ".git", "__pycache__"})


def _include_folder_files(top: Path) -> list[Path]:
    """Every entry under folder `top` that is not a folder (files, and symlinks to check by
    the caller), without entering symlinked folders or the folders of _UNHASHED_FOLDERS.
    Iterative, bounded in depth and entries; a folder that cannot be listed is an error."""
    found: list[Path] = []
    pending = [(top, 0)] if top.is_dir() else []
    seen = 0
    while pending:
        folder, depth = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as e:
            raise Build2CMakeError(
                f"{folder}: cannot list this include folder ({e.strerror or e})"
            ) from None
        seen += len(entries)
        if seen > INCLUDE_ENTRY_LIMIT:
            raise Build2CMakeError(
                f"{top}: this include folder holds more than "
                f"{INCLUDE_ENTRY_LIMIT} entries; list a folder of headers in `include`"
            )
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name in _UNHASHED_FOLDERS:
                    continue
                if depth + 1 > INCLUDE_DEPTH_LIMIT:
                    raise Build2CMakeError(
                        f"{entry.path}: nests more than {INCLUDE_DEPTH_LIMIT} folders "
                        "below the include folder that holds it; list a shallower folder"
                    )
                pending.append((Path(entry.path), depth + 1))
            else:
                found.append(Path(entry.path))
    return sorted(found)


def _compiled_files(project_dir: Path, project: Project) -> list[tuple[str, Path]]:
    """(path relative to the project, path) of every file the ops id covers, sorted."""
    root = project_dir.resolve()
    sources: list[PurePosixPath] = []
    includes: list[PurePosixPath] = []
    if project.torch is not None:
        sources += project.torch.sources
        includes += project.torch.includes
    if project.tvm_ffi is not None:
        sources += project.tvm_ffi.sources
        includes += project.tvm_ffi.includes
    for kernel in project.kernels:
        sources += kernel.sources
        includes += kernel.includes
    # Files generate-torch wrote (registration.h, ...) follow from build.toml and the ops id.
    with ProjectFolder(project_dir) as project_folder:
        manifest = Manifest.read(project_folder)
    generated = set(manifest.files) if manifest is not None else set()
    found: dict[str, Path] = {}
    for source in sources:
        found[source.as_posix()] = project_dir / source
    for include in includes:
        for path in _include_folder_files(project_dir / include):
            relative = path.relative_to(project_dir)
            if (
                path.suffix.lower() in _COMPILED_SUFFIXES
                and relative.as_posix() not in generated
                and not {"build", ".git", "__pycache__"} & set(relative.parts)
                and path.is_file()
                # A symlink that leaves the project is not read (the compile would read it,
                # but its target is not part of the kernel's sources).
                and path.resolve().is_relative_to(root)
            ):
                found[relative.as_posix()] = path
    return sorted((k, v) for k, v in found.items() if k not in generated)


def check_ops_id(ops_id: str | None) -> None:
    """Refuse an --ops-id that is not 1 to 32 ASCII letters, digits or '_'."""
    if ops_id is not None and not _OPS_ID.fullmatch(ops_id):
        raise Build2CMakeError(
            f"--ops-id {ops_id!r}: use 1 to 32 letters, digits or '_' (it becomes part of the "
            "torch op namespace)"
        )


@dataclass(frozen=True)
class GenerateReport:
    """What generate-torch wrote, and what it left out of the build and why."""

    write: WriteReport
    # Declared backends this build2cmake does not build (metal, xpu, ...).
    skipped_backends: tuple[str, ...]
    warnings: tuple[str, ...]

    @property
    def written(self) -> tuple[str, ...]:
        return self.write.written

    @property
    def unchanged(self) -> tuple[str, ...]:
        return self.write.unchanged

    @property
    def removed(self) -> tuple[str, ...]:
        return self.write.removed


def generate_torch(
    build_toml: Path,
    target_dir: Path | None = None,
    *,
    force: bool = False,
    backend: str | None = None,
    ops_id: str | None = None,
) -> GenerateReport:
    """Write the CMake build, pyproject.toml and torch glue for build.toml into target_dir.

    Backends build.toml declares but this build2cmake cannot build are left out (and named in
    the report); a project left with none is refused, unless it compiles nothing (noarch).
    """
    project = load_project(build_toml)
    target = checked_target(target_dir if target_dir is not None else build_toml.parent)
    checked_request(project, build_toml, backend, ops_id)
    with ProjectFolder(target) as folder, folder.locked():
        return generate_locked(project, build_toml, folder, force, backend, ops_id)


def checked_request(
    project: Project, build_toml: Path, backend: str | None, ops_id: str | None
) -> None:
    """Everything generate refuses, checked before anything is written."""
    if not project.universal and not project.buildable_backends:
        raise BuildConfigError(
            build_toml,
            "[general].backends",
            f"declares {', '.join(project.backends)}, none of which this build2cmake builds "
            f"for a [{project.framework}] kernel (it builds "
            f"{', '.join(project.supported_backends)})",
        )
    if project.framework == "tvm-ffi":
        for kernel in project.kernels:
            if kernel.backend in project.buildable_backends and "torch" in kernel.depends:
                raise BuildConfigError(
                    build_toml,
                    f"[kernel.{kernel.name}].depends",
                    "'torch': a [tvm-ffi] kernel is built without torch (its tensors come "
                    "through tvm-ffi); remove 'torch' from depends",
                )
    allowed = project.backends if project.universal else project.buildable_backends
    if backend is not None and backend not in allowed:
        raise Build2CMakeError(
            f"--backend {backend}: build.toml declares only "
            f"{', '.join(allowed) or 'no backend'} of the backends build2cmake builds"
        )
    check_ops_id(ops_id)


def generate_locked(
    project: Project,
    build_toml: Path,
    folder: ProjectFolder,
    force: bool,
    backend: str | None,
    ops_id: str | None,
) -> GenerateReport:
    """Render and write the project into `folder`, which the caller holds locked (`build`
    keeps the lock on through the compile); `checked_request` has passed."""
    options = RenderOptions(
        ops_id=ops_id or default_ops_id(build_toml, project),
        default_backend=backend if backend in project.buildable_backends else "auto",
        build_toml_name=build_toml.name,
        source_prefix=_source_prefix(build_toml, folder.path),
    )
    fileset = render_project(project, options)
    check_build_folders(folder)
    check_provider_folder(folder)
    written = write_fileset_locked(fileset, folder, force=force)
    skipped = () if project.universal else project.skipped_backends
    return GenerateReport(written, skipped, (*project.warnings, *written.warnings))


def _source_prefix(build_toml: Path, target: Path) -> str:
    """The project folder relative to the target folder ("" in place, else ending in "/"),
    after refusing folder paths the generated CMake could not name as they are."""
    project_dir = build_toml.parent.resolve()
    target_dir = target.resolve()
    # CMake sees the path a build is started with as well as the one symlinks lead to.
    folders = [
        ("project folder", build_toml.parent.absolute()),
        ("project folder", project_dir),
        ("target folder", target.absolute()),
        ("target folder", target_dir),
    ]
    for what, folder in folders:
        found = _UNSAFE_FOLDER_CHARS.search(str(folder))
        if found is not None:
            raise Build2CMakeError(
                f"{str(folder)!r}: the {what}'s path contains {found.group()!r}; CMake would "
                "split, join or shorten it where the generated build names it (it cannot hold "
                "';', '[', ']', '\\' or control characters such as a newline). Rename the folder"
            )
    prefix = os.path.relpath(project_dir, target_dir)
    return "" if prefix == "." else prefix.replace(os.sep, "/") + "/"


def check_provider_folder(folder: ProjectFolder) -> None:
    """Keep cmake/build2cmake-metadata/ to the metadata provider alone.

    pip imports the provider from that folder, and while it does Python looks there first for
    every module the provider imports: a package or an extension module named like the
    provider, a `unicodedata.py`, or a cached `.pyc` (one marked "unchecked", or one whose
    recorded source hash matches our unchanged file) that a clone ships there would run in its
    place. Python's own cache folder is removed (Python writes it again from our source);
    anything else is refused, before anything is written.
    """
    info = folder.lstat(METADATA_PROVIDER_FOLDER)
    if info is None:
        return
    where = folder.path / METADATA_PROVIDER_FOLDER
    if not stat.S_ISDIR(info.st_mode):
        raise Build2CMakeError(
            f"{where}: is not a real folder; generate writes pip's metadata provider there "
            "(remove it)"
        )
    provider = PurePosixPath(METADATA_PROVIDER).name
    for entry in folder.listdir(METADATA_PROVIDER_FOLDER):
        if entry in (provider, "__pycache__") or is_temporary_name(provider, entry):
            continue
        raise Build2CMakeError(
            f"{where / entry}: build2cmake keeps only its metadata provider ({provider}) in "
            f"{METADATA_PROVIDER_FOLDER}/, the folder pip imports it from: Python would import "
            "this in place of the provider or of a module it uses. Remove it"
        )
    cache = f"{METADATA_PROVIDER_FOLDER}/__pycache__"
    cache_info = folder.lstat(cache)
    if cache_info is not None and stat.S_ISDIR(cache_info.st_mode):
        folder.rmtree(cache)
    elif cache_info is not None:
        folder.unlink(cache)


def check_build_folders(folder: ProjectFolder) -> None:
    """Refuse a symlinked build/, and anything but real files and folders in build/cmake*.

    pip (scikit-build-core) builds in build/cmake and `build` in build/cmake-variant-*. CMake,
    Ninja, the compilers and our build-time scripts all follow symlinks, so a `build` link, or one
    anywhere in those folders (a planted build/cmake/CMakeFiles), would send their writes out of
    the project. The generated CMake and pyproject check the same before they write.
    """
    info = folder.lstat(BUILD_FOLDER)
    if info is not None and stat.S_ISLNK(info.st_mode):
        raise Build2CMakeError(
            f"{folder.path / BUILD_FOLDER}: is a symlink; the build writes there, so it must be a "
            "real folder inside the project (remove the link)"
        )
    for name in folder.listdir(BUILD_FOLDER):
        if name.startswith(BUILD_DIR_PREFIX):
            folder.check_real_tree(f"{BUILD_FOLDER}/{name}", BUILD_FOLDER_WRITERS)
