"""The library behind the CLI: validate, generate-torch, clean and update-build."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TextIO

from build2cmake import (
    builder,
    card,
    checks,
    ci,
    kernel_tests,
    publish,
    variant_builds,
    variant_digests,
)
from build2cmake import init as project_init
from build2cmake import lock as kernel_lock
from build2cmake.bounded import walk_files
from build2cmake.builder import BuildReport
from build2cmake.config import CURRENT_FORMAT, load_project, read_bytes
from build2cmake.config.migrate import rewrite
from build2cmake.errors import Build2CMakeError, BuildConfigError, printable
from build2cmake.fileset import (
    MANIFEST_NAME,
    Manifest,
    WriteReport,
    current_bytes,
    write_fileset_locked,
)
from build2cmake.hub_variants import HubVariant, project_variants
from build2cmake.model import Project
from build2cmake.render import (
    BUILD_DIR,
    METADATA_PROVIDER,
    METADATA_PROVIDER_FOLDER,
    RenderOptions,
    extension_name,
    render_project,
)
from build2cmake.safefs import (
    BUILD_TOML_LIMIT_BYTES,
    ProjectFolder,
    checked_target,
    is_temporary_name,
    read_regular_file,
    write_user_file,
)
from build2cmake.variant import installed_torch_backend
from build2cmake.variant_builds import VariantResult
from build2cmake.variant_env import PackageSources

# What clean removes besides the generated files: real folders (not symlinks) directly under
# build/ whose name starts with `cmake`: the generated pyproject's build folder, its variants
# (e.g. `-C build-dir=build/cmake-rocm`) and build's own build/cmake-variant-<backend>.
BUILD_FOLDER, BUILD_DIR_PREFIX = BUILD_DIR.split("/")

# re.ASCII: \w and friends would accept non-ASCII letters; fullmatch: `$` accepts a trailing
# newline.
_OPS_ID = re.compile(r"[A-Za-z0-9_]{1,32}", re.ASCII)
# What the project and target folders' paths may not hold: the generated CMake lists sources
# and CMAKE_MODULE_PATH entries under them, and CMake lists split at ';', join elements at an
# unbalanced '[' or ']', and take '\\' as an escape; CMake drops a newline that starts a bracket
# argument, and no kernel project's folder has a newline or other control character.
_UNSAFE_FOLDER_CHARS = re.compile(r"[;\[\]\\\x00-\x1f\x7f]")
# A CMake cache entry NAME[:TYPE]=VALUE, as `cmake -D` takes it.
_DEFINE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=.*", re.ASCII | re.DOTALL)


def validate(build_toml: Path) -> Project:
    """Check build.toml and everything it points to; raise BuildConfigError on the first problem."""
    return load_project(build_toml)


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


def check_build_arguments(defines: tuple[str, ...], jobs: int | None, concurrent: int = 1) -> None:
    """Refuse bad -D, -j and --concurrent arguments before anything is written."""
    for define in defines:
        if not _DEFINE.fullmatch(define) or "\0" in define:
            raise Build2CMakeError(
                f"-D {define!r}: use -D NAME=VALUE with NAME of ASCII letters, digits and '_', "
                "e.g. -D BUILD2CMAKE_ROCM_ARCHS=gfx90a"
            )
    if jobs is not None and jobs < 1:
        raise Build2CMakeError(f"-j {jobs}: the number of parallel jobs must be 1 or more")
    if concurrent < 1:
        raise Build2CMakeError(f"--concurrent {concurrent}: use 1 or more")


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
    _checked_request(project, build_toml, backend, ops_id)
    with ProjectFolder(target) as folder, folder.locked():
        return _generate_locked(project, build_toml, folder, force, backend, ops_id)


def _checked_request(
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


def _generate_locked(
    project: Project,
    build_toml: Path,
    folder: ProjectFolder,
    force: bool,
    backend: str | None,
    ops_id: str | None,
) -> GenerateReport:
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
            folder.check_real_tree(f"{BUILD_FOLDER}/{name}", builder.BUILD_FOLDER_WRITERS)


def build(
    build_toml: Path,
    *,
    backend: str | None = None,
    ops_id: str | None = None,
    defines: tuple[str, ...] = (),
    jobs: int | None = None,
    force: bool = False,
    allow_toolkit_mismatch: bool = False,
) -> tuple[GenerateReport, BuildReport]:
    """generate-torch in the project folder, then compile and write build/<variant>/.

    All arguments are checked before anything is written, and the project folder stays locked
    from generate to the last write, so a concurrent clean cannot delete the build folder
    CMake is compiling in.
    """
    check_build_arguments(defines, jobs)
    return _build(
        load_project(build_toml),
        build_toml,
        backend=backend,
        ops_id=ops_id,
        defines=defines,
        jobs=jobs,
        force=force,
        allow_toolkit_mismatch=allow_toolkit_mismatch,
    )


def _build(
    project: Project,
    build_toml: Path,
    *,
    backend: str | None,
    ops_id: str | None,
    defines: tuple[str, ...],
    jobs: int | None,
    force: bool,
    allow_toolkit_mismatch: bool,
) -> tuple[GenerateReport, BuildReport]:
    """`build` on a project already read from build_toml (a command reads it once)."""
    check_build_arguments(defines, jobs)
    target = checked_target(build_toml.parent)
    _checked_request(project, build_toml, backend, ops_id)
    lock_note = checked_lock(project, build_toml)
    extension_for = _extensions(project, ops_id or default_ops_id(build_toml, project))
    with ProjectFolder(target) as folder, folder.locked():
        report = _generate_locked(project, build_toml, folder, force, backend, ops_id)
        built = builder.build(
            project,
            folder.path,
            backend=backend,
            extension_for=extension_for,
            defines=defines,
            jobs=jobs,
            force=force,
            allow_toolkit_mismatch=allow_toolkit_mismatch,
        )
    if lock_note is not None:
        report = dataclasses.replace(report, warnings=(*report.warnings, lock_note))
    return report, built


def _extensions(project: Project, ops_id: str) -> dict[str, str]:
    """Backend (or "universal") -> extension name, for the backends build.toml declares."""
    names = [*project.supported_backends, "universal"]
    return {
        b: extension_name(project, b, ops_id)
        for b in names
        if b in project.backends or (b == "universal" and project.universal)
    }


def list_variants(build_toml: Path) -> list[HubVariant]:
    """The Hub variants `build --all` builds for build.toml (see hub_variants)."""
    return project_variants(load_project(build_toml))


def build_variants(
    build_toml: Path,
    variants: list[HubVariant] | None,
    *,
    sources: PackageSources | None = None,
    concurrent: int = 1,
    ops_id: str | None = None,
    defines: tuple[str, ...] = (),
    jobs: int | None = None,
    force: bool = False,
    allow_toolkit_mismatch: bool = False,
    isolated: bool = True,
    out: TextIO = sys.stdout,
) -> list[VariantResult]:
    """Build each Hub variant (None: list_variants) in its own uv environment into
    build/<variant>/; one result per variant, failures included.

    Every argument and every variant is checked before the first write (generate's files, build/
    folders, logs, environments): a bad one is one error and nothing written.
    """
    check_build_arguments(defines, jobs, concurrent)
    check_ops_id(ops_id)
    project = load_project(build_toml)
    lock_note = checked_lock(project, build_toml)
    if lock_note is not None:
        print(printable(f"build2cmake: warning: {lock_note}"), file=sys.stderr, flush=True)
    chosen = project_variants(project) if variants is None else variants
    if not chosen:
        raise Build2CMakeError(
            f"{build_toml}: no variant to build (universal kernels build torch-universal with "
            "`build2cmake build`; otherwise check [torch] and [general.cuda] minver/maxver)"
        )
    extension_for = _extensions(project, ops_id or default_ops_id(build_toml, project))
    framework = "tvm-ffi" if project.framework == "tvm-ffi" else "torch"
    foreign = [v.spec for v in chosen if v.backend not in extension_for or v.framework != framework]
    if foreign:
        raise Build2CMakeError(
            f"--variants {', '.join(foreign)}: build.toml declares no such backend or framework "
            f"(it declares {', '.join(extension_for)} of a [{project.framework}] kernel, built as "
            f"{framework} variants); `build2cmake list-variants` prints the ones it builds"
        )
    generate_torch(build_toml, force=force, ops_id=ops_id)
    return variant_builds.build_variants(
        project,
        build_toml.parent,
        chosen,
        extension_for=extension_for,
        sources=sources or PackageSources(),
        concurrent=concurrent,
        jobs=jobs,
        defines=defines,
        force=force,
        allow_toolkit_mismatch=allow_toolkit_mismatch,
        isolated=isolated,
        out=out,
    )


def github_workflow(build_toml: Path, repository_root: Path | None = None) -> str:
    """The GitHub Actions workflow building list_variants(build_toml), one job per variant."""
    root = (repository_root or build_toml.parent).resolve()
    resolved = build_toml.resolve()
    if not resolved.is_relative_to(root):
        raise Build2CMakeError(f"{build_toml}: not inside the repository folder {root}")
    relative = PurePosixPath(resolved.relative_to(root).as_posix())
    return ci.github_workflow(relative, list_variants(build_toml))


def write_workflow(
    output: Path, workflow: str, build_toml: Path, repository_root: Path | None = None
) -> None:
    """Write `ci github -o`'s file through safefs: walked without following symlinks from the
    repository folder or the current folder (a planted `.github` link is refused)."""
    anchors = [repository_root or build_toml.parent, Path.cwd()]
    write_user_file(output, workflow.encode("utf-8"), anchors)


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
    for name in sorted(manifest.files):
        current = current_bytes(folder, name)
        if current is None:
            continue  # gone, or replaced by a symlink or folder: not ours
        if force or manifest.is_ours(name, current):
            files.append(name)
        else:
            kept.append(name)
    folders = build_folders(folder)
    variants, record_warnings = builder.owned_variants(folder)
    record, _ = builder.read_record(folder)
    staging = [f"{BUILD_FOLDER}/{name}" for name in record.staging]
    records = [builder.VARIANTS_RECORD] if folder.is_file(builder.VARIANTS_RECORD) else []
    if _is_our_compile_commands_link(folder):
        files.append(COMPILE_COMMANDS)
    if not dry_run:
        # Records last: a clean killed part-way leaves the records of what is still there, and
        # the next clean finishes it. Folders first (what a killed build staged, the variants,
        # the build folders), then the generated files, then the variants record, the manifest.
        build_is_real = folder.is_dir(BUILD_FOLDER)  # never through a planted link
        if build_is_real and record.staging:
            builder.remove_staging(folder, record)
            builder.write_record(folder, record)
        if variants:
            builder.retire_variants(folder, variants)
        for name in folders:
            folder.rmtree(name)
            folder.remove_empty_parents(name)
        if METADATA_PROVIDER in files and folder.is_dir(f"{METADATA_PROVIDER_FOLDER}/__pycache__"):
            # What Python cached of our provider, so that its folder goes too.
            folder.rmtree(f"{METADATA_PROVIDER_FOLDER}/__pycache__")
        # The temporary files a killed write of ours left beside them go too.
        ours = [*manifest.files, *files, MANIFEST_NAME]
        ours += [builder.VARIANTS_RECORD] if build_is_real else []
        folder.remove_stale_temporaries([PurePosixPath(name) for name in ours])
        for name in [*files, *records]:
            folder.unlink(name)
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


def update_build(build_toml: Path) -> bool:
    """Rewrite a build.toml of an older format as edition 5, keeping comments.

    Returns False when the file is already edition 5. The file is replaced atomically, never
    written through a symlink or a planted temporary file.
    """
    project = load_project(build_toml)
    if project.source_format == CURRENT_FORMAT:
        return False
    # Checked to read back as the same build before anything is written.
    text = rewrite(build_toml, project)
    folder_path = checked_target(build_toml.parent)
    with ProjectFolder(folder_path) as folder, folder.locked():
        info = folder.lstat(build_toml.name)
        if info is None or not stat.S_ISREG(info.st_mode):
            raise Build2CMakeError(
                f"{build_toml}: update-build rewrites only a regular file, not a symlink"
            )
        folder.write_atomic(build_toml.name, text.encode("utf-8"), mode=info.st_mode & 0o777)
    return True


@dataclass(frozen=True)
class SharingReport:
    """What `build` adds for sharing: kernel-abi-check per extension and the filled card."""

    abi: tuple[checks.AbiReport, ...]
    card: Path | None


def init(
    directory: Path | None,
    name: str,
    *,
    backends: tuple[str, ...] = (),
    license_id: str = project_init.DEFAULT_LICENSE,
    rocm_archs: tuple[str, ...] = project_init.DEFAULT_ROCM_ARCHS,
    force: bool = False,
) -> project_init.InitReport:
    """Create a new kernel project (build.toml edition 5, sources, binding, tests, card)."""
    return project_init.init_project(
        directory,
        name,
        backends=backends,
        license_id=license_id,
        rocm_archs=rocm_archs,
        force=force,
    )


def build_for_sharing(
    build_toml: Path,
    *,
    strict: bool = False,
    backend: str | None = None,
    ops_id: str | None = None,
    defines: tuple[str, ...] = (),
    jobs: int | None = None,
    force: bool = False,
    allow_toolkit_mismatch: bool = False,
) -> tuple[GenerateReport, BuildReport, SharingReport]:
    """`build`, with the checks kernel-builder runs before sharing and the kernel card.

    Python op registrations must use add_op_namespace_prefix (checked before compiling);
    kernel-abi-check runs on each extension (with `strict`, a violation is an error); CARD.md,
    if the project has one, is filled in as build/CARD.md.
    """
    return _build_for_sharing(
        load_project(build_toml),
        build_toml,
        strict=strict,
        backend=backend,
        ops_id=ops_id,
        defines=defines,
        jobs=jobs,
        force=force,
        allow_toolkit_mismatch=allow_toolkit_mismatch,
    )


def _build_for_sharing(
    project: Project,
    build_toml: Path,
    *,
    strict: bool = False,
    backend: str | None = None,
    ops_id: str | None = None,
    defines: tuple[str, ...] = (),
    jobs: int | None = None,
    force: bool = False,
    allow_toolkit_mismatch: bool = False,
) -> tuple[GenerateReport, BuildReport, SharingReport]:
    """`build_for_sharing` on a project already read from build_toml."""
    checks.check_op_registrations(
        build_toml.parent / project.python_source_dir / project.package_name
    )
    report, built = _build(
        project,
        build_toml,
        backend=backend,
        ops_id=ops_id,
        defines=defines,
        jobs=jobs,
        force=force,
        allow_toolkit_mismatch=allow_toolkit_mismatch,
    )
    backend_info = built.metadata.get("backend")
    backend = str(backend_info.get("type")) if isinstance(backend_info, dict) else ""
    stable_abi = project.torch.stable_abi_for(backend) if project.torch is not None else None
    policy = checks.AbiPolicy(torch_stable_abi=stable_abi)
    abi = tuple(checks.abi_check(library, policy) for library in _extensions_in(built.path))
    card_path = card.write_card(project, build_toml.parent)
    if strict:
        failed = [r for r in abi if not r.checked or not r.ok]
        if failed:
            raise Build2CMakeError(
                f"--strict: kernel-abi-check did not pass ({built.path} was written; it is not "
                "fit to share as it is):",
                *(line for r in failed for line in r.summary().splitlines()),
            )
    return report, built, SharingReport(abi, card_path)


def _extensions_in(variant: Path) -> list[Path]:
    """The compiled extensions (*.so, *.pyd) of a variant folder: real files, bounded walk."""
    return sorted(
        p for p in walk_files(variant, "the variant folder") if p.suffix in (".so", ".pyd")
    )


def check_abi(path: Path, policy: checks.AbiPolicy) -> list[checks.AbiReport]:
    """kernel-builder's check-abi: every extension of one variant folder (one holding
    metadata.json), or of every build/<variant>/ of the project whose build.toml is `path`."""
    if path.is_dir():
        if not (path / "metadata.json").is_file():
            raise Build2CMakeError(
                f"{path}: not a variant folder (it has no metadata.json); name a build/<variant>/ "
                "folder or the project's build.toml"
            )
        variants = [path]
    else:
        if not path.is_file():
            raise Build2CMakeError(f"{path}: no such build.toml or variant folder")
        build_folder = path.parent / BUILD_FOLDER
        variants = [
            folder
            for folder in (sorted(build_folder.iterdir()) if build_folder.is_dir() else [])
            if folder.is_dir() and not folder.is_symlink() and (folder / "metadata.json").is_file()
        ]
        if not variants:
            raise Build2CMakeError(
                f"{build_folder}/: no build variant to check; run `build2cmake build` first"
            )
    return [
        checks.abi_check(library, policy)
        for variant in variants
        for library in _extensions_in(variant)
    ]


def run_kernel_tests(
    build_toml: Path,
    *,
    variant: str | None = None,
    ops_id: str | None = None,
    defines: tuple[str, ...] = (),
    jobs: int | None = None,
) -> int:
    """Build (if needed) and run the kernels_ci tests against build/<variant>/; pytest's status.

    Without `variant`, the backend is the first of CUDA, ROCm, XPU, Metal, CPU that build.toml
    declares and this machine can load; building it is incremental, so an up-to-date variant
    costs only CMake's check.
    """
    project = load_project(build_toml)
    project_dir = build_toml.parent
    if variant is not None:
        folder = kernel_tests.variant_folder(project, project_dir, variant)
    else:
        backend = (
            None
            if project.universal
            else kernel_tests.pick_backend(project, installed_torch_backend())
        )
        _, built, _ = _build_for_sharing(
            project, build_toml, backend=backend, ops_id=ops_id, defines=defines, jobs=jobs
        )
        folder = built.path
    return kernel_tests.run_tests(project, project_dir, folder)


@dataclass(frozen=True)
class UploadPlan:
    """What `upload` publishes: where, the checked variants, and every file it adds."""

    request: publish.UploadRequest
    project_dir: Path
    variants: tuple[str, ...]
    operations: tuple[publish.FileOperation, ...]
    # Variants built from a checkout with uncommitted changes (a warning, as kernel-builder's).
    dirty: tuple[str, ...] = ()
    # What the user should know and need not fix (the card read from an older place).
    notes: tuple[str, ...] = ()
    # Why build.toml's kernel-depends are not pinned (no kernels.lock yet), if so.
    lock_note: str | None = None


def write_upload_summary(output: Path, outcome: publish.UploadOutcome) -> None:
    """Write `upload --output-json`'s file through safefs (from the current folder, no symlinked
    folder on the way; a link at its name is replaced, never followed)."""
    write_user_file(output, outcome.as_json().encode("utf-8"), [Path.cwd()])


# A Hub branch: ASCII letters, digits, '.', '_', '-', '/' (no '..', no leading '-' or '/').
_BRANCH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,99}", re.ASCII)


def plan_upload(
    build_toml: Path,
    *,
    repo_id: str | None = None,
    branch: str | None = None,
    ops_id: str | None = None,
    private: bool = False,
    create_pr: bool = False,
    repo_type: str = "kernel",
) -> UploadPlan:
    """Check build/ against build.toml (refusing a stale build) and list what goes where."""
    project = load_project(build_toml)
    project_dir = build_toml.parent
    lock_note = checked_lock(project, build_toml)
    chosen_repo = repo_id or project.hub_repo_id
    if chosen_repo is None:
        raise BuildConfigError(
            build_toml,
            "[general.hub].repo-id",
            'missing; set it (e.g. repo-id = "my-org/my-kernel") or pass --repo-id',
        )
    owner, _, name = chosen_repo.partition("/")
    # fullmatch: `$` in those patterns accepts a trailing newline.
    if not project_init.OWNER_NAME.fullmatch(owner) or not project_init.KERNEL_NAME.fullmatch(name):
        raise Build2CMakeError(
            f"repo id {chosen_repo!r}: use <owner>/<kernel name> (lowercase letters, digits, '-')"
        )
    publish.check_repo_type(repo_type)
    version = project.version if project.version is not None else 1
    chosen_branch = branch or project.hub_branch or f"v{version}"
    if not _BRANCH.fullmatch(chosen_branch) or ".." in chosen_branch:
        raise Build2CMakeError(f"--branch {chosen_branch!r}: not a branch name")
    variants = publish.check_fresh(
        project, project_dir, build_toml, ops_id or default_ops_id(build_toml, project)
    )
    request = publish.UploadRequest(chosen_repo, chosen_branch, repo_type, private, create_pr)
    operations = publish.local_operations(project_dir, variants, chosen_branch)
    dirty = publish.dirty_variants(project, project_dir)
    _, card_note = publish.built_card(project_dir)
    notes = () if card_note is None else (card_note,)
    return UploadPlan(
        request,
        project_dir,
        tuple(variants),
        tuple(operations),
        tuple(dirty),
        notes=notes,
        lock_note=lock_note,
    )


# -- kernel-builder's commands and `lock` ---------------------------------------------------------


def build_toml_of(path: Path) -> Path:
    """A project named as kernel-builder names it (KERNEL_DIR) or as build2cmake does
    (BUILD_TOML): a folder stands for the build.toml inside it."""
    return path / "build.toml" if path.is_dir() else path


def checked_lock(project: Project, build_toml: Path) -> str | None:
    """What `build` and `upload` do with kernels.lock: refuse one that is malformed or no longer
    matches build.toml's kernel-depends (one error, saying to run `build2cmake lock`); the note
    to show when build.toml has kernel-depends and no lock yet."""
    kernel_lock.check_lock(project, build_toml.parent)
    return kernel_lock.unlocked_note(project, build_toml.parent)


def lock(build_toml: Path, *, force: bool = False) -> kernel_lock.LockReport:
    """`build2cmake lock`: resolve build.toml's kernel-depends through the Hub to commits and
    snapshot hashes, and write kernels.lock beside build.toml (kernels-data's NixKernelLocks)."""
    project = load_project(build_toml)
    project_dir = build_toml.parent
    path = kernel_lock.lock_path(project_dir)
    if not force and os.path.lexists(path):
        # Refused before anything is downloaded (write_lock checks again when it writes).
        try:
            kernel_lock.read_lock(project_dir)
        except Build2CMakeError as error:
            raise Build2CMakeError(
                f"{path}: exists and is not a kernels.lock this command writes ({error}); move "
                "it away, or pass --force to replace it"
            ) from None
    dependencies = kernel_lock.project_dependencies(project)
    if not dependencies and not os.path.lexists(path):
        return kernel_lock.LockReport(path, (), False)
    entries = tuple(kernel_lock.resolve(dependencies))
    written = kernel_lock.write_lock(project_dir, kernel_lock.render(entries), force=force)
    return kernel_lock.LockReport(path, entries, written)


def hash_variants(build_toml: Path) -> list[variant_digests.HashResult]:
    """kernel-builder's `hash`: each build/<variant>/'s digest recomputed into its
    metadata.json."""
    return variant_digests.hash_variants(_project_folder(build_toml))


def check_builds(build_toml: Path) -> list[variant_digests.BuildCheck]:
    """kernel-builder's `check-builds`: each build/<variant>/metadata.json parses as the loader
    parses it, and its digest matches the files."""
    return variant_digests.check_builds(_project_folder(build_toml))


def _project_folder(build_toml: Path) -> Path:
    if not build_toml.is_file():
        raise Build2CMakeError(
            f"{build_toml}: no such build.toml; name the project's folder or its build.toml"
        )
    return build_toml.parent


def fill_card(build_toml: Path) -> str:
    """kernel-builder's `fill-card`: the project's CARD.md filled in, as `build` writes it."""
    project = load_project(build_toml)
    content = card.render_card(project, build_toml.parent)
    if content is None:
        raise Build2CMakeError(
            f"{build_toml.parent / card.CARD_NAME}: missing; the card is filled in from it "
            "(`build2cmake init` writes one)"
        )
    return content


def write_filled_card(output: Path, content: str) -> None:
    """Write `fill-card`'s OUTPUT through safefs (from the current folder, no symlinked folder on
    the way; a link at its name is replaced, never followed)."""
    write_user_file(output, content.encode("utf-8", "replace"), [Path.cwd()])
