"""`build2cmake ci github`: a GitHub Actions workflow that builds every variant of a kernel,
one job per variant on GitHub's standard runners, and collects them into one build/ artifact.

The matrix is `list-variants` (hub_variants.project_variants); each job runs the same
`build2cmake build BUILD_TOML --variants V`, so a variant that builds on a developer's machine
builds the same way in CI. The output is JSON, which is valid YAML, so no YAML library is needed
to write it and its quoting is exact whatever the project's path or names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from build2cmake.config import load_project
from build2cmake.config.hub_variants import HubVariant, project_variants
from build2cmake.ground.errors import Build2CMakeError, printable
from build2cmake.ground.safefs import write_user_file

WORKFLOW_PATH = ".github/workflows/build2cmake-variants.yml"

# Installs sccache and exports the GitHub Actions cache's URL and token that sccache's `gha`
# storage (SCCACHE_GHA_ENABLED) needs, as sccache's documentation says to.
SCCACHE_ACTION = "mozilla-actions/sccache-action@v0.0.10"

# What a path or name from the repository may be to reach the workflow. JSON quoting makes any
# string valid YAML, but GitHub Actions evaluates `${{ ... }}` inside every string value (an
# `env:` entry, an artifact path) before a step runs: a folder named
# `${{ secrets.HF_TOKEN }}` would put the secret into the log. Actions has no escape for `${{`,
# so what cannot be written safely is refused: each path component is ASCII letters, digits and
# `._+-` (no `$`, braces, quotes, spaces, glob characters or `:`), checked as a full match.
_SAFE_COMPONENT = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9._+-]{0,127}", re.ASCII)


def checked_workflow_value(value: str, what: str) -> str:
    """`value` when every `/`-separated part is a full match of the safe ASCII rule; else one
    error naming it (escaped) and what would be valid."""
    parts = value.split("/")
    if not all(_SAFE_COMPONENT.fullmatch(p) and p not in (".", "..") for p in parts):
        raise Build2CMakeError(
            f"{what} {value!r}: ci github copies it into the workflow, where GitHub Actions "
            "evaluates `${{ ... }}` and YAML reads ':', '#', quotes and line breaks; use folder "
            "and file names of ASCII letters, digits and '._+-' only (rename the folder, or "
            "write the workflow by hand)"
        )
    return value


def github_workflow(
    build_toml: PurePosixPath,
    variants: Sequence[HubVariant],
    *,
    python_version: str = "3.11",
    build2cmake_requirement: str = "build2cmake[variants]",
) -> str:
    """The workflow text for `build_toml` (relative to the repository root).

    Every string from the repository is checked with `checked_workflow_value` first.
    """
    checked_workflow_value(build_toml.as_posix(), "build.toml path")
    for variant in variants:
        checked_workflow_value(variant.spec, "variant")
    project_dir = build_toml.parent.as_posix()
    build_dir = "build" if project_dir == "." else f"{project_dir}/build"
    build_command = 'build2cmake build "$BUILD_TOML" --variants "$VARIANT" -j "$(nproc)"'
    workflow: dict[str, object] = {
        "name": "build2cmake variants",
        "on": {"workflow_dispatch": {}, "push": {"tags": ["v*"]}},
        "jobs": {
            "build": {
                "name": "${{ matrix.variant }}",
                "runs-on": "ubuntu-latest",
                "strategy": {
                    "fail-fast": False,
                    "matrix": {"variant": [v.spec for v in variants]},
                },
                "env": {
                    "BUILD_TOML": build_toml.as_posix(),
                    "VARIANT": "${{ matrix.variant }}",
                    # sccache's storage is the GitHub Actions cache (the action below exports its
                    # URL and token); naming a remote storage makes the build compile through
                    # sccache, so a re-run of the matrix reuses every unchanged object.
                    "SCCACHE_GHA_ENABLED": "true",
                },
                "steps": [
                    {"uses": "actions/checkout@v4"},
                    {"uses": "actions/setup-python@v5", "with": {"python-version": python_version}},
                    {"name": "Set up sccache", "uses": SCCACHE_ACTION},
                    {
                        "name": "Cache uv",
                        "uses": "actions/cache@v4",
                        "with": {
                            "path": "~/.cache/uv",
                            "key": "build2cmake-${{ matrix.variant }}-"
                            "${{ hashFiles(env.BUILD_TOML) }}",
                            "restore-keys": "build2cmake-${{ matrix.variant }}-",
                        },
                    },
                    {
                        "name": "Install build2cmake",
                        "run": f"python -m pip install '{build2cmake_requirement}'",
                    },
                    {"name": "Build ${{ matrix.variant }}", "run": build_command},
                    {
                        "uses": "actions/upload-artifact@v4",
                        "with": {
                            "name": "variant-${{ matrix.variant }}",
                            "path": f"{build_dir}/torch*/",
                        },
                    },
                ],
            },
            "collect": {
                "needs": "build",
                "runs-on": "ubuntu-latest",
                "steps": [
                    {
                        "uses": "actions/download-artifact@v4",
                        "with": {
                            "pattern": "variant-*",
                            "merge-multiple": True,
                            "path": "build",
                        },
                    },
                    {
                        "uses": "actions/upload-artifact@v4",
                        "with": {"name": "build", "path": "build/"},
                    },
                ],
            },
        },
    }
    header = (
        # The path is the repository's: escaped, a newline in a folder name cannot end the
        # comment and start YAML of its own.
        "# Generated by build2cmake ci github from "
        f"{printable(build_toml.as_posix())}; regenerate it when the variant list changes.\n"
    )
    return header + json.dumps(workflow, indent=2) + "\n"


def project_workflow(build_toml: Path, repository_root: Path | None = None) -> str:
    """The GitHub Actions workflow building list_variants(build_toml), one job per variant."""
    root = (repository_root or build_toml.parent).resolve()
    resolved = build_toml.resolve()
    if not resolved.is_relative_to(root):
        raise Build2CMakeError(f"{build_toml}: not inside the repository folder {root}")
    relative = PurePosixPath(resolved.relative_to(root).as_posix())
    return github_workflow(relative, project_variants(load_project(build_toml)))


def write_workflow(
    output: Path, workflow: str, build_toml: Path, repository_root: Path | None = None
) -> None:
    """Write `ci github -o`'s file through safefs: walked without following symlinks from the
    repository folder or the current folder (a planted `.github` link is refused)."""
    anchors = [repository_root or build_toml.parent, Path.cwd()]
    write_user_file(output, workflow.encode("utf-8"), anchors)
