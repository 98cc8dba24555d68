"""`build` and `build --variants` on a project: generate, then compile one variant here or each
Hub variant in its own environment, with every argument checked before anything is written."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import TextIO

from build2cmake.builds import choice, variant_builds
from build2cmake.builds.variant_builds import VariantResult
from build2cmake.builds.variant_env import PackageSources
from build2cmake.builds.variant_folders import BuildReport
from build2cmake.config import load_project
from build2cmake.config.hub_variants import HubVariant, for_project, project_variants
from build2cmake.config.lock import checked_lock
from build2cmake.config.model import Project
from build2cmake.generate.project import (
    GenerateReport,
    check_ops_id,
    checked_request,
    default_ops_id,
    generate_locked,
    generate_torch,
)
from build2cmake.generate.render import extension_name
from build2cmake.ground.errors import Build2CMakeError, printable
from build2cmake.ground.safefs import ProjectFolder, checked_target

# A CMake cache entry NAME[:TYPE]=VALUE, as `cmake -D` takes it.
_DEFINE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=.*", re.ASCII | re.DOTALL)


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
    return build_project(
        load_project(build_toml),
        build_toml,
        backend=backend,
        ops_id=ops_id,
        defines=defines,
        jobs=jobs,
        force=force,
        allow_toolkit_mismatch=allow_toolkit_mismatch,
    )


def build_project(
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
    checked_request(project, build_toml, backend, ops_id)
    lock_note = checked_lock(project, build_toml)
    extension_for = extensions(project, ops_id or default_ops_id(build_toml, project))
    with ProjectFolder(target) as folder, folder.locked():
        report = generate_locked(project, build_toml, folder, force, backend, ops_id)
        built = choice.build(
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


def extensions(project: Project, ops_id: str) -> dict[str, str]:
    """Backend (or "universal") -> extension name, for the backends build.toml declares."""
    names = [*project.supported_backends, "universal"]
    return {
        b: extension_name(project, b, ops_id)
        for b in names
        if b in project.backends or (b == "universal" and project.universal)
    }


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
    chosen = project_variants(project) if variants is None else for_project(project, variants)
    if not chosen:
        raise Build2CMakeError(
            f"{build_toml}: no variant to build (universal kernels build torch-universal with "
            "`build2cmake build`; otherwise check [torch] and [general.cuda] minver/maxver)"
        )
    extension_for = extensions(project, ops_id or default_ops_id(build_toml, project))
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
