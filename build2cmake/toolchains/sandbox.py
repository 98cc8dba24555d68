"""Running a command inside a toolchain, as root or rootless.

As root, a command runs in a private mount namespace (`unshare --mount`): /proc, /dev, /sys, a
fresh /tmp and the folders asked for are mounted into the toolchain's root filesystem, then
`chroot`. Every mount disappears with the namespace, even when the command is killed.

Without root, the same runs in a user namespace of one's own where user namespaces are allowed:
the user is root inside, and a subordinate id range (/etc/subuid, /etc/subgid; mapped with
newuidmap) stands for the other users a Debian system has (_apt, ...). The toolchain's files are
the user's own (it was made in that same namespace, see install.py), so nothing outside changes
owner. mmdebstrap's own `--mode=unshare` maps root to a subordinate id instead, which cannot
enter a private folder such as ~/.cache: that is why the namespace is ours.

What runs inside imports the build2cmake that runs here: its package folder is copied into the
run's scratch folder (the /tmp inside), and only that is on PYTHONPATH; never this checkout's
path nor this Python's site-packages (another Python, other C extensions).

The user's include folders reach builds inside: the folders of $CPATH, $C_INCLUDE_PATH,
$CPLUS_INCLUDE_PATH and $BUILD2CMAKE_INCLUDE_DIRS (':'-separated) are mounted read-only at their
own paths, and the variables are set inside ($BUILD2CMAKE_INCLUDE_DIRS joining $CPATH). A folder
that would hide one of the toolchain's own (/usr/include) is not mounted, and said so.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import build2cmake
from build2cmake.ground.errors import Build2CMakeError, printable
from build2cmake.toolchains import store
from build2cmake.toolchains.recipes import VENV

INCLUDE_VARIABLE = "BUILD2CMAKE_INCLUDE_DIRS"
COMPILER_INCLUDE_VARIABLES = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH")
# The folders the wheel carries in build2cmake/_data/ (pyproject.toml's force-include); a source
# checkout has them beside the package.
_DATA_FOLDERS = ("cmake_templates", "torch-ext", "project_templates")
# Inside the toolchain, the copy of build2cmake lives here (in the run's /tmp).
INSIDE_PYTHONPATH = "/tmp/.b2c-python"
_SUBORDINATE_IDS = 65536

# The mounts and the chroot, run by bash in the new namespaces. Every value comes as an
# argument ("$@"), never spliced into the text.
_INNER = r"""
set -e
dir=$1 scratch=$2 workdir=$3
shift 3
mount -t proc proc "$dir/proc" 2>/dev/null || mount --rbind /proc "$dir/proc"
mount --rbind /dev "$dir/dev"
mount --rbind /sys "$dir/sys"
mount --bind "$scratch" "$dir/tmp"
n=$1; shift
for ((i = 0; i < n; i++)); do mkdir -p "$dir$1"; mount --bind "$1" "$dir$1"; shift; done
n=$1; shift
for ((i = 0; i < n; i++)); do
  mkdir -p "$dir$2"; mount --bind "$1" "$dir$2"; mount -o remount,bind,ro "$dir$2"; shift 2
done
n=$1; shift
vars=()
for ((i = 0; i < n; i++)); do vars+=("$1"); shift; done
cp -L /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
exec chroot "$dir" /usr/bin/env -i "${vars[@]}" /bin/sh -c 'cd "$1" && shift && exec "$@"' \
  sh "$workdir" "$@"
"""


@dataclass(frozen=True)
class Mode:
    """How toolchains are made and run by this user: as root, or in a user namespace."""

    rootless: bool
    uids: tuple[int, int] = (0, 0)  # subordinate uid range: start, count
    gids: tuple[int, int] = (0, 0)

    @property
    def name(self) -> str:
        """In words: "root" or "rootless"."""
        return "rootless" if self.rootless else "root"

    def namespace(self) -> list[str]:
        """The command prefix that enters the namespaces a toolchain is made and run in."""
        if not self.rootless:
            return ["unshare", "--mount", "--propagation", "private"]
        return [
            "unshare", "--map-root-user",
            f"--map-users={self.uids[0]},1,{self.uids[1]}",
            f"--map-groups={self.gids[0]},1,{self.gids[1]}",
            "--mount", "--propagation", "private", "--pid", "--fork", "--mount-proc",
        ]  # fmt: skip


def _subordinate(path: Path, user: str, uid: int) -> tuple[int, int] | None:
    """The first range of at least 65536 ids `path` (/etc/subuid) gives `user` (or `uid`)."""
    try:
        text = path.read_text("utf-8", "replace")[: 1 << 20]
    except OSError:
        return None
    for line in text.splitlines():
        parts = line.strip().split(":")
        if len(parts) != 3 or parts[0] not in (user, str(uid)):
            continue
        if parts[1].isdigit() and parts[2].isdigit() and int(parts[2]) >= _SUBORDINATE_IDS:
            return int(parts[1]), _SUBORDINATE_IDS
    return None


def rootless_problem(etc: Path = Path("/etc")) -> tuple[str | None, Mode]:
    """Whether this (non-root) user can make and run toolchains in a user namespace: None and
    the mode, or one line saying why not and what to do."""
    uid = os.getuid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    if shutil.which("unshare") is None:
        return "rootless toolchains need unshare (util-linux)", Mode(True)
    probe = subprocess.run(
        ["unshare", "--user", "--map-root-user", "true"], capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or ["refused"])[-1]
        return (
            f"this kernel does not let {user} make a user namespace ({why}): rootless "
            "toolchains cannot be made; run `build2cmake toolchain install` as root, or allow "
            "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
            "user.max_user_namespaces > 0)",
            Mode(True),
        )
    if shutil.which("newuidmap") is None or shutil.which("newgidmap") is None:
        return (
            "rootless toolchains need newuidmap and newgidmap (Debian/Ubuntu: apt-get install "
            "uidmap), or run as root",
            Mode(True),
        )
    uids = _subordinate(etc / "subuid", user, uid)
    gids = _subordinate(etc / "subgid", user, os.getgid())
    if uids is None or gids is None:
        missing = "/etc/subuid" if uids is None else "/etc/subgid"
        return (
            f"rootless toolchains need a range of {_SUBORDINATE_IDS} subordinate ids for {user} "
            f"in {missing} (as root: usermod --add-subuids 100000-165535 --add-subgids "
            f"100000-165535 {user}), or run as root",
            Mode(True),
        )
    return None, Mode(True, uids, gids)


def current_mode() -> Mode:
    """Root's mode, or the rootless one; one error line when neither is possible here."""
    if sys.platform != "linux":
        raise Build2CMakeError(f"toolchains are Linux root filesystems; this is {sys.platform}")
    if os.geteuid() == 0:
        return Mode(False)
    problem, mode = rootless_problem()
    if problem is not None:
        raise Build2CMakeError(problem)
    return mode


def copy_package(destination: Path) -> Path:
    """Copy the build2cmake that runs (its package folder, and from a source checkout the data
    a wheel carries in build2cmake/_data/) into `destination`; returns the folder to put on
    PYTHONPATH."""
    package = Path(build2cmake.__file__).resolve().parent
    target = destination / "build2cmake"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(package, target, ignore=ignore, symlinks=True)
    if not (package / "_data").is_dir():
        for name in _DATA_FOLDERS:
            shutil.copytree(package.parent / name, target / "_data" / name, ignore=ignore)
    return destination


def _shadows(toolchain: store.Toolchain, path: Path) -> str | None:
    """Why mounting at `path` would hide part of the toolchain, or None."""
    if path == Path("/tmp"):
        return "/tmp inside is the run's own"
    if path.parts[:2] == ("/", "tmp"):
        return None  # made inside the run's own /tmp
    inside = toolchain.folder / path.relative_to("/")
    if not os.path.lexists(inside):
        return None
    if inside.is_symlink() or not inside.is_dir():
        return f"{path} is a file of toolchain {toolchain.name}"
    try:
        if not _mount_points_only(inside):
            return f"toolchain {toolchain.name} has its own {path}"
    except OSError as error:
        return f"{path}: {error.strerror}"
    return None  # empty folders: mount points of earlier runs (a bind of /a/b leaves /a/b)


def _mount_points_only(folder: Path, limit: int = 256) -> bool:
    """Whether `folder` holds nothing but folders, each as empty or holding only such folders
    (what `mkdir -p` of earlier runs' mount points leaves); at most `limit` entries are looked
    at, and more count as the toolchain's own."""
    pending, seen = [folder], 0
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                seen += 1
                if seen > limit or entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
                    return False
                pending.append(Path(entry.path))
    return True


@dataclass(frozen=True)
class IncludeFolders:
    """The user's include folders as a build inside sees them."""

    variables: dict[str, str]  # CPATH, ... to set inside
    folders: tuple[Path, ...]  # mounted read-only at their own paths
    notes: tuple[str, ...]  # entries left out, and why


def include_folders(
    toolchain: store.Toolchain, env: Mapping[str, str], extra: Sequence[Path] = ()
) -> IncludeFolders:
    """$CPATH, $C_INCLUDE_PATH, $CPLUS_INCLUDE_PATH, $BUILD2CMAKE_INCLUDE_DIRS (and `extra`
    folders) for a run in `toolchain`: each existing absolute folder mounted read-only at its
    path; relative or shadowing entries left out with a note, missing ones left out as the
    compiler leaves them out. A folder the user named to us must exist."""
    variables: dict[str, str] = {}
    folders: list[Path] = []
    notes: list[str] = []
    named = [(INCLUDE_VARIABLE, e) for e in (env.get(INCLUDE_VARIABLE) or "").split(":")]
    named += [("--include-dir", str(p)) for p in extra]
    for variable in COMPILER_INCLUDE_VARIABLES:
        entries = [(variable, e) for e in (env.get(variable) or "").split(":")]
        if variable == "CPATH":
            entries += named  # ours are searched like CPATH's (-I, after the build's own)
        kept: list[str] = []
        for source, entry in entries:
            if not entry:
                continue
            path = Path(entry)
            if not path.is_absolute():
                notes.append(f"{source} entry {entry}: not an absolute path, not mounted")
                continue
            if not path.is_dir():
                if source != variable:
                    raise Build2CMakeError(f"{source} {entry}: not a folder")
                continue
            path = Path(os.path.normpath(path))
            why = _shadows(toolchain, path)
            if why is not None:
                notes.append(f"{source} entry {entry}: not mounted: {why}")
                continue
            if str(path) not in kept:
                kept.append(str(path))
            if path not in folders:
                folders.append(path)
        if kept:
            variables[variable] = ":".join(kept)
    return IncludeFolders(variables, tuple(folders), tuple(notes))


def run(
    toolchain: store.Toolchain,
    command: Sequence[str],
    *,
    cwd: Path,
    binds: Sequence[Path] = (),
    include_dirs: Sequence[Path] = (),
    env: Mapping[str, str] | None = None,
    mode: Mode | None = None,
    root: Path | None = None,
    notes: IO[str] | None = None,
    **popen: Any,
) -> subprocess.CompletedProcess[Any]:
    """Run `command` inside `toolchain`, in `cwd` (mounted, with each of `binds`, at its own
    path, read-write), with the user's include folders (from `env`, default os.environ, and
    `include_dirs`) read-only. `popen` goes to subprocess.run (capture_output, text, timeout,
    ...). Notes about include folders left out go to `notes` (default stderr)."""
    mode = mode or current_mode()
    env = os.environ if env is None else env
    if mode.rootless and toolchain.owner != os.geteuid():
        raise Build2CMakeError(
            f"toolchain {toolchain.name} in {toolchain.folder} belongs to uid {toolchain.owner}: "
            f"run as that user, or install your own: build2cmake toolchain install "
            f"{toolchain.name}"
        )
    missing = toolchain.missing_tools()
    if missing:
        raise Build2CMakeError(
            f"toolchain {toolchain.name} in {toolchain.folder} has no {missing[0]}: install it "
            f"again: build2cmake toolchain install {toolchain.name}"
        )
    cwd = cwd.resolve()
    rw: list[Path] = []
    for path in [b.resolve() for b in binds]:
        why = _shadows(toolchain, path)
        if why is not None:
            raise Build2CMakeError(f"{path}: cannot be mounted into the toolchain: {why}")
        if path not in rw:
            rw.append(path)
    # The current folder too, unless it is one of the toolchain's own (then it is that one).
    if _shadows(toolchain, cwd) is None and cwd not in rw:
        rw.insert(0, cwd)
    includes = include_folders(toolchain, env, include_dirs)
    for note in includes.notes:
        print(printable(f"build2cmake: {note}"), file=notes or sys.stderr, flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="b2c-toolchain-tmp."))
    try:
        copy_package(scratch / INSIDE_PYTHONPATH.rsplit("/", 1)[1])
        variables = {
            "HOME": "/root",
            "TERM": env.get("TERM") or "dumb",
            "LANG": "C.UTF-8",
            "PATH": f"{VENV}/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "PIP_ROOT_USER_ACTION": "ignore",
            "PYTHONPATH": INSIDE_PYTHONPATH,
            "PYTHONDONTWRITEBYTECODE": "1",
            # Compiles go through the toolchain's ccache; CCACHE_BASEDIR makes builds in
            # different temporary folders (tests) share it.
            "CCACHE_DIR": "/var/cache/ccache",
            "CCACHE_BASEDIR": "/tmp",
            # uv (build --variants) trusts the toolchain's store, which holds this machine's
            # local certificate authorities too, as pip does.
            "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
            "BUILD2CMAKE_IN_TOOLCHAIN": toolchain.name,
            **toolchain.env,
            **includes.variables,
        }
        ro = [arg for folder in includes.folders for arg in (str(folder.resolve()), str(folder))]
        arguments = [
            "/bin/bash", "-c", _INNER, "bash", str(toolchain.folder), str(scratch), str(cwd),
            str(len(rw)), *map(str, rw), str(len(includes.folders)), *ro,
            str(len(variables)), *(f"{k}={v}" for k, v in variables.items()), *command,
        ]  # fmt: skip
        with store.locked(root or toolchain.folder.parent, toolchain.folder.name, shared=True):
            return subprocess.run([*mode.namespace(), *arguments], check=False, **popen)
    finally:
        remove_tree(scratch, mode)


def remove_tree(path: Path, mode: Mode) -> None:
    """Remove `path` (a toolchain, or a run's scratch folder), whoever inside made its files:
    rootless, in the namespace, where every id the toolchain uses is one's own."""
    if not path.exists() and not path.is_symlink():
        return
    command = ["rm", "-rf", "--one-file-system", "--", str(path)]
    if mode.rootless:
        command = [*mode.namespace(), *command]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0 or path.exists():
        why = (result.stderr.strip().splitlines() or ["still there"])[-1]
        raise Build2CMakeError(f"{path}: could not be removed: {why}")
