"""Building to share: `build` with kernel-builder's checks (op registrations, kernel-abi-check)
and the filled card, `check-abi` on built variants, and `test` against a built variant."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from build2cmake.builds.project_build import build_project
from build2cmake.builds.variant import installed_torch_backend
from build2cmake.builds.variant_folders import BuildReport
from build2cmake.config import load_project
from build2cmake.config.model import Project
from build2cmake.generate.project import BUILD_FOLDER, GenerateReport
from build2cmake.ground.bounded import walk_files
from build2cmake.ground.errors import Build2CMakeError
from build2cmake.share import card, checks, kernel_tests


@dataclass(frozen=True)
class SharingReport:
    """What `build` adds for sharing: kernel-abi-check per extension and the filled card."""

    abi: tuple[checks.AbiReport, ...]
    card: Path | None


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
    return build_project_for_sharing(
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


def build_project_for_sharing(
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
    report, built = build_project(
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
        _, built, _ = build_project_for_sharing(
            project, build_toml, backend=backend, ops_id=ops_id, defines=defines, jobs=jobs
        )
        folder = built.path
    return kernel_tests.run_tests(project, project_dir, folder)
