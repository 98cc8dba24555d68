"""`build2cmake lock`: kernels.lock, each kernel-depends entry pinned to a Hub commit and hash.

The file is kernels-data's `NixKernelLocks` (huggingface/kernels, kernels-data/src/lock.rs, the
lock nix-builder consumes), as serde_json writes it pretty-printed:

    [
      {
        "dependency": {"repo-id": "org/name", "version": 1},
        "lock": {"commit": "<40 hex digits>", "hash": "sha256-<base64>"}
      }
    ]

one entry per dependency (`version` or `revision`, never both), sorted as kernels-data sorts
its `KernelDependency` keys (repo id, then versions before revisions), no duplicates, no other
keys. `version = N` resolves to the commit of the repository's `v<N>` branch, as the `kernels`
loader resolves it; a `revision` to the commit it names. `hash` is the SRI hash of the
repository snapshot at that commit, as nix-builder's `fetchFromHuggingFace` checks it: the NAR
hash (nar.py) of every file of the repository at the commit, less a top-level `.cache` folder.

The lock pins build.toml's own kernel-depends (every backend's), so that `build` and `upload`
can tell from the files alone whether it still matches build.toml. Everything read from the Hub
or from an existing kernels.lock is checked before use: repository ids as the Hub spells them,
commits as 40 lowercase hex digits, hashes as `sha256-` and the base64 of 32 bytes, file paths
as relative paths of plain names.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import json
import logging
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from build2cmake.config import load_project
from build2cmake.config.model import KernelDependency, Project
from build2cmake.config.nar import NarHasher, walk_order
from build2cmake.ground.errors import Build2CMakeError, printable
from build2cmake.ground.safefs import (
    RECORD_LIMIT_BYTES,
    ProjectFolder,
    checked_target,
    read_regular_file,
)

LOCK_NAME = "kernels.lock"
REPO_TYPE = "kernel"
# A repository of more files than this is not a kernel (kernels ship tens to a few thousand).
SNAPSHOT_FILE_LIMIT = 100_000
# The folder nix-builder's fetcher deletes from a download before hashing it.
_DOWNLOAD_CACHE = ".cache"
_COMMIT = re.compile(r"[0-9a-f]{40}", re.ASCII)
_SRI = re.compile(r"sha256-[A-Za-z0-9+/]{43}=", re.ASCII)
# The Hub's repository names: letters, digits, '-', '_', '.'; no '--' or '..', no '-' or '.'
# at either end, 96 characters at most for the name.
_HUB_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?", re.ASCII)
# A git revision a build.toml may name: a branch, tag or commit, as plain ASCII.
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,254}", re.ASCII)
_ENTRY_KEYS = frozenset({"dependency", "lock"})
_LOCK_KEYS = frozenset({"commit", "hash"})
_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class LockedKernel:
    """One kernels.lock entry: a kernel-depends entry, the commit it resolved to, and the SRI
    hash of the repository at that commit."""

    dependency: KernelDependency
    commit: str
    hash: str


@dataclass(frozen=True)
class LockReport:
    """What `lock` wrote: where, and each entry."""

    path: Path
    entries: tuple[LockedKernel, ...]
    written: bool  # False when the file already held exactly this


def dependency_text(dependency: KernelDependency) -> str:
    """`org/name v1` or `org/name @ rev`: a dependency in a message."""
    if dependency.version is not None:
        return f"{dependency.repo_id} v{dependency.version}"
    return f"{dependency.repo_id} @ {dependency.revision}"


def _sort_key(dependency: KernelDependency) -> tuple[bytes, int, int, bytes]:
    # kernels-data's derived Ord: repo id (bytes), then KernelVersion::Version(n) before
    # KernelVersion::Revision(s).
    repo = dependency.repo_id.encode("utf-8")
    if dependency.version is not None:
        return repo, 0, dependency.version, b""
    return repo, 1, 0, (dependency.revision or "").encode("utf-8")


def project_dependencies(project: Project) -> list[KernelDependency]:
    """Every kernel-depends entry of build.toml, general and per backend, once each, sorted."""
    found = set(project.kernel_depends)
    for _, dependencies in project.backend_kernel_depends:
        found.update(dependencies)
    return sorted(found, key=_sort_key)


def dependency_record(dependency: KernelDependency) -> dict[str, object]:
    """A dependency as kernels-data serializes it: repo-id, then version or revision."""
    record: dict[str, object] = {"repo-id": dependency.repo_id}
    if dependency.version is not None:
        record["version"] = dependency.version
    else:
        record["revision"] = dependency.revision
    return record


def render(entries: Iterable[LockedKernel]) -> bytes:
    """kernels.lock's bytes: serde_json's pretty form of NixKernelLocks, and a final newline."""
    ordered = sorted(entries, key=lambda e: _sort_key(e.dependency))
    document = [
        {
            "dependency": dependency_record(e.dependency),
            "lock": {"commit": e.commit, "hash": e.hash},
        }
        for e in ordered
    ]
    # indent=2 and ", "/": " separators are serde_json's pretty printer; an empty list is "[]".
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def check_repo_id(repo_id: str, where: str) -> None:
    """Refuse a repository id the Hub would not have: owner/name of _HUB_NAME parts."""
    owner, _, name = repo_id.partition("/")
    if not (
        _HUB_NAME.fullmatch(owner)
        and _HUB_NAME.fullmatch(name)
        and not any(bad in repo_id for bad in ("--", ".."))
        and not name.endswith(".git")
    ):
        raise Build2CMakeError(
            f"{where}: {repo_id!r} is not a Hub repository id (owner/name of letters, digits, "
            "'-', '_' and '.', no '--' or '..')"
        )


# -- reading and checking a kernels.lock -------------------------------------------------------


def lock_path(project_dir: Path) -> Path:
    """Where a project's kernels.lock lives: beside its build.toml."""
    return project_dir / LOCK_NAME


def read_lock(project_dir: Path) -> tuple[LockedKernel, ...] | None:
    """The entries of the project's kernels.lock, or None when there is none. A file that is
    not a lock of kernels-data's format (a symlink, not JSON, any key, value or duplicate it
    does not allow) is one error naming the file."""
    path = lock_path(project_dir)
    if not os.path.lexists(path):
        return None
    if path.is_symlink():
        raise Build2CMakeError(
            f"{path}: is a symlink; kernels.lock must be a regular file (run `build2cmake lock "
            "--force` to replace it)"
        )
    raw = read_regular_file(path, RECORD_LIMIT_BYTES, LOCK_NAME, root=project_dir)
    try:
        document = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise Build2CMakeError(
            f"{path}: not valid JSON ({error}); not a kernels.lock as kernels-data writes it (run "
            "`build2cmake lock` to write it again)"
        ) from None
    return parse_lock(document, path)


def parse_lock(document: Any, path: Path) -> tuple[LockedKernel, ...]:
    """The entries of a parsed kernels.lock; one error naming `path` for anything it does not
    allow, as kernels-data's parser refuses it."""

    def bad(where: str, why: str) -> Build2CMakeError:
        return Build2CMakeError(
            f"{path}: {where}: {why}; not a kernels.lock as kernels-data writes it (run "
            "`build2cmake lock` to write it again)"
        )

    if not isinstance(document, list):
        raise bad("the top level", "expected a list of entries")
    entries: list[LockedKernel] = []
    seen: set[KernelDependency] = set()
    for i, entry in enumerate(document):
        where = f"[{i}]"
        if not isinstance(entry, dict) or set(entry) != _ENTRY_KEYS:
            raise bad(where, "expected an object with exactly `dependency` and `lock`")
        dependency = _parsed_dependency(entry["dependency"], f"{where}.dependency", bad)
        lock = entry["lock"]
        if not isinstance(lock, dict) or set(lock) != _LOCK_KEYS:
            raise bad(f"{where}.lock", "expected an object with exactly `commit` and `hash`")
        commit, sri = lock["commit"], lock["hash"]
        if not isinstance(commit, str) or not _COMMIT.fullmatch(commit):
            raise bad(f"{where}.lock.commit", "expected a commit of 40 lowercase hex digits")
        if not isinstance(sri, str) or not _is_sri(sri):
            raise bad(f"{where}.lock.hash", "expected sha256-<base64 of 32 bytes>")
        if dependency in seen:
            raise bad(where, f"duplicate dependency {dependency_text(dependency)}")
        seen.add(dependency)
        entries.append(LockedKernel(dependency, commit, sri))
    return tuple(entries)


def _parsed_dependency(value: Any, where: str, bad: Any) -> KernelDependency:
    if not isinstance(value, dict) or "repo-id" not in value:
        raise bad(where, "expected an object with `repo-id` and `version` or `revision`")
    keys = set(value)
    if keys not in ({"repo-id", "version"}, {"repo-id", "revision"}):
        raise bad(where, "expected exactly `repo-id` and one of `version` or `revision`")
    repo_id = value["repo-id"]
    if not isinstance(repo_id, str):
        raise bad(f"{where}.repo-id", "expected a string")
    try:
        check_repo_id(repo_id, f"{where}.repo-id")
    except Build2CMakeError as error:
        raise bad(f"{where}.repo-id", "not a Hub repository id") from error
    version = value.get("version")
    if "version" in value and (
        not isinstance(version, int) or isinstance(version, bool) or version < 0
    ):
        raise bad(f"{where}.version", "expected a whole number, 0 or more")
    revision = value.get("revision")
    if "revision" in value and (not isinstance(revision, str) or not _REVISION.fullmatch(revision)):
        raise bad(f"{where}.revision", "expected a branch, tag or commit name")
    return KernelDependency(repo_id, version, revision)


def _is_sri(text: str) -> bool:
    if not _SRI.fullmatch(text):
        return False
    try:
        return len(base64.b64decode(text[len("sha256-") :], validate=True)) == 32
    except (binascii.Error, ValueError):
        return False


def check_lock(project: Project, project_dir: Path) -> tuple[LockedKernel, ...] | None:
    """The lock `build` and `upload` use: None when build.toml has no kernel-depends and there
    is no kernels.lock (or there is none yet, which the caller notes); its entries when it
    matches build.toml's kernel-depends exactly. One error, saying to run `build2cmake lock`,
    when a dependency was added, removed or changed since; one naming the file when it is not a
    lock."""
    wanted = project_dependencies(project)
    locked = read_lock(project_dir)
    if locked is None:
        return None
    have = {e.dependency for e in locked}
    added = [d for d in wanted if d not in have]
    removed = sorted(have - set(wanted), key=_sort_key)
    if added or removed:
        changes = [f"added {dependency_text(d)}" for d in added]
        changes += [f"removed {dependency_text(d)}" for d in removed]
        raise Build2CMakeError(
            f"{lock_path(project_dir)}: no longer matches build.toml's kernel-depends "
            f"({'; '.join(changes)}); run `build2cmake lock` to lock them again"
        )
    return locked


def unlocked_note(project: Project, project_dir: Path) -> str | None:
    """The note for a project with kernel-depends and no kernels.lock yet."""
    if not project_dependencies(project) or os.path.lexists(lock_path(project_dir)):
        return None
    return (
        f"{lock_path(project_dir)}: none; build.toml's kernel-depends are not pinned to commits "
        "(`build2cmake lock` writes it)"
    )


# -- resolving through the Hub -----------------------------------------------------------------


def _hub() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise Build2CMakeError(
            "lock needs huggingface_hub: pip install 'build2cmake[upload]' "
            "(or pip install huggingface_hub)"
        ) from None
    return huggingface_hub


def _hub_error(what: str, error: BaseException) -> Build2CMakeError:
    # huggingface_hub's message: the HTTP status line, a documentation link, then the Hub's own
    # words; the first and the last say what happened. Escaped: the Hub's words are not ours.
    lines = [line for line in str(error).splitlines() if line.strip()]
    said = (lines[0] if len(lines) < 2 else f"{lines[0]} ({lines[-1]})") if lines else "failed"
    return Build2CMakeError(f"{what}: {printable(said)[:500]}")


def resolve_commit(api: Any, dependency: KernelDependency) -> str:
    """The commit `dependency` names: its repository's `v<N>` branch for `version = N` (as the
    kernels loader resolves versions), else the revision's commit; 40 lowercase hex digits."""
    repo_id = dependency.repo_id
    if dependency.version is not None:
        refs = api.list_repo_refs(repo_id, repo_type=REPO_TYPE)
        branch = f"v{dependency.version}"
        names = [b.name for b in refs.branches if isinstance(getattr(b, "name", None), str)]
        found = [b for b in refs.branches if getattr(b, "name", None) == branch]
        if not found:
            versions = sorted(
                int(n[1:]) for n in names if re.fullmatch(r"v[0-9]{1,9}", n, re.ASCII)
            )
            raise Build2CMakeError(
                f"{repo_id}: has no branch {branch} for version {dependency.version} "
                f"(its versions: {', '.join(f'v{v}' for v in versions) or 'none'})"
            )
        commit = found[0].target_commit
    else:
        revision = dependency.revision or ""
        if not _REVISION.fullmatch(revision):
            raise Build2CMakeError(
                f"{repo_id}: revision {revision!r} is not a branch, tag or commit name"
            )
        commit = revision
        if not _COMMIT.fullmatch(revision):
            commit = api.repo_info(repo_id, repo_type=REPO_TYPE, revision=revision).sha
    if not isinstance(commit, str) or not _COMMIT.fullmatch(commit):
        raise Build2CMakeError(
            f"{dependency_text(dependency)}: the Hub answered {printable(repr(commit))[:80]} as "
            "its commit, not 40 lowercase hex digits"
        )
    return commit


def _snapshot_files(api: Any, repo_id: str, commit: str) -> dict[str, int]:
    """Every file of the repository at `commit` (path -> size) that the fetcher keeps."""
    from huggingface_hub.hf_api import RepoFile

    files: dict[str, int] = {}
    for entry in api.list_repo_tree(repo_id, repo_type=REPO_TYPE, revision=commit, recursive=True):
        if not isinstance(entry, RepoFile):
            continue
        path, size = entry.path, entry.size
        parts = _checked_repo_path(path, repo_id)
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise Build2CMakeError(f"{repo_id}: the Hub lists {printable(path)!r} with no size")
        if parts[0] == _DOWNLOAD_CACHE:
            continue  # the fetcher deletes the download's .cache folder, and this with it
        if path in files:
            raise Build2CMakeError(f"{repo_id}: the Hub lists {printable(path)!r} twice")
        files[path] = size
        if len(files) > SNAPSHOT_FILE_LIMIT:
            raise Build2CMakeError(
                f"{repo_id}: holds more than {SNAPSHOT_FILE_LIMIT} files at {commit}; that is not "
                "a kernel repository"
            )
    listed = set(files)
    for path in listed:
        # A file where another file's folder would be: not a tree a download can lay out.
        parent = PurePosixPath(path).parent
        while parent != PurePosixPath("."):
            if parent.as_posix() in listed:
                raise Build2CMakeError(
                    f"{repo_id}: the Hub lists {printable(parent.as_posix())!r} as a file and a "
                    "folder"
                )
            parent = parent.parent
    return files


def _checked_repo_path(path: object, repo_id: str) -> tuple[str, ...]:
    """A file path from the Hub's listing as parts; one error for anything but plain names."""
    if not isinstance(path, str) or not path or len(path) > 4096:
        raise Build2CMakeError(f"{repo_id}: the Hub lists a file with no usable path")
    parts = tuple(path.split("/"))
    for part in parts:
        if (
            part in ("", ".", "..")
            or "\\" in part
            or any(ord(c) < 0x20 or ord(c) == 0x7F for c in part)
            or len(part.encode("utf-8", "surrogatepass")) > 255
        ):
            raise Build2CMakeError(
                f"{repo_id}: the Hub lists {printable(path)!r}, which is not a relative path of "
                "plain names"
            )
    return parts


def snapshot_hash(api: Any, repo_id: str, commit: str) -> str:
    """The SRI hash of the repository at `commit` as nix-builder's fetcher computes it: each
    file downloaded (one at a time, into a temporary folder) and streamed into the NAR hash."""
    files = _snapshot_files(api, repo_id, commit)
    hasher = NarHasher()
    with tempfile.TemporaryDirectory(prefix="build2cmake-lock-") as workdir:
        for parts in walk_order(files):
            name = "/".join(parts)
            local = api.hf_hub_download(
                repo_id,
                name,
                repo_type=REPO_TYPE,
                revision=commit,
                local_dir=workdir,
                tqdm_class=_silent_progress(),
            )
            _hash_download(hasher, Path(local), Path(workdir), parts, files[name], repo_id)
    return hasher.sri()


def _silent_progress() -> Any:
    """A progress bar class that shows nothing: huggingface_hub's bars would print the Hub's
    file names to the terminal as they are (whatever HF_HUB_DISABLE_PROGRESS_BARS says)."""
    hub_tqdm: Any = importlib.import_module("huggingface_hub.utils.tqdm").tqdm

    class Silent(hub_tqdm):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    return Silent


def _hash_download(
    hasher: NarHasher, local: Path, workdir: Path, parts: Sequence[str], size: int, repo_id: str
) -> None:
    expected = workdir.joinpath(*parts)
    if os.path.abspath(local) != os.path.abspath(expected):
        raise Build2CMakeError(
            f"{repo_id}: {printable('/'.join(parts))!r} was downloaded to an unexpected place"
        )
    fd = os.open(expected, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size != size:
            raise Build2CMakeError(
                f"{repo_id}: {printable('/'.join(parts))!r}: the download is not the "
                f"{size}-byte file the Hub lists"
            )
        hasher.begin_file(parts, size)
        done = 0
        while done < size:
            chunk = os.read(fd, min(_CHUNK_BYTES, size - done))
            if not chunk:
                break
            hasher.update(chunk)
            done += len(chunk)
        if done != size:
            raise Build2CMakeError(f"{repo_id}: {printable('/'.join(parts))!r} changed while read")
    finally:
        os.close(fd)
    os.unlink(expected)


def _network_errors() -> tuple[type[BaseException], ...]:
    """What huggingface_hub raises for an unreachable or refusing Hub: HTTP errors (OSErrors),
    transport errors of its HTTP client, and names it does not accept."""
    from huggingface_hub.errors import HFValidationError

    errors: tuple[type[BaseException], ...] = (OSError, HFValidationError)
    try:
        transport = importlib.import_module("httpx2")
        errors += (transport.HTTPError,)
    except (ImportError, AttributeError):
        pass
    return errors


def resolve(dependencies: Sequence[KernelDependency]) -> list[LockedKernel]:
    """Each dependency's commit and snapshot hash, from the Hub (HF_ENDPOINT, HF_TOKEN or the
    token `hf auth login` stored, as huggingface_hub reads them)."""
    hub = _hub()
    api = hub.HfApi()
    # huggingface_hub logs to the terminal itself, with the Hub's words in the lines; every
    # failure here becomes one escaped error line instead.
    hub_logger = logging.getLogger("huggingface_hub")
    level = hub_logger.level
    hub_logger.setLevel(logging.CRITICAL + 1)
    locked = []
    try:
        for dependency in dependencies:
            check_repo_id(dependency.repo_id, f"kernel-depends {dependency.repo_id!r}")
            try:
                commit = resolve_commit(api, dependency)
                sri = snapshot_hash(api, dependency.repo_id, commit)
            except _network_errors() as error:
                raise _hub_error(dependency_text(dependency), error) from None
            locked.append(LockedKernel(dependency, commit, sri))
    finally:
        hub_logger.setLevel(level)
    return locked


# -- writing -----------------------------------------------------------------------------------


def write_lock(project_dir: Path, content: bytes, *, force: bool) -> bool:
    """Write kernels.lock atomically through safefs; False when it already holds `content`.

    A kernels.lock that is a lock of this format (ours, or kernel-builder's) is rewritten; any
    other file there (another format, not JSON, a symlink, a folder) is kept unless `force`.
    """
    path = lock_path(project_dir)
    if not force and os.path.lexists(path):
        try:
            read_lock(project_dir)
        except Build2CMakeError as error:
            raise Build2CMakeError(
                f"{path}: exists and is not a kernels.lock this command writes ({error}); move "
                "it away, or pass --force to replace it"
            ) from None
    with ProjectFolder(checked_target(project_dir)) as folder, folder.locked():
        info = folder.lstat(LOCK_NAME)
        if info is not None and stat.S_ISDIR(info.st_mode):
            raise Build2CMakeError(f"{path}: is a folder; move it away to write the lock")
        if (
            info is not None
            and stat.S_ISREG(info.st_mode)
            and info.st_size == len(content)
            and folder.read(LOCK_NAME, len(content), LOCK_NAME) == content
        ):
            return False
        folder.write_atomic(LOCK_NAME, content)
    return True


def checked_lock(project: Project, build_toml: Path) -> str | None:
    """What `build` and `upload` do with kernels.lock: refuse one that is malformed or no longer
    matches build.toml's kernel-depends (one error, saying to run `build2cmake lock`); the note
    to show when build.toml has kernel-depends and no lock yet."""
    check_lock(project, build_toml.parent)
    return unlocked_note(project, build_toml.parent)


def lock_project(build_toml: Path, *, force: bool = False) -> LockReport:
    """`build2cmake lock`: resolve build.toml's kernel-depends through the Hub to commits and
    snapshot hashes, and write kernels.lock beside build.toml (kernels-data's NixKernelLocks)."""
    project = load_project(build_toml)
    project_dir = build_toml.parent
    path = lock_path(project_dir)
    if not force and os.path.lexists(path):
        # Refused before anything is downloaded (write_lock checks again when it writes).
        try:
            read_lock(project_dir)
        except Build2CMakeError as error:
            raise Build2CMakeError(
                f"{path}: exists and is not a kernels.lock this command writes ({error}); move "
                "it away, or pass --force to replace it"
            ) from None
    dependencies = project_dependencies(project)
    if not dependencies and not os.path.lexists(path):
        return LockReport(path, (), False)
    entries = tuple(resolve(dependencies))
    written = write_lock(project_dir, render(entries), force=force)
    return LockReport(path, entries, written)
