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

from build2cmake import builder, ci, variant_builds
from build2cmake.builder import BuildReport
from build2cmake.config import load_project, read_document
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
from build2cmake.variant_builds import VariantResult
from build2cmake.variant_env import PackageSources

# What clean removes besides the generated files: the build folder of the generated pyproject
# and any variant of it (e.g. `-C build-dir=build/cmake-rocm`).
BUILD_DIR_PATTERNS = (BUILD_DIR + "*",)

_OPS_ID = re.compile(r"^[A-Za-z0-9_]{1,32}$")


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
    target = _checked_target(build_toml, target_dir)
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
    if ops_id is not None and not _OPS_ID.match(ops_id):
        raise Build2CMakeError(
            f"--ops-id {ops_id!r}: use 1 to 32 letters, digits or '_' (it becomes part of the "
            "torch op namespace)"
        )
    prefix = os.path.relpath(build_toml.parent.resolve(), target.resolve())
    options = RenderOptions(
        ops_id=ops_id or default_ops_id(build_toml, project),
        default_backend=backend or "auto",
        build_toml_name=build_toml.name,
        source_prefix="" if prefix == "." else prefix.replace(os.sep, "/") + "/",
    )
    fileset = render_project(project, options)
    return write_fileset(fileset, target, build_dirs=BUILD_DIR_PATTERNS, force=force)


def build(
    build_toml: Path,
    *,
    backend: str | None = None,
    ops_id: str | None = None,
    defines: tuple[str, ...] = (),
    jobs: int | None = None,
    force: bool = False,
    allow_toolkit_mismatch: bool = False,
) -> tuple[WriteReport, BuildReport]:
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
