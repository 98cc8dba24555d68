"""The `provenance` of a build variant's metadata.json: which builder made it, from which commit.

The shape is the one kernels-data reads: `{"kernel-builder": {"version": ...}, "kernel":
{"commit": <40 or 64 hex digits>, "dirty": <bool>}}`. `kernel-builder` is required there, so it
names us ("build2cmake <version>"); `builder` says the same in two fields (kernels ignores keys
it does not know). `kernel` is left out when the project is not in a git checkout (or git is
missing, refuses the checkout, or cannot be run safely), as kernel-builder does.

The checkout is the stranger's: git runs with no system or user configuration, no hooks, no
fsmonitor, no optional index writes and a time limit; and not at all when the checkout's own
configuration defines a filter driver (`git status` would run its clean command).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from build2cmake import __version__

BUILDER = "build2cmake"
_GIT_TIMEOUT_S = 30
_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}", re.ASCII)
# Options that stop the checkout's configuration from running anything for the commands below.
_GIT_OPTIONS = (
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "diff.external=",
    "-c",
    "core.pager=cat",
    # A clone can commit a bare repository's files (HEAD, config, objects/, refs/) into the
    # kernel's folder, which git would take for the repository: its config, and a commit of the
    # stranger's choosing recorded as the build's. Only a .git of a real checkout counts (git
    # reads this from the command line; older git ignores it).
    "-c",
    "safe.bareRepository=explicit",
)


def builder_record() -> dict[str, object]:
    """What metadata.json's provenance says about the builder (kernels requires this part)."""
    return {"version": f"{BUILDER} {__version__}"}


def _git_env() -> dict[str, str]:
    # GIT_DIR, GIT_WORK_TREE, GIT_CONFIG_* and friends from the caller's environment would
    # point git elsewhere or add configuration; none of them is wanted here.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_OPTIONAL_LOCKS="0",
        GIT_TERMINAL_PROMPT="0",
        LC_ALL="C",
    )
    return env


def _git(git: str, project_dir: Path, *args: str) -> str | None:
    try:
        result = subprocess.run(
            [git, *_GIT_OPTIONS, "-C", str(project_dir), *args],
            capture_output=True,
            env=_git_env(),
            stdin=subprocess.DEVNULL,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    return result.stdout.decode("utf-8", "replace")


def _runs_filters(config_names: Sequence[str]) -> bool:
    # filter.<driver>.clean/.process run on `git status` for files whose stat changed.
    return any(name.startswith("filter.") for name in config_names)


def kernel_git_status(project_dir: Path) -> dict[str, object] | None:
    """{"commit": HEAD, "dirty": tracked files changed} of the checkout holding `project_dir`."""
    git = shutil.which("git")
    if git is None:
        return None
    config = _git(git, project_dir, "config", "--list", "--name-only", "--includes")
    if config is None or _runs_filters(config.lower().splitlines()):
        return None
    head = _git(git, project_dir, "rev-parse", "--verify", "--end-of-options", "HEAD^{commit}")
    commit = head.strip() if head is not None else ""
    if not _OID.fullmatch(commit):
        return None
    status = _git(
        git,
        project_dir,
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=no",
        "--ignore-submodules=all",
    )
    if status is None:
        return None
    return {"commit": commit, "dirty": bool(status)}


def provenance(project_dir: Path, **extra: object) -> dict[str, object]:
    """metadata.json's `provenance` for a build of the project in `project_dir`.

    `extra` entries (e.g. a record of the torch a build stood in with) are added as they are,
    under their own keys; kernels ignores keys it does not know.
    """
    record: dict[str, object] = {
        "kernel-builder": builder_record(),
        "builder": {"name": BUILDER, "version": __version__},
    }
    kernel = kernel_git_status(project_dir)
    if kernel is not None:
        record["kernel"] = kernel
    for key, value in extra.items():
        if value is not None:
            record[key.replace("_", "-")] = value
    return record
