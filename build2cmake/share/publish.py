"""`build2cmake upload`: check that build/ is what build.toml describes, then publish it.

What kernel-builder's `upload` does, with huggingface_hub: create the repository (of kind
`kernel`, the only kind the Hub keeps kernels in since 2026-09-13; not with --create-pr, which
needs an existing one), create the branch
v<version> ([general.hub].branch or --branch) when it is missing, then commit build/<variant>/
files and benchmarks/benchmark*.py to that branch and build/CARD.md (the card) as README.md to
main, in batches of 1000 files (one pull request per branch with --create-pr). Files of an
uploaded variant that the build no longer makes are deleted (on a new branch: everything under
build/ and benchmarks/ that is not uploaded). Before any of it: the refusal to publish a stale
build/, a variant whose metadata.json does not match build.toml, or that is older than the
sources it was built from.
"""

from __future__ import annotations

import json
import re
import shlex
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from build2cmake.builds.builder import kernel_dependency_record
from build2cmake.config import load_project
from build2cmake.config.lock import checked_lock
from build2cmake.config.model import Project
from build2cmake.generate import init as project_init
from build2cmake.generate.project import default_ops_id
from build2cmake.generate.render import extension_name
from build2cmake.ground.bounded import walk_files
from build2cmake.ground.errors import Build2CMakeError, BuildConfigError, printable
from build2cmake.ground.safefs import write_user_file
from build2cmake.share.card import (
    BUILT_CARD,
    OLD_BUILT_CARD,
    built_variants,
    is_variant_name,
    metadata_name,
)

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
    if project.tvm_ffi is not None:
        files += [project_dir / s for s in project.tvm_ffi.sources]
    for kernel in project.kernels:
        files += [project_dir / s for s in kernel.sources]
    package = project_dir / project.python_source_dir / project.package_name
    if package.is_dir():
        # Iterative and depth-bounded, real files only (a planted deep tree is one error).
        files += list(walk_files(package, "the Python package"))
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
            # Only variant names: a hidden staging folder a killed build left is no variant
            # (the next build or clean removes it, by the variants record).
            if (
                folder.name not in names
                and is_variant_name(folder.name)
                and metadata.is_file()
                and not folder.is_symlink()
            ):
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
    backend = metadata.get("backend")
    backend_type = backend.get("type") if isinstance(backend, dict) else None
    expected: dict[str, object] = {
        "name": metadata_name(project),
        "version": project.version if project.version is not None else 1,
        "license": project.license or NO_LICENSE,
        "python-depends": list(project.python_depends_for(str(backend_type))),
        "kernel-depends": [
            kernel_dependency_record(d) for d in project.kernel_depends_for(str(backend_type))
        ],
    }
    for key, value in expected.items():
        if metadata.get(key) != value:
            return f"metadata.json has {key} {metadata.get(key)!r}, build.toml says {value!r}"
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


MAIN_BRANCH = "main"
REPO_TYPES = ("kernel",)
# The Hub removed model-type kernel repositories on 2026-09-13 (huggingface/kernels #757): kernels
# live in kernel repositories only, and an upload to a model repository would publish a kernel the
# `kernels` loader no longer looks for.
MODEL_REPOSITORIES_GONE = "2026-09-13"
COMMIT_BATCH_FILES = 1000
COMMIT_MESSAGE = "Uploaded using build2cmake."


@dataclass(frozen=True)
class FileOperation:
    """One file of a commit: `source` uploaded as `path` on `branch`, or `path` deleted."""

    branch: str
    path: str
    source: Path | None = None

    def line(self) -> str:
        """One line saying what this operation does (escaped for a terminal)."""
        # Shell-style quoting keeps a name with spaces one field; printable escapes the rest.
        fields = [self.branch, self.path]
        if self.source is None:
            return printable(" ".join(["delete", *map(shlex.quote, fields)]))
        return printable(
            " ".join(["add", *map(shlex.quote, fields), "<-", shlex.quote(str(self.source))])
        )


@dataclass(frozen=True)
class UploadRequest:
    """Where and how to upload: repository, its kind, the branch of the variants, options."""

    repo_id: str
    branch: str
    repo_type: str = "kernel"
    private: bool = False
    create_pr: bool = False


@dataclass(frozen=True)
class UploadOutcome:
    """What an upload did, as kernel-builder's --output-json writes it."""

    status: str  # "no_changes", "uploaded" or "pull_request_created"
    repo_id: str
    branch: str
    url: str | None = None
    pull_requests: tuple[tuple[str, str], ...] = field(default=())

    def as_json(self) -> str:
        """The --output-json document."""
        return (
            json.dumps(
                {
                    "status": self.status,
                    "repo_id": self.repo_id,
                    "branch": self.branch,
                    "url": self.url,
                    "pull_requests": [{"branch": b, "url": u} for b, u in self.pull_requests],
                },
                indent=2,
            )
            + "\n"
        )


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _posix(relative: Path) -> str:
    return relative.as_posix()


def check_repo_type(repo_type: str) -> None:
    """Refuse a Hub repository kind other than `kernel`, saying why for `model`."""
    if repo_type == "model":
        raise Build2CMakeError(
            f"--repo-type model: the Hub has kept kernels in kernel repositories only since "
            f"{MODEL_REPOSITORIES_GONE} (model-type kernel repositories were removed); use "
            "--repo-type kernel (the default)"
        )
    if repo_type not in REPO_TYPES:
        raise Build2CMakeError(f"--repo-type {printable(repo_type)}: use {' or '.join(REPO_TYPES)}")


def built_card(project_dir: Path) -> tuple[Path | None, str | None]:
    """The filled-in card that goes to main as README.md, and a note when it is not where
    kernel-builder looks: build/CARD.md, else a build/README.md that build2cmake wrote before
    2026-11-28 (regular files only)."""
    card = project_dir / BUILT_CARD
    if _is_regular(card):
        return card, None
    old = project_dir / OLD_BUILT_CARD
    if _is_regular(old):
        return old, (
            f"{OLD_BUILT_CARD} is sent as the card (README.md); build2cmake now writes "
            f"{BUILT_CARD}, where kernel-builder looks: rebuild to move it"
        )
    return None, None


def local_operations(
    project_dir: Path, variants: Sequence[str], branch: str
) -> list[FileOperation]:
    """What the upload adds, from the project alone (no Hub needed), in commit order.

    Regular files only (symlinks are not followed); `__pycache__` folders and `*.pyc` are left
    out, as the metadata digest leaves them out.
    """
    build = project_dir / "build"
    operations: list[FileOperation] = []
    card, _ = built_card(project_dir)
    if card is not None:
        operations.append(FileOperation(MAIN_BRANCH, "README.md", card))
    benchmarks = project_dir / "benchmarks"
    if benchmarks.is_dir() and not benchmarks.is_symlink():
        for path in sorted(benchmarks.iterdir()):
            if path.name.startswith("benchmark") and path.suffix == ".py" and _is_regular(path):
                operations.append(FileOperation(branch, f"benchmarks/{path.name}", path))
    for variant in sorted(variants):
        top = build / variant
        for path in sorted(walk_files(top, f"build/{variant}/")):
            if path.suffix == ".pyc":
                continue
            operations.append(
                FileOperation(branch, f"build/{variant}/{_posix(path.relative_to(top))}", path)
            )
    return operations


def stale_operations(
    existing: Iterable[str],
    adds: Sequence[FileOperation],
    variants: Sequence[str],
    branch: str,
    *,
    new_branch: bool,
) -> list[FileOperation]:
    """The files on `branch` the upload deletes: under an uploaded variant's folder (or, on a
    branch the upload creates, anywhere under build/ and benchmarks/) and not uploaded now;
    benchmarks/benchmark*.py that are no longer in the project."""
    uploaded = {op.path for op in adds if op.branch == branch}
    prefixes = ("build/", "benchmarks/") if new_branch else tuple(f"build/{v}/" for v in variants)
    deletes: list[FileOperation] = []
    for path in sorted(existing):
        if path in uploaded:
            continue
        name = path.rsplit("/", 1)[-1]
        old_benchmark = (
            path.startswith("benchmarks/") and name.startswith("benchmark") and name.endswith(".py")
        )
        if path.startswith(prefixes) or old_benchmark:
            deletes.append(FileOperation(branch, path))
    return deletes


def dry_run_lines(request: UploadRequest, operations: Sequence[FileOperation]) -> list[str]:
    """What an upload would do, one operation a line (deletions are decided against the Hub's
    files at upload time, so a dry run, which contacts nothing, cannot list them)."""
    visibility = "private" if request.private else "public"
    lines = []
    if request.create_pr:
        lines.append(printable(f"pull-request {request.repo_type} {request.repo_id}"))
    else:
        lines.append(printable(f"create-repo {request.repo_type} {request.repo_id} {visibility}"))
    lines.append(printable(f"create-branch {shlex.quote(request.branch)} (if missing)"))
    lines += [op.line() for op in operations]
    lines.append(
        printable(
            f"delete {shlex.quote(request.branch)} <files of the uploaded variants that the Hub "
            "has and this build does not make>"
        )
    )
    return lines


def _hub_error(action: str, error: Exception) -> Build2CMakeError:
    # huggingface_hub's message: the HTTP status line, a documentation link, then the Hub's
    # own words; the first and the last say what happened.
    lines = [line for line in str(error).splitlines() if line.strip()]
    said = lines[0] if len(lines) < 2 else f"{lines[0]} ({lines[-1]})"
    return Build2CMakeError(f"{action}: {said}")


def upload(
    request: UploadRequest,
    project_dir: Path,
    variants: Sequence[str],
    *,
    log: Any = None,
) -> UploadOutcome:
    """Publish the checked build/ of `project_dir` to the Hub (HF_ENDPOINT, HF_TOKEN or the
    token `hf auth login` stored are huggingface_hub's, as usual)."""
    try:
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, constants
        from huggingface_hub.errors import HfHubHTTPError
    except ImportError:
        raise Build2CMakeError(
            "upload needs huggingface_hub: pip install 'build2cmake[upload]' "
            "(or pip install huggingface_hub)"
        ) from None
    api = HfApi()
    repo_id, repo_type, branch = request.repo_id, request.repo_type, request.branch
    try:
        if not request.create_pr:
            api.create_repo(repo_id, repo_type=repo_type, private=request.private, exist_ok=True)
        refs = api.list_repo_refs(repo_id, repo_type=repo_type)
        new_branch = branch not in {b.name for b in refs.branches}
        if new_branch:
            try:
                api.create_branch(repo_id, branch=branch, repo_type=repo_type)
            except HfHubHTTPError as error:
                if request.create_pr:
                    raise Build2CMakeError(
                        f"pull requests can only target an existing branch; ask a maintainer of "
                        f"{repo_id} to create the branch {branch} first ({error})"
                    ) from None
                raise
        existing = (
            [] if new_branch else api.list_repo_files(repo_id, revision=branch, repo_type=repo_type)
        )
    except HfHubHTTPError as error:
        raise _hub_error(f"{repo_id}", error) from None
    adds = local_operations(project_dir, variants, branch)
    deletes = stale_operations(existing, adds, variants, branch, new_branch=new_branch)
    by_branch: dict[str, list[FileOperation]] = {}
    for op in [*adds, *deletes]:
        by_branch.setdefault(op.branch, []).append(op)
    pull_requests: list[tuple[str, str]] = []
    for target, operations in sorted(by_branch.items()):
        revision = target
        for start in range(0, len(operations), COMMIT_BATCH_FILES):
            batch = operations[start : start + COMMIT_BATCH_FILES]
            hub_ops: list[CommitOperationAdd | CommitOperationDelete] = [
                CommitOperationAdd(path_in_repo=op.path, path_or_fileobj=str(op.source))
                if op.source is not None
                else CommitOperationDelete(path_in_repo=op.path)
                for op in batch
            ]
            open_pr = request.create_pr and revision == target
            try:
                info = api.create_commit(
                    repo_id,
                    hub_ops,
                    commit_message=COMMIT_MESSAGE,
                    repo_type=repo_type,
                    revision=revision,
                    create_pr=open_pr,
                )
            except HfHubHTTPError as error:
                raise _hub_error(f"commit to {repo_id}, branch {target}", error) from None
            if open_pr:
                if info.pr_num is None:
                    raise Build2CMakeError(
                        f"{repo_id}: the Hub opened no pull request against {target}"
                    )
                revision = f"refs/pr/{info.pr_num}"
                pull_requests.append((target, info.pr_url or ""))
    prefix = constants.REPO_TYPES_URL_PREFIXES.get(repo_type, "")
    if not by_branch:
        return UploadOutcome("no_changes", repo_id, branch)
    if request.create_pr:
        return UploadOutcome("pull_request_created", repo_id, branch, None, tuple(pull_requests))
    url = f"{constants.ENDPOINT}/{prefix}{repo_id}/tree/{branch}"
    return UploadOutcome("uploaded", repo_id, branch, url)


def dirty_variants(project: Project, project_dir: Path) -> list[str]:
    """The built variants whose metadata.json says they were built from a checkout with
    uncommitted changes (their recorded commit does not fully identify their sources)."""
    dirty = []
    for variant in built_variants(project, project_dir):
        record = variant.metadata.get("provenance")
        kernel = record.get("kernel") if isinstance(record, dict) else None
        if isinstance(kernel, dict) and kernel.get("dirty") is True:
            dirty.append(variant.name)
    return sorted(dirty)


@dataclass(frozen=True)
class UploadPlan:
    """What `upload` publishes: where, the checked variants, and every file it adds."""

    request: UploadRequest
    project_dir: Path
    variants: tuple[str, ...]
    operations: tuple[FileOperation, ...]
    # Variants built from a checkout with uncommitted changes (a warning, as kernel-builder's).
    dirty: tuple[str, ...] = ()
    # What the user should know and need not fix (the card read from an older place).
    notes: tuple[str, ...] = ()
    # Why build.toml's kernel-depends are not pinned (no kernels.lock yet), if so.
    lock_note: str | None = None


def write_upload_summary(output: Path, outcome: UploadOutcome) -> None:
    """Write `upload --output-json`'s file through safefs (from the current folder, no symlinked
    folder on the way; a link at its name is replaced, never followed)."""
    write_user_file(output, outcome.as_json().encode("utf-8"), [Path.cwd()])


# A Hub branch: ASCII letters, digits, '.', '_', '-', '/' (no '..', no leading '-' or '/').
_BRANCH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,99}", re.ASCII)


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
    """Check build/ against build.toml (refusing a stale build) and list what goes where."""
    project = load_project(build_toml)
    project_dir = build_toml.parent
    lock_note = checked_lock(project, build_toml)
    chosen_repo = repo_id or project.hub_repo_id
    if chosen_repo is None:
        raise BuildConfigError(
            build_toml,
            "[general.hub].repo-id",
            'missing; set it (e.g. repo-id = "my-org/my-kernel") or pass --repo-id',
        )
    owner, _, name = chosen_repo.partition("/")
    # fullmatch: `$` in those patterns accepts a trailing newline.
    if not project_init.OWNER_NAME.fullmatch(owner) or not project_init.KERNEL_NAME.fullmatch(name):
        raise Build2CMakeError(
            f"repo id {chosen_repo!r}: use <owner>/<kernel name> (lowercase letters, digits, '-')"
        )
    check_repo_type(repo_type)
    version = project.version if project.version is not None else 1
    chosen_branch = branch or project.hub_branch or f"v{version}"
    if not _BRANCH.fullmatch(chosen_branch) or ".." in chosen_branch:
        raise Build2CMakeError(f"--branch {chosen_branch!r}: not a branch name")
    variants = check_fresh(
        project, project_dir, build_toml, ops_id or default_ops_id(build_toml, project)
    )
    request = UploadRequest(chosen_repo, chosen_branch, repo_type, private, create_pr)
    operations = local_operations(project_dir, variants, chosen_branch)
    dirty = dirty_variants(project, project_dir)
    _, card_note = built_card(project_dir)
    notes = () if card_note is None else (card_note,)
    return UploadPlan(
        request,
        project_dir,
        tuple(variants),
        tuple(operations),
        tuple(dirty),
        notes=notes,
        lock_note=lock_note,
    )
