"""The library behind the CLI: validate, generate-torch, clean and update-build."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import tomlkit

from build2cmake import builder
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
from build2cmake.model import BUILDABLE_BACKENDS, Project
from build2cmake.render import BUILD_DIR, RenderOptions, extension_name, render_project

# What clean removes besides the generated files: the build folder of the generated pyproject
# and any variant of it (e.g. `-C build-dir=build/cmake-rocm`).
BUILD_DIR_PATTERNS = (BUILD_DIR + "*",)

_OPS_ID = re.compile(r"[A-Za-z0-9_]{1,32}")


def validate(build_toml: Path) -> Project:
    """Check build.toml and everything it points to; raise BuildConfigError on the first problem."""
    return load_project(build_toml)


def default_ops_id(build_toml: Path) -> str:
    """The ops id used without --ops-id: derived from build.toml's bytes, so it is reproducible."""
    return hashlib.sha256(build_toml.read_bytes()).hexdigest()[:10]


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
        ops_id=ops_id or default_ops_id(build_toml),
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
) -> tuple[GenerateReport, BuildReport]:
    """generate-torch in the project folder, then compile and write build/<variant>/."""
    report = generate_torch(build_toml, force=force, backend=backend, ops_id=ops_id)
    project = load_project(build_toml)
    chosen_id = ops_id or default_ops_id(build_toml)
    names = [*BUILDABLE_BACKENDS, "universal"]
    extension_for = {
        b: extension_name(project, b, chosen_id)
        for b in names
        if b in project.backends or (b == "universal" and project.universal)
    }
    for define in defines:
        if "=" not in define:
            raise Build2CMakeError(
                f"-D {define}: use -D NAME=VALUE, e.g. -D BUILD2CMAKE_ROCM_ARCHS=gfx90a"
            )
    built = builder.build(
        project,
        build_toml.parent,
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
