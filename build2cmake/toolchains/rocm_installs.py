"""The ROCm installations on this machine, by version, and which one builds a Hub variant.

A ROCm variant (`torch2.13-rocm72`) is built with a ROCm of the same major.minor release. The
places looked in are those `cmake_templates/rocm/build2cmake_find_rocm.cmake` searches, each
giving its version the way its layout records it:

- `$ROCM_PATH`, `$HIP_PATH` (or its parent, when it names `<root>/hip`), `/opt/rocm` and AMD's
  side-by-side release trees `/opt/rocm-X.Y.Z`: `<root>/.info/version` (`7.1.1-38`), else
  `<root>/include/hip/hip_version.h`, else the folder's name;
- the distribution's `/usr` (Debian, Ubuntu): the version of the installed `libamdhip64-dev`
  package (dpkg's status file), else `hip_version.h`;
- build2cmake's own toolchains (build2cmake.toolchains: `build2cmake toolchain install rocm-7.2`),
  in the store (/var/cache/build2cmake as root): the version recorded when each was made. A
  toolchain's ROCm is used by building inside it.

Every place is a field of `SearchRoots`, so tests point them at fake trees.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from build2cmake.toolchains import store
from build2cmake.toolchains.recipes import newest

# Files read here are small text files; a larger one is not what we look for.
_MAX_READ = 1 << 16
_DPKG_STATUS_MAX = 64 << 20
_VERSION = re.compile(r"([0-9]+)\.([0-9]+)(?:\.([0-9]+))?")


@dataclass(frozen=True)
class RocmInstall:
    """One ROCm: its prefix, its version, where it was found, and its chroot (if in one)."""

    root: Path  # the prefix (-DBUILD2CMAKE_ROCM_PATH); inside the chroot when `chroot` is set
    version: str  # X.Y or X.Y.Z
    found_in: str  # in words: "$ROCM_PATH", "/opt/rocm-7.1.1", "build2cmake toolchain rocm-7.2"
    chroot: Path | None = None  # the toolchain's folder, when it is one
    suite: str | None = None  # the toolchain's folder suffix (rocm72; scripts/rocm-chroot.sh's)
    toolchain: str | None = None  # the toolchain's name (rocm-7.2)

    @property
    def release(self) -> tuple[int, int]:
        """major.minor, the part a Hub variant names (rocm72 -> (7, 2))."""
        match = _VERSION.match(self.version)
        assert match is not None, self.version
        return int(match[1]), int(match[2])


@dataclass(frozen=True)
class SearchRoots:
    """Where ROCm installations are looked for (the real machine's places by default)."""

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    opt: Path = Path("/opt")
    system_prefix: Path = Path("/usr")
    dpkg_status: Path = Path("/var/lib/dpkg/status")
    # The store of build2cmake's toolchains ($BUILD2CMAKE_TOOLCHAINS moves it).
    chroot_cache: Path = field(default_factory=lambda: store.default_root())

    def places(self) -> list[str]:
        """The places searched, in words, for an error message."""
        places = [
            f"$ROCM_PATH ({self.env.get('ROCM_PATH') or 'unset'})",
            f"$HIP_PATH ({self.env.get('HIP_PATH') or 'unset'})",
            str(self.opt / "rocm"),
            str(self.opt / "rocm-X.Y.Z"),
            f"{self.system_prefix} (libamdhip64-dev)",
            f"build2cmake toolchains in {self.chroot_cache / (store.PREFIX + '*')} "
            f"(build2cmake toolchain list; e.g. build2cmake toolchain install {newest().name})",
        ]
        return places


def _read_small(path: Path) -> str | None:
    try:
        if not path.is_file():
            return None
        with open(path, "rb") as handle:
            return handle.read(_MAX_READ).decode("utf-8", "replace")
    except OSError:
        return None


def _release_file_version(root: Path) -> str | None:
    """AMD release trees: `.info/version` holds e.g. `7.1.1-38` (build number after the dash)."""
    text = _read_small(root / ".info" / "version")
    match = _VERSION.match(text.strip()) if text else None
    return match[0] if match else None


def _header_version(root: Path) -> str | None:
    """HIP_VERSION_MAJOR.MINOR from hip_version.h (its PATCH is a build number, left out)."""
    text = _read_small(root / "include" / "hip" / "hip_version.h")
    if text is None:
        return None
    parts = []
    for name in ("MAJOR", "MINOR"):
        match = re.search(rf"^#define HIP_VERSION_{name} ([0-9]+)\s*$", text, re.MULTILINE)
        if match is None:
            return None
        parts.append(match[1])
    return ".".join(parts)


def _name_version(root: Path) -> str | None:
    match = re.fullmatch(r"rocm-([0-9]+\.[0-9]+(?:\.[0-9]+)?)", root.name)
    return match[1] if match else None


def _dpkg_version(status: Path, package: str = "libamdhip64-dev") -> str | None:
    """The X.Y.Z of an installed Debian package, from dpkg's status file."""
    try:
        if not status.is_file() or status.stat().st_size > _DPKG_STATUS_MAX:
            return None
        text = status.read_text("utf-8", "replace")
    except OSError:
        return None
    for stanza in text.split("\n\n"):
        if re.search(rf"^Package: {re.escape(package)}$", stanza, re.MULTILINE) is None:
            continue
        if re.search(r"^Status: install ok installed$", stanza, re.MULTILINE) is None:
            continue
        version = re.search(r"^Version: (?:[0-9]+:)?(\S+)$", stanza, re.MULTILINE)
        match = _VERSION.match(version[1]) if version else None
        if match:
            return match[0]
    return None


def _tree_version(root: Path) -> str | None:
    return _release_file_version(root) or _header_version(root) or _name_version(root)


def _release_trees(roots: SearchRoots) -> list[tuple[Path, str]]:
    candidates: list[tuple[Path, str]] = []
    for variable in ("ROCM_PATH", "HIP_PATH"):
        value = roots.env.get(variable)
        if not value:
            continue
        path = Path(value)
        candidates.append((path, f"${variable}"))
        if variable == "HIP_PATH" and path.name == "hip":
            candidates.append((path.parent, f"${variable}/.."))
    candidates.append((roots.opt / "rocm", str(roots.opt / "rocm")))
    try:
        side_by_side = sorted(roots.opt.glob("rocm-*"), reverse=True)
    except OSError:
        side_by_side = []
    candidates += [(tree, str(tree)) for tree in side_by_side]
    return candidates


def _chroots(roots: SearchRoots) -> list[RocmInstall]:
    """build2cmake's complete toolchains (see toolchains.store), newest release first."""
    found = []
    for toolchain in store.installed(roots.chroot_cache):
        match = _VERSION.match(toolchain.version)  # 7.2.4 of 7.2.4-1~exp2
        if match is None:
            continue
        found.append(
            RocmInstall(
                Path("/usr"),
                match[0],
                f"build2cmake toolchain {toolchain.name}",
                chroot=toolchain.folder,
                suite=toolchain.suite,
                toolchain=toolchain.name,
            )
        )
    return sorted(found, key=lambda install: install.release, reverse=True)


def discover(roots: SearchRoots | None = None) -> list[RocmInstall]:
    """Every ROCm found, in search order; a tree reached twice (/opt/rocm -> rocm-7.1.1) once."""
    roots = roots or SearchRoots()
    installs: list[RocmInstall] = []
    seen: set[Path] = set()

    def add(install: RocmInstall) -> None:
        key = install.chroot or install.root.resolve()
        if key not in seen:
            seen.add(key)
            installs.append(install)

    for tree, found_in in _release_trees(roots):
        if tree.is_dir():
            version = _tree_version(tree)
            if version is not None:
                add(RocmInstall(tree, version, found_in))
    system = roots.system_prefix
    if (system / "include" / "hip").is_dir():
        version = _dpkg_version(roots.dpkg_status) or _header_version(system)
        if version is not None:
            add(RocmInstall(system, version, f"{system} (distribution packages)"))
    for install in _chroots(roots):
        add(install)
    return installs


def pick(installs: list[RocmInstall], release: tuple[int, int]) -> RocmInstall | None:
    """The first install of ROCm `release` (major, minor): one on this machine before one in a
    chroot, as `installs` is ordered."""
    for install in installs:
        if install.release == release:
            return install
    return None
