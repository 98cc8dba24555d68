"""Where toolchains live, which are there, and the lock each one is made, run and removed under.

The store is one folder: `/var/cache/build2cmake` as root (shared by every root process on the
machine, CI included), `$XDG_CACHE_HOME/build2cmake/toolchains` (default
`~/.cache/build2cmake/toolchains`) for anyone else; `$BUILD2CMAKE_TOOLCHAINS` names another.
In it, per toolchain:

    rocm-chroot-<suite>/          the root filesystem, renamed into place once complete
        .b2c-stamp                the recipe it was made from (recipes.Recipe.stamp)
        .b2c-rocm-version         the version of its ROCm (written while it was made)
    rocm-chroot-<suite>.lock      flock: exclusive to make or remove it, shared to run in it
    rocm-chroot-<suite>.log       the last install's output
    rocm-chroot-<suite>.probe.json   what its compiler targets and which libraries it has
    rocm-chroot-<suite>.tmp.<pid> being made (removed by the next install, under the lock)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from build2cmake.ground.errors import Build2CMakeError
from build2cmake.toolchains.recipes import RECIPES, Recipe

STORE_VARIABLE = "BUILD2CMAKE_TOOLCHAINS"
SYSTEM_STORE = Path("/var/cache/build2cmake")
PREFIX = "rocm-chroot-"
STAMP = ".b2c-stamp"
VERSION = ".b2c-rocm-version"
_READ_LIMIT = 1 << 16
_VERSION = re.compile(r"[0-9]+\.[0-9]+[0-9A-Za-z.+~:-]{0,40}")


def default_root(env: Mapping[str, str] | None = None, euid: int | None = None) -> Path:
    """The store of this user: $BUILD2CMAKE_TOOLCHAINS, else /var/cache/build2cmake as root,
    else $XDG_CACHE_HOME/build2cmake/toolchains."""
    env = os.environ if env is None else env
    euid = os.geteuid() if euid is None else euid
    if env.get(STORE_VARIABLE):
        return Path(env[STORE_VARIABLE])
    if euid == 0:
        return SYSTEM_STORE
    cache = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(cache) / "build2cmake" / "toolchains"


@dataclass(frozen=True)
class Toolchain:
    """A complete toolchain in a store."""

    name: str  # the recipe's (rocm-7.2); the folder's suite for one no recipe knows
    folder: Path
    suite: str
    version: str  # as recorded: 7.2.4-1~exp2
    recipe: Recipe | None
    current: bool  # made from the recipe as it is now
    owner: int  # uid owning the folder: who may run in it without root

    @property
    def release(self) -> tuple[int, int]:
        """The ROCm major.minor it holds."""
        match = re.match(r"([0-9]+)\.([0-9]+)", self.version)
        assert match is not None, self.version  # read_toolchain checked it
        return int(match[1]), int(match[2])

    @property
    def env(self) -> dict[str, str]:
        """Variables its recipe sets for commands run inside."""
        return dict(self.recipe.env) if self.recipe is not None else {}

    def missing_tools(self) -> list[str]:
        """Files its recipe says it has that are not there (a toolchain damaged since)."""
        tools = self.recipe.tools if self.recipe is not None else ()
        # lexists: a tool may be a link that only resolves inside the toolchain.
        return [t for t in tools if not os.path.lexists(self.folder / t)]

    @property
    def status(self) -> str:
        """In words, for `toolchain list`."""
        missing = self.missing_tools()
        if missing:
            return f"damaged (no {missing[0]}; install again)"
        return "installed" if self.current else "installed (older recipe; install remakes it)"


def _read_small(path: Path) -> str | None:
    try:
        if path.is_symlink() or not path.is_file():
            return None
        with open(path, "rb") as handle:
            return handle.read(_READ_LIMIT).decode("utf-8", "replace")
    except OSError:
        return None


def read_toolchain(folder: Path, recipes: Sequence[Recipe] = RECIPES) -> Toolchain | None:
    """The toolchain in `folder`, or None unless it is a complete one: made by build2cmake
    (a real folder `rocm-chroot-<suite>` holding the stamp and the version record, which are
    written before it is renamed into place)."""
    suite = folder.name[len(PREFIX) :]
    if not folder.name.startswith(PREFIX) or not re.fullmatch(r"[a-z0-9]+", suite):
        return None  # *.tmp.* (being made), *.old.* (being removed), *.log, *.lock
    try:
        if folder.is_symlink() or not folder.is_dir():
            return None
        owner = folder.stat().st_uid
    except OSError:
        return None
    stamp = _read_small(folder / STAMP)
    recorded = _read_small(folder / VERSION)
    if stamp is None or recorded is None:
        return None
    match = _VERSION.match(recorded.strip())
    if match is None:
        return None
    known = next((r for r in recipes if r.suite == suite), None)
    # Compared without trailing newlines, as the shell that wrote older stamps compared them.
    current = known is not None and stamp.rstrip("\n") == known.stamp().rstrip("\n")
    return Toolchain(
        name=known.name if known is not None else suite,
        folder=folder,
        suite=suite,
        version=match[0],
        recipe=known,
        current=current,
        owner=owner,
    )


def installed(root: Path | None = None, recipes: Sequence[Recipe] = RECIPES) -> list[Toolchain]:
    """Every complete toolchain in the store, by name."""
    root = root or default_root()
    try:
        folders = sorted(root.glob(PREFIX + "*"))
    except OSError:
        return []
    found = [read_toolchain(f, recipes) for f in folders]
    return sorted((t for t in found if t is not None), key=lambda t: t.name)


def find(name: str, root: Path | None = None, recipes: Sequence[Recipe] = RECIPES) -> Toolchain:
    """The installed toolchain `name`, or one error saying how to install it."""
    for toolchain in installed(root, recipes):
        if toolchain.name == name:
            return toolchain
    known = [r.name for r in recipes]
    if name not in known:
        raise Build2CMakeError(f"no toolchain {name!r}: build2cmake makes {', '.join(known)}")
    raise Build2CMakeError(
        f"toolchain {name} is not installed (in {root or default_root()}); install it: "
        f"build2cmake toolchain install {name}"
    )


@contextlib.contextmanager
def locked(root: Path, recipe_folder: str, *, shared: bool) -> Iterator[None]:
    """Hold the toolchain's lock: exclusive to make or remove it, shared to run in it. Making
    rocm-7.2 does not hold up a run in rocm-6.4 (a lock per toolchain)."""
    path = root / f"{recipe_folder}.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as error:
        why = error.strerror or str(error)
        raise Build2CMakeError(f"{path}: cannot open the toolchain's lock: {why}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def related_paths(root: Path, recipe_folder: str) -> list[Path]:
    """Everything of one toolchain in the store but its lock: the folder, the ones being made
    or removed, its log, probe record and APT preferences."""
    paths = [root / recipe_folder]
    with contextlib.suppress(OSError):
        paths += sorted(root.glob(f"{recipe_folder}.tmp.*"))
        paths += sorted(root.glob(f"{recipe_folder}.old.*"))
    paths += [root / f"{recipe_folder}{suffix}" for suffix in (".log", ".probe.json", ".pref")]
    return [p for p in paths if p.is_symlink() or p.exists()]
