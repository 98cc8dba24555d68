"""`build2cmake toolchain install` and `remove`: make a toolchain from its recipe, or delete it.

A toolchain is made by mmdebstrap in a folder beside its final one (`<folder>.tmp.<pid>`), under
the toolchain's exclusive lock, and renamed into place only once complete: a folder at the final
path is always whole, and an interrupted install leaves only a `.tmp.` folder that the next one
removes. Everything that fills the root filesystem runs inside mmdebstrap's own steps (its
customize hooks run with the chroot's /proc, /dev and network set up): the venv with the Python
tools, this machine's local certificate authorities, the ROCm version record and the check that
the tools import. As root, mmdebstrap runs in its root mode; without root, the same root mode
runs in the user namespace of sandbox.Mode, so the files are the user's own.

One progress line per stage goes to the terminal (mmdebstrap's own stages, then ours), the whole
output to `<folder>.log` in the store; the last line gives the size and the time taken.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from build2cmake.ground.errors import Build2CMakeError, printable
from build2cmake.toolchains import sandbox, store
from build2cmake.toolchains.recipes import RECIPES, VENV, Recipe
from build2cmake.toolchains.recipes import recipe as recipe_named

# mmdebstrap's progress lines (its "I:" lines) and ours (echoed by the hooks), in words.
_STAGES = (
    ("I: running apt-get update", "updating the package lists"),
    ("I: downloading packages", "downloading packages"),
    ("I: extracting archives", "unpacking the base system"),
    ("I: installing essential packages", "installing the base system"),
    ("I: installing remaining packages", "installing the packages"),
    ("build2cmake-stage: certificates", "adding this machine's certificate authorities"),
    ("build2cmake-stage: python", "installing the Python tools (pip, into " + VENV + ")"),
    ("build2cmake-stage: check", "checking the tools"),
)


@dataclass(frozen=True)
class Installed:
    """What `install` did."""

    toolchain: store.Toolchain
    made: bool  # False: an installed one was kept
    seconds: float
    size: int  # bytes on disk; 0 when kept


def _say(out: TextIO, text: str) -> None:
    print(printable(text), file=out, flush=True)


def _elapsed(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


def disk_usage(path: Path) -> int:
    """Bytes `path` takes on disk (blocks, each hard-linked file once; unreadable parts left
    out)."""
    total = 0
    seen: set[tuple[int, int]] = set()
    for folder, dirs, files in os.walk(path, onerror=lambda _: None):
        for name in (*dirs, *files):
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(folder, name))
                if (info.st_dev, info.st_ino) not in seen:
                    seen.add((info.st_dev, info.st_ino))
                    total += info.st_blocks * 512
    return total


def human_size(size: int) -> str:
    """1.2 GB, 340 MB."""
    return f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.0f} MB"


def _hooks(recipe: Recipe, version_file: str) -> list[str]:
    """mmdebstrap customize hooks (run by sh with the root filesystem as $1). Their text is the
    recipe's (plain package names, checked by Recipe) and constants: nothing from outside."""
    bootstrap = recipe.bootstrap()
    hooks = [
        # Certificate authorities this machine added locally (a company proxy in front of
        # PyPI, say) are trusted inside too; pip and uv there use the system store.
        "set -e; if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1 && "
        '[ -d "$1/usr/local/share/ca-certificates" ]; then echo build2cmake-stage: '
        'certificates; cp /usr/local/share/ca-certificates/*.crt "$1/usr/local/share/'
        'ca-certificates/"; chroot "$1" update-ca-certificates; fi',
    ]
    if recipe.pip_packages:
        hooks.append(
            f'set -e; echo build2cmake-stage: python; chroot "$1" python3 -m venv '
            f'--system-site-packages {VENV}; chroot "$1" env PIP_CERT=/etc/ssl/certs/'
            f"ca-certificates.crt PIP_ROOT_USER_ACTION=ignore {VENV}/bin/pip install -q "
            f"--disable-pip-version-check --no-cache-dir {' '.join(recipe.pip_packages)}"
        )
    checks = ["echo build2cmake-stage: check"]
    checks += [f'[ -e "$1/{tool}" ]' for tool in recipe.tools]
    if recipe.pip_packages:
        torch = "u.find_spec('torch')" if recipe.has_torch else "True"
        checks.append(
            f'chroot "$1" {VENV}/bin/python -c "import jinja2, tomlkit, scikit_build_core, '
            f'importlib.util as u; assert {torch}"'
        )
    hooks.append("set -e; " + " && ".join(checks))
    if recipe.release is not None:
        hooks.append(f'set -e; chroot "$1" {bootstrap.version_command} > "$1/{version_file}"')
    else:
        hooks.append(f'set -e; echo 0.0 > "$1/{version_file}"')
    return hooks


def _mmdebstrap(
    recipe: Recipe, tree: Path, preferences: Path | None, mode: sandbox.Mode
) -> list[str]:
    bootstrap = recipe.bootstrap()
    command = [
        "mmdebstrap", "--mode=root", f"--variant={recipe.variant}",
        # A frozen mirror's Release files may be older than their Valid-Until; the signatures
        # are still checked.
        '--aptopt=Acquire::Check-Valid-Until "false"',
        # No fsync per file: a toolchain cut off half-way is thrown away anyway.
        "--dpkgopt=force-unsafe-io",
        *(f"--dpkgopt={option}" for option in bootstrap.dpkg_options),
    ]  # fmt: skip
    if bootstrap.packages:
        command.append(f"--include={','.join(bootstrap.packages)}")
    if preferences is not None:
        # Before the first apt-get install, and kept for later apt runs.
        command.append(
            f'--setup-hook=mkdir -p "$1/etc/apt/preferences.d" && cat {_quoted(preferences)} '
            '> "$1/etc/apt/preferences.d/build2cmake"'
        )
    command += [f"--customize-hook={hook}" for hook in _hooks(recipe, store.VERSION)]
    command += [bootstrap.suite, str(tree), *bootstrap.mirrors]
    return [*mode.namespace(), *command] if mode.rootless else command


def _quoted(path: Path) -> str:
    """`path` for a shell, single-quoted (a store path has no quote: checked)."""
    text = str(path)
    if "'" in text or "\n" in text:
        raise Build2CMakeError(f"{text}: a toolchain store path may not hold quotes or newlines")
    return f"'{text}'"


def _need_mmdebstrap(out: TextIO, mode: sandbox.Mode) -> None:
    if shutil.which("mmdebstrap") is not None:
        return
    if mode.rootless or shutil.which("apt-get") is None:
        raise Build2CMakeError(
            "toolchains are made with mmdebstrap, which is not installed (Debian/Ubuntu: "
            "apt-get install mmdebstrap)"
        )
    _say(out, "build2cmake: installing mmdebstrap (apt-get)")
    result = subprocess.run(
        ["apt-get", "install", "-y", "-qq", "mmdebstrap"],
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0 or shutil.which("mmdebstrap") is None:
        why = (result.stderr.strip().splitlines() or ["failed"])[-1]
        raise Build2CMakeError(f"apt-get install mmdebstrap: {why}")


def install(
    recipe: Recipe,
    *,
    root: Path | None = None,
    mode: sandbox.Mode | None = None,
    out: TextIO = sys.stderr,
    clock: Callable[[], float] = time.monotonic,
) -> Installed:
    """Make the toolchain of `recipe` in the store (unless one made from this recipe is there),
    one progress line per stage on `out`; one error line when it cannot be made."""
    root = root or store.default_root()
    mode = mode or sandbox.current_mode()
    started = clock()
    final = root / recipe.folder
    kept = store.read_toolchain(final, [recipe])
    if kept is not None and kept.current and not kept.missing_tools():
        return Installed(kept, False, clock() - started, 0)
    root.mkdir(parents=True, exist_ok=True)
    with store.locked(root, recipe.folder, shared=False):
        # Another install may have made it while this one waited for the lock.
        kept = store.read_toolchain(final, [recipe])
        if kept is not None and kept.current and not kept.missing_tools():
            return Installed(kept, False, clock() - started, 0)
        for stale in root.glob(f"{recipe.folder}.tmp.*"):
            sandbox.remove_tree(stale, mode)  # an interrupted install's (the lock is ours)
        _need_mmdebstrap(out, mode)
        bootstrap = recipe.bootstrap()
        if recipe.summary:
            _say(out, f"{recipe.name}: {recipe.summary}")
        _say(out, f"{recipe.name}: checking the source ({recipe.source.label})")
        unreachable = recipe.source.unreachable()
        if unreachable is not None:
            raise Build2CMakeError(f"{recipe.name}: {unreachable}")
        tree = root / f"{recipe.folder}.tmp.{os.getpid()}"
        log_path = root / f"{recipe.folder}.log"
        preferences = None
        if bootstrap.preferences:
            preferences = root / f"{recipe.folder}.pref"
            preferences.write_text(bootstrap.preferences, encoding="utf-8")
        _say(
            out,
            f"{recipe.name}: making it in {tree} ({mode.name} mode; {len(bootstrap.packages)} "
            f"packages and their dependencies; log: {log_path})",
        )
        try:
            _run_logged(
                recipe, _mmdebstrap(recipe, tree, preferences, mode), log_path, out, clock, started
            )
            version = (tree / store.VERSION).read_text("utf-8", "replace").strip()
            if recipe.release is not None and not re.match(
                rf"{recipe.release[0]}\.{recipe.release[1]}[.-]", version
            ):
                raise Build2CMakeError(
                    f"{recipe.name}: {recipe.source.label} holds ROCm {version!r} now, not "
                    f"{recipe.release[0]}.{recipe.release[1]}.x: this recipe cannot be made from "
                    "it any more"
                )
            (tree / store.STAMP).write_text(recipe.stamp(), encoding="utf-8")
            _say(out, f"{recipe.name}: moving it into place: {final}")
            if os.path.lexists(final):
                old = root / f"{recipe.folder}.old.{os.getpid()}"
                os.rename(final, old)
                sandbox.remove_tree(old, mode)
            os.rename(tree, final)
        except BaseException:
            with contextlib.suppress(Build2CMakeError):
                sandbox.remove_tree(tree, mode)
            raise
        finally:
            if preferences is not None:
                preferences.unlink(missing_ok=True)
        (root / f"{recipe.folder}.probe.json").unlink(missing_ok=True)
    made = store.read_toolchain(final, [recipe])
    assert made is not None, final
    seconds = clock() - started
    size = disk_usage(final)
    holds = f" ROCm {made.version}" if recipe.release is not None else ""
    _say(
        out,
        f"{recipe.name}: installed{holds} in {_elapsed(seconds)}, {human_size(size)} on disk: "
        f"{final}",
    )
    return Installed(made, True, seconds, size)


def _run_logged(
    recipe: Recipe,
    command: list[str],
    log_path: Path,
    out: TextIO,
    clock: Callable[[], float],
    started: float,
) -> None:
    """Run mmdebstrap with its output in the log, a progress line per stage on `out`."""
    said: set[str] = set()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write("+ " + " ".join(command) + "\n")
        log.flush()
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        ) as process:
            assert process.stdout is not None
            for raw in process.stdout:
                line = raw.decode("utf-8", "replace")
                log.write(line)
                log.flush()
                for marker, words in _STAGES:
                    if line.startswith(marker) and marker not in said:
                        said.add(marker)
                        _say(out, f"{recipe.name}: {words} [{_elapsed(clock() - started)}]")
        if process.returncode != 0:
            # The first error says why (apt's "Unable to locate package ..."); mmdebstrap's
            # own last lines only say that it failed.
            errors = [
                line[3:] for line in log_path.read_text("utf-8", "replace").splitlines()
                if line.startswith("E: ")
            ]  # fmt: skip
            why = errors[0] if errors else f"exit {process.returncode}"
            raise Build2CMakeError(f"{recipe.name}: mmdebstrap failed: {why} (log: {log_path})")


def remove(
    name: str,
    *,
    root: Path | None = None,
    mode: sandbox.Mode | None = None,
    recipes: Sequence[Recipe] = RECIPES,
) -> list[Path]:
    """Delete the toolchain `name` and everything of it in the store (its folder, unfinished
    ones, log, probe record, lock); returns what was there."""
    recipe = recipe_named(name, recipes)
    root = root or store.default_root()
    mode = mode or sandbox.current_mode()
    if not root.is_dir():
        return []
    lock = root / f"{recipe.folder}.lock"
    with store.locked(root, recipe.folder, shared=False):
        there = store.related_paths(root, recipe.folder)
        for path in there:
            if path.is_dir() and not path.is_symlink():
                sandbox.remove_tree(path, mode)
            else:
                path.unlink(missing_ok=True)
        # Under the lock: an install waiting for it finds the folder gone and makes it anew.
        lock.unlink(missing_ok=True)
    return [*there, lock] if there else []
