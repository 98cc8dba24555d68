"""The library behind the CLI: validate, generate-torch, clean and update-build."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TextIO

import tomlkit

from build2cmake import builder, card, checks, ci, kernel_tests, publish, variant_builds
from build2cmake import init as project_init
from build2cmake.builder import BuildReport
from build2cmake.config import CURRENT_FORMAT, load_project, read_document
from build2cmake.config.migrate import to_edition5
from build2cmake.errors import Build2CMakeError, BuildConfigError
from build2cmake.fileset import (
    MANIFEST_NAME,
    Manifest,
    WriteReport,
    content_hash,
    locked,
    write_fileset,
)
from build2cmake.hub_variants import HubVariant, project_variants
from build2cmake.model import BUILDABLE_BACKENDS, Project
from build2cmake.render import BUILD_DIR, RenderOptions, extension_name, render_project
from build2cmake.variant import installed_torch_backend
from build2cmake.variant_builds import VariantResult
from build2cmake.variant_env import PackageSources

# What clean removes besides the generated files: the build folder of the generated pyproject
# and any variant of it (e.g. `-C build-dir=build/cmake-rocm`).
BUILD_DIR_PATTERNS = (BUILD_DIR + "*",)

_OPS_ID = re.compile(r"[A-Za-z0-9_]{1,32}")


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
    digest = hashlib.sha256(b"build.toml\0" + build_toml.read_bytes())
    for relative, path in _compiled_files(build_toml.parent, project):
        content = path.read_bytes()
        digest.update(f"\0{relative}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()[:10]


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
    manifest = Manifest.read(project_dir)
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
    target = _checked_target(build_toml, target_dir)
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
    if backend is not None and backend not in project.buildable_backends:
        raise Build2CMakeError(
            f"--backend {backend}: build.toml declares only "
            f"{', '.join(project.buildable_backends) or 'no backend'} of the backends "
            "build2cmake builds"
        )
    if ops_id is not None and not _OPS_ID.fullmatch(ops_id):
        raise Build2CMakeError(
            f"--ops-id {ops_id!r}: use 1 to 32 ASCII letters, digits or '_' (it becomes part "
            "of the torch op namespace)"
        )
    prefix = os.path.relpath(build_toml.parent.resolve(), target.resolve())
    options = RenderOptions(
        ops_id=ops_id or default_ops_id(build_toml, project),
        default_backend=backend or "auto",
        build_toml_name=build_toml.name,
        source_prefix="" if prefix == "." else prefix.replace(os.sep, "/") + "/",
    )
    fileset = render_project(project, options)
    written = write_fileset(fileset, target, build_dirs=BUILD_DIR_PATTERNS, force=force)
    skipped = project.skipped_backends if project.framework == "torch" else ()
    return GenerateReport(written, skipped, project.warnings)


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
    """generate-torch in the project folder, then compile and write build/<variant>/."""
    report = generate_torch(build_toml, force=force, backend=backend, ops_id=ops_id)
    project = load_project(build_toml)
    _check_defines(defines)
    built = builder.build(
        project,
        build_toml.parent,
        backend=backend,
        extension_for=_extensions(project, ops_id or default_ops_id(build_toml, project)),
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


def _check_defines(defines: tuple[str, ...]) -> None:
    for define in defines:
        if "=" not in define:
            raise Build2CMakeError(
                f"-D {define}: use -D NAME=VALUE, e.g. -D BUILD2CMAKE_ROCM_ARCHS=gfx90a"
            )


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
    _check_defines(defines)
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


def clean(
    build_toml: Path, target_dir: Path | None = None, *, dry_run: bool = False, force: bool = False
) -> CleanReport:
    """Remove what generate-torch wrote (per its manifest) and the build folder, nothing else.

    A generated file the user edited since is kept (and listed) unless `force`.
    """
    target = _checked_target(build_toml, target_dir)
    with locked(target):
        return _clean_locked(target, dry_run=dry_run, force=force)


def _clean_locked(target: Path, *, dry_run: bool, force: bool) -> CleanReport:
    manifest = Manifest.read(target)
    if manifest is None:
        if (target / MANIFEST_NAME).exists():
            raise Build2CMakeError(
                f"{target / MANIFEST_NAME}: unreadable; clean deletes nothing without it. "
                "Run generate-torch again to rewrite it, then clean."
            )
        return CleanReport((), ())
    removed: list[str] = []
    kept: list[str] = []
    for name, recorded in sorted(manifest.files.items()):
        path = target / name
        if not path.is_file():
            continue
        if force or content_hash(path.read_bytes()) == recorded:
            removed.append(name)
        else:
            kept.append(name)
    build_dirs = sorted(
        str(found.relative_to(target))
        for pattern in manifest.build_dirs
        for found in target.glob(pattern)
        if found.is_dir() and not found.is_symlink()
    )
    removed.extend(d + "/" for d in build_dirs)
    removed.extend(f"build/{variant}/" for variant in builder.owned_variants(target))
    if (target / builder.VARIANTS_RECORD).is_file():
        removed.append(builder.VARIANTS_RECORD)
    link = target / "compile_commands.json"
    if link.is_symlink() and _points_into_build(link, target):
        removed.append(link.name)
    if not dry_run:
        for name in removed:
            path = target / name
            if name.endswith("/"):
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
            _remove_empty_parents(path.parent, target)
        if not kept:
            (target / MANIFEST_NAME).unlink()
    return CleanReport(tuple(removed), tuple(kept))


def update_build(build_toml: Path) -> bool:
    """Rewrite a build.toml of an older format as edition 5, keeping comments.

    Returns False when the file is already edition 5.
    """
    project = load_project(build_toml)
    if project.source_format == CURRENT_FORMAT:
        return False
    document = read_document(build_toml)
    to_edition5(document, project, build_toml)
    text = tomlkit.dumps(document)
    tmp = build_toml.with_name(f".{build_toml.name}.update.tmp")
    tmp.write_text(text, "utf-8")
    os.replace(tmp, build_toml)
    return True


def _checked_target(build_toml: Path, target_dir: Path | None) -> Path:
    """The target folder, refusing the filesystem root and the home folder."""
    target = target_dir if target_dir is not None else build_toml.parent
    if not target.exists():
        raise Build2CMakeError(f"{target}: target folder does not exist")
    if target.exists() and not target.is_dir():
        raise Build2CMakeError(f"{target}: target is a file, not a folder")
    resolved = target.resolve()
    if resolved == Path(resolved.anchor) or resolved == Path.home().resolve():
        raise Build2CMakeError(
            f"{target}: refusing to generate into or clean the "
            f"{'filesystem root' if resolved == Path(resolved.anchor) else 'home folder'}; "
            "put build.toml in its own project folder"
        )
    return target


def _points_into_build(link: Path, target: Path) -> bool:
    """Whether the symlink `link` is the compile_commands.json link a generated build made."""
    destination = os.readlink(link)
    build = str((target / "build").resolve()) + os.sep
    return destination.endswith("/compile_commands.json") and (
        str(Path(destination).parent.resolve()).startswith(build)
        or destination.startswith(str(target / "build") + os.sep)
    )


def _remove_empty_parents(folder: Path, stop: Path) -> None:
    """Remove `folder` and its parents up to (not including) `stop` while they are empty."""
    while folder != stop and folder.is_relative_to(stop):
        with contextlib.suppress(OSError):
            folder.rmdir()
        if folder.exists():
            return
        folder = folder.parent


# --- Sharing a kernel: init, checks before sharing, the kernel card, kernels_ci tests, upload ---


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
                "--strict: "
                + "\n".join(r.summary() for r in failed)
                + f"\n({built.path} was written; it is not fit to share as it is)"
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
