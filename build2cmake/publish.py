"""`build2cmake upload`: check that build/ is what build.toml describes, then hand over.

There is no second uploader here. The upload itself is the Hugging Face tooling's: `kernels
upload` when the installed `kernels` package has that command, else `kernel-builder upload`
(kernels 0.17 moved it there). Both take the project folder, upload build/<variant>/ folders to
the branch v<version> of the Hub repository and build/README.md (the card) to its main branch.
What we add is the refusal to publish a stale build/: a variant whose metadata.json does not
match build.toml, or that is older than the sources it was built from.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from build2cmake.card import built_variants, metadata_name
from build2cmake.errors import Build2CMakeError
from build2cmake.model import Project
from build2cmake.render import extension_name

NO_LICENSE = "NOASSERTION"


@dataclass(frozen=True)
class StaleVariant:
    """A build/<variant>/ that must be rebuilt before it is shared, and why."""

    name: str
    reason: str


def _sources(project: Project, project_dir: Path, build_toml: Path) -> list[Path]:
    """The files a variant is built from: build.toml, the binding, kernels, the Python package."""
    files = [build_toml]
    if project.torch is not None:
        files += [project_dir / s for s in project.torch.sources]
    for kernel in project.kernels:
        files += [project_dir / s for s in kernel.sources]
    package = project_dir / "torch-ext" / project.package_name
    if package.is_dir():
        files += [p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return files


def stale_variants(
    project: Project, project_dir: Path, build_toml: Path, ops_id: str
) -> list[StaleVariant]:
    """Every build/<variant>/ of this kernel that does not match build.toml and its sources."""
    stale: list[StaleVariant] = []
    build = project_dir / "build"
    if build.is_dir():
        names = {v.name for v in built_variants(project, project_dir)}
        for folder in sorted(build.iterdir()):
            metadata = folder / "metadata.json"
            if folder.name not in names and metadata.is_file() and not folder.is_symlink():
                stale.append(
                    StaleVariant(folder.name, f"built for another kernel, not {project.name!r}")
                )
    sources = [p for p in _sources(project, project_dir, build_toml) if p.is_file()]
    newest = max(sources, key=lambda p: p.stat().st_mtime, default=None)
    for variant in built_variants(project, project_dir):
        # What build.toml says first, then a source edited since the build (also why the ops id,
        # which covers the sources, no longer matches), then the ops id itself.
        reason = _mismatch(project, variant.metadata, ops_id, check_id=False)
        if reason is None and newest is not None:
            built_at = (build / variant.name / "metadata.json").stat().st_mtime
            if newest.stat().st_mtime > built_at:
                reason = f"{newest.relative_to(project_dir)} changed after it was built"
        reason = reason or _mismatch(project, variant.metadata, ops_id, check_id=True)
        if reason is not None:
            stale.append(StaleVariant(variant.name, reason))
    return stale


def _mismatch(
    project: Project, metadata: dict[str, object], ops_id: str, *, check_id: bool
) -> str | None:
    expected: dict[str, object] = {
        "name": metadata_name(project),
        "version": project.version if project.version is not None else 1,
        "license": project.license or NO_LICENSE,
        "python-depends": list(project.python_depends),
    }
    for key, value in expected.items():
        if metadata.get(key) != value:
            return f"metadata.json has {key} {metadata.get(key)!r}, build.toml says {value!r}"
    backend = metadata.get("backend")
    backend_type = backend.get("type") if isinstance(backend, dict) else None
    if project.universal:
        wanted = extension_name(project, "universal", ops_id)
    elif backend_type in project.backends:
        wanted = extension_name(project, str(backend_type), ops_id)
    else:
        return f"backend {backend_type!r} is not one build.toml declares"
    if check_id and metadata.get("id") != wanted:
        return (
            f"built from another build.toml or other sources (extension "
            f"{metadata.get('id')!r}, now {wanted!r}; pass --ops-id if you built with one)"
        )
    return None


def check_fresh(project: Project, project_dir: Path, build_toml: Path, ops_id: str) -> list[str]:
    """The variants to upload; one error naming each stale one (or an empty build/)."""
    stale = stale_variants(project, project_dir, build_toml, ops_id)
    if stale:
        raise Build2CMakeError(
            f"{project_dir / 'build'}/: refusing to upload a stale build (rebuild each backend "
            "with `build2cmake build`, or remove those folders; `build2cmake clean` removes the "
            "ones it built):",
            *(f"build/{s.name}/: {s.reason}" for s in stale),
        )
    variants = [v.name for v in built_variants(project, project_dir)]
    if not variants:
        raise Build2CMakeError(
            f"{project_dir / 'build'}/: no build variant to upload; run `build2cmake build` first"
        )
    return variants


def _has_kernels_upload() -> str | None:
    """The `kernels` command, when the installed kernels package has an `upload` subcommand."""
    beside = Path(sys.executable).parent / "kernels"
    program = str(beside) if beside.is_file() else shutil.which("kernels")
    if program is None:
        return None
    try:
        probe = subprocess.run(
            [program, "upload", "--help"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return program if probe.returncode == 0 else None


def uploader(
    project_dir: Path, repo_id: str, branch: str, *, private: bool, create_pr: bool
) -> list[str] | None:
    """The Hugging Face upload command for this project, or None when none is installed."""
    program = _has_kernels_upload()
    if program is not None:
        command = [program, "upload", str(project_dir), "--repo-id", repo_id, "--branch", branch]
        return command + (["--private"] if private else [])
    builder = shutil.which("kernel-builder")
    if builder is not None:
        command = [builder, "upload", str(project_dir), "--repo-id", repo_id, "--branch", branch]
        return command + (["--private"] if private else []) + (["--create-pr"] if create_pr else [])
    return None


def no_uploader(project_dir: Path, repo_id: str, branch: str) -> str:
    """Why there is nothing to hand over to, and what to do."""
    return (
        "no Hugging Face uploader found: the installed kernels package has no `upload` command "
        "(recent kernels releases moved it to kernel-builder) and `kernel-builder` is not on "
        "PATH. Install kernel-builder (kernel-builder upload), or upload with Hub tools of your "
        f"choice: {project_dir / 'build'}/<variant>/ to build/<variant>/ on branch {branch} of "
        f"{repo_id}, build/README.md to README.md on main"
    )


def run_upload(command: Sequence[str]) -> int:
    """Run the uploader with the terminal attached (it may ask to log in); its exit status."""
    return subprocess.run(list(command), check=False, env=os.environ.copy()).returncode


def describe(variants: Sequence[str], project_dir: Path) -> list[str]:
    """The lines `upload` prints before handing over."""
    lines = [f"build/{name}/" for name in variants]
    card = project_dir / "build" / "README.md"
    lines.append("build/README.md (the card)" if card.is_file() else "no build/README.md (card)")
    return ["  " + line for line in lines]
