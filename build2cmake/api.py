"""The library behind the CLI: validate, generate-torch, clean and update-build."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TextIO

from build2cmake import builder, card, checks, ci, kernel_tests, publish, variant_builds
from build2cmake import init as project_init
from build2cmake.builder import BuildReport
from build2cmake.config import CURRENT_FORMAT, load_project, read_bytes
from build2cmake.config.migrate import rewrite
from build2cmake.errors import Build2CMakeError, BuildConfigError
from build2cmake.fileset import (
    MANIFEST_NAME,
    Manifest,
    WriteReport,
    content_hash,
    current_bytes,
    write_fileset_locked,
)
from build2cmake.hub_variants import HubVariant, project_variants
from build2cmake.model import BUILDABLE_BACKENDS, Project
from build2cmake.render import BUILD_DIR, RenderOptions, extension_name, render_project
from build2cmake.safefs import (
    BUILD_TOML_LIMIT_BYTES,
    ProjectFolder,
    checked_target,
    read_regular_file,
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
        digest.update(f"\0{relative}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()[:10]


_SOURCE_LIMIT_BYTES = 64 << 20
# What the compilers read from an `include` folder; other files there (data, docs, build
# outputs) do not change the extension.
_COMPILED_SUFFIXES = frozenset(
    ".h .hh .hpp .hxx .cuh .inc .inl .ipp .tcc .c .cc .cpp .cxx .cu .hip".split()  # noqa: SIM905
)


def _compiled_files(project_dir: Path, project: Project) -> list[tuple[str, Path]]:
    """(path relative to the project, path) of every file the ops id covers, sorted."""
    root = project_dir.resolve()
    sources: list[PurePosixPath] = []
    includes: list[PurePosixPath] = []
    if project.torch is not None:
        sources += project.torch.sources
        includes += project.torch.includes
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
        folder = project_dir / include
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
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
    if project.framework == "tvm-ffi":
        raise BuildConfigError(
            build_toml,
            "[tvm-ffi]",
            "Apache TVM FFI kernels are read and validated, but this build2cmake builds only "
            "torch extensions ([torch] or [torch-noarch])",
        )
    if project.framework == "torch" and not project.buildable_backends:
        raise BuildConfigError(
            build_toml,
            "[general].backends",
            f"declares {', '.join(project.backends)}, none of which this build2cmake builds "
            f"(it builds {', '.join(BUILDABLE_BACKENDS)})",
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
    written = write_fileset_locked(fileset, folder, force=force)
    skipped = project.skipped_backends if project.framework == "torch" else ()
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
    project = load_project(build_toml)
    target = checked_target(build_toml.parent)
    _checked_request(project, build_toml, backend, ops_id)
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
    return report, built


def _extensions(project: Project, ops_id: str) -> dict[str, str]:
    """Backend (or "universal") -> extension name, for the backends build.toml declares."""
    names = [*BUILDABLE_BACKENDS, "universal"]
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
    build/<variant>/; one result per variant, failures included."""
    project = load_project(build_toml)
    chosen = project_variants(project) if variants is None else variants
    if not chosen:
        raise Build2CMakeError(
            f"{build_toml}: no variant to build (universal kernels build torch-universal with "
            "`build2cmake build`; otherwise check [torch] and [general.cuda] minver/maxver)"
        )
    generate_torch(build_toml, force=force, ops_id=ops_id)
    check_build_arguments(defines, jobs)
    return variant_builds.build_variants(
        project,
        build_toml.parent,
        chosen,
        extension_for=_extensions(project, ops_id or default_ops_id(build_toml, project)),
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
    if the project has one, is filled in as build/README.md.
    """
    project = load_project(build_toml)
    checks.check_op_registrations(build_toml.parent / "torch-ext" / project.package_name)
    report, built = build(
        build_toml,
        backend=backend,
        ops_id=ops_id,
        defines=defines,
        jobs=jobs,
        force=force,
        allow_toolkit_mismatch=allow_toolkit_mismatch,
    )
    abi = tuple(checks.abi_check(library) for library in sorted(built.path.glob("*.so")))
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
        _, built, _ = build_for_sharing(
            build_toml, backend=backend, ops_id=ops_id, defines=defines, jobs=jobs
        )
        folder = built.path
    return kernel_tests.run_tests(project, project_dir, folder)


@dataclass(frozen=True)
class UploadPlan:
    """What `upload` hands to the Hugging Face uploader."""

    repo_id: str
    branch: str
    variants: tuple[str, ...]
    # Empty when no uploader is installed; `missing` then says what to do.
    command: tuple[str, ...]
    missing: str = ""


def plan_upload(
    build_toml: Path,
    *,
    repo_id: str | None = None,
    branch: str | None = None,
    ops_id: str | None = None,
    private: bool = False,
    create_pr: bool = False,
) -> UploadPlan:
    """Check build/ against build.toml (refusing a stale build) and find the uploader."""
    project = load_project(build_toml)
    project_dir = build_toml.parent
    chosen_repo = repo_id or project.hub_repo_id
    if chosen_repo is None:
        raise BuildConfigError(
            build_toml,
            "[general.hub].repo-id",
            'missing; set it (e.g. repo-id = "my-org/my-kernel") or pass --repo-id',
        )
    owner, _, name = chosen_repo.partition("/")
    if not project_init.OWNER_NAME.match(owner) or not project_init.KERNEL_NAME.match(name):
        raise Build2CMakeError(
            f"repo id {chosen_repo!r}: use <owner>/<kernel name> (lowercase letters, digits, '-')"
        )
    version = project.version if project.version is not None else 1
    chosen_branch = branch or project.hub_branch or f"v{version}"
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$", chosen_branch):
        raise Build2CMakeError(f"--branch {chosen_branch!r}: not a branch name")
    variants = publish.check_fresh(
        project, project_dir, build_toml, ops_id or default_ops_id(build_toml)
    )
    where = project_dir.resolve()
    command = publish.uploader(
        where, chosen_repo, chosen_branch, private=private, create_pr=create_pr
    )
    if command is None:
        missing = publish.no_uploader(where, chosen_repo, chosen_branch)
        return UploadPlan(chosen_repo, chosen_branch, tuple(variants), (), missing)
    return UploadPlan(chosen_repo, chosen_branch, tuple(variants), tuple(command))
