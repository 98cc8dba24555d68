"""The library's face: one function a command, each calling into the wing that does the work.

The wings, bottom up: ground (errors, safe writes, bounded reads), config (build.toml and
kernels.lock into one model), generate (the CMake project), toolchains (the compilers a build
runs), builds (build/<variant>/ folders) and share (check, test, describe and publish them).
ARCHITECTURE.md draws them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from build2cmake.builds import carried_costs, project_build
from build2cmake.builds import clean as project_clean
from build2cmake.builds.variant_builds import VariantResult
from build2cmake.builds.variant_env import PackageSources
from build2cmake.builds.variant_folders import BuildReport
from build2cmake.config import load_project, migrate
from build2cmake.config import lock as kernel_lock
from build2cmake.config.hub_variants import HubVariant, project_variants
from build2cmake.config.model import Project
from build2cmake.generate import ci, project
from build2cmake.generate import init as project_init
from build2cmake.generate.project import GenerateReport, default_ops_id
from build2cmake.share import card, checks, publish, sharing, variant_digests
from build2cmake.share.publish import UploadPlan
from build2cmake.share.sharing import SharingReport

__all__ = [
    "BuildReport",
    "GenerateReport",
    "HubVariant",
    "PackageSources",
    "SharingReport",
    "UploadPlan",
    "VariantResult",
    "default_ops_id",
]


def validate(build_toml: Path) -> Project:
    """`validate`: check build.toml and everything it points to (BuildConfigErrors if not)."""
    return load_project(build_toml)


def generate_torch(
    build_toml: Path,
    target_dir: Path | None = None,
    *,
    force: bool = False,
    backend: str | None = None,
    ops_id: str | None = None,
) -> GenerateReport:
    """`generate-torch`: the CMake build, pyproject.toml and torch glue, into target_dir."""
    return project.generate_torch(
        build_toml, target_dir, force=force, backend=backend, ops_id=ops_id
    )


def clean(
    build_toml: Path, target_dir: Path | None = None, *, dry_run: bool = False, force: bool = False
) -> project_clean.CleanReport:
    """`clean`: remove what generate-torch wrote and the build folders, nothing else."""
    return project_clean.clean(build_toml, target_dir, dry_run=dry_run, force=force)


def update_build(build_toml: Path) -> bool:
    """`update-build`: rewrite an older build.toml as edition 5 (False: it already is)."""
    return migrate.update_build(build_toml)


def init(
    directory: Path | None,
    name: str,
    *,
    backends: tuple[str, ...] = (),
    license_id: str = project_init.DEFAULT_LICENSE,
    rocm_archs: tuple[str, ...] = project_init.DEFAULT_ROCM_ARCHS,
    force: bool = False,
) -> project_init.InitReport:
    """`init`: a new kernel project (build.toml edition 5, sources, binding, tests, card)."""
    return project_init.init_project(
        directory,
        name,
        backends=backends,
        license_id=license_id,
        rocm_archs=rocm_archs,
        force=force,
    )


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
    """`build`: generate-torch in the project folder, then compile into build/<variant>/."""
    return project_build.build(
        build_toml,
        backend=backend,
        ops_id=ops_id,
        defines=defines,
        jobs=jobs,
        force=force,
        allow_toolkit_mismatch=allow_toolkit_mismatch,
    )


def list_variants(build_toml: Path) -> list[HubVariant]:
    """`list-variants`: the Hub variants `build --all` builds for build.toml."""
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
    """`build --variants/--all`: each Hub variant (None: all of list_variants) into
    build/<variant>/, in its own environment; one result per variant, failures included."""
    return project_build.build_variants(
        build_toml,
        variants,
        sources=sources,
        concurrent=concurrent,
        ops_id=ops_id,
        defines=defines,
        jobs=jobs,
        force=force,
        allow_toolkit_mismatch=allow_toolkit_mismatch,
        isolated=isolated,
        out=out,
    )


def github_workflow(
    build_toml: Path,
    repository_root: Path | None = None,
    *,
    runners: tuple[str, ...] = (),
    publish: bool = False,
) -> str:
    """`ci github`: the GitHub Actions workflow building list_variants(build_toml)."""
    return ci.project_workflow(build_toml, repository_root, runners=runners, publish=publish)


def write_workflow(
    output: Path, workflow: str, build_toml: Path, repository_root: Path | None = None
) -> None:
    """`ci github -o`: write the workflow (no symlinked folder on the way)."""
    ci.write_workflow(output, workflow, build_toml, repository_root)


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
    """`build` with kernel-builder's checks before sharing and the filled kernel card."""
    return sharing.build_for_sharing(
        build_toml,
        strict=strict,
        backend=backend,
        ops_id=ops_id,
        defines=defines,
        jobs=jobs,
        force=force,
        allow_toolkit_mismatch=allow_toolkit_mismatch,
    )


def check_abi(path: Path, policy: checks.AbiPolicy) -> list[checks.AbiReport]:
    """`check-abi`: kernel-abi-check on a variant folder's extensions, or every variant's."""
    return sharing.check_abi(path, policy)


def run_kernel_tests(
    build_toml: Path,
    *,
    variant: str | None = None,
    ops_id: str | None = None,
    defines: tuple[str, ...] = (),
    jobs: int | None = None,
) -> int:
    """`test`: build if needed, then the kernels_ci tests against build/<variant>/."""
    return sharing.run_kernel_tests(
        build_toml, variant=variant, ops_id=ops_id, defines=defines, jobs=jobs
    )


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
    """`upload`'s checks: build/ against build.toml (a stale build refused), and what goes where."""
    return publish.plan_upload(
        build_toml,
        repo_id=repo_id,
        branch=branch,
        ops_id=ops_id,
        private=private,
        create_pr=create_pr,
        repo_type=repo_type,
    )


def write_upload_summary(output: Path, outcome: publish.UploadOutcome) -> None:
    """`upload --output-json`: write the summary (no symlinked folder on the way)."""
    publish.write_upload_summary(output, outcome)


def build_toml_of(path: Path) -> Path:
    """A project named as kernel-builder names it (KERNEL_DIR) or as build2cmake does
    (BUILD_TOML): a folder stands for the build.toml inside it."""
    return path / "build.toml" if path.is_dir() else path


def lock(build_toml: Path, *, force: bool = False) -> kernel_lock.LockReport:
    """`lock`: pin build.toml's kernel-depends to Hub commits and hashes in kernels.lock."""
    return kernel_lock.lock_project(build_toml, force=force)


def save_costs(build_toml: Path, *, force: bool = False) -> carried_costs.CostsReport:
    """`costs`: this machine's recorded compile times of the project into build2cmake-costs.tsv,
    which orders a first build elsewhere."""
    return carried_costs.save_costs(build_toml, force=force)


def costs_suggestion(build_toml: Path, backend: str) -> str | None:
    """After `build`: the line that suggests `costs`, when a first build elsewhere would gain."""
    return carried_costs.suggestion(build_toml, backend)


def hash_variants(build_toml: Path) -> list[variant_digests.HashResult]:
    """`hash`: each build/<variant>/'s digest recomputed into its metadata.json."""
    return variant_digests.hash_variants(variant_digests.project_folder(build_toml))


def check_builds(build_toml: Path) -> list[variant_digests.BuildCheck]:
    """`check-builds`: each build/<variant>/metadata.json as the loader reads it, digest too."""
    return variant_digests.check_builds(variant_digests.project_folder(build_toml))


def fill_card(build_toml: Path) -> str:
    """`fill-card`: the project's CARD.md filled in, as `build` writes it."""
    return card.fill_card(build_toml)


def write_filled_card(output: Path, content: str) -> None:
    """`fill-card -o`: write the card (no symlinked folder on the way)."""
    card.write_filled_card(output, content)
