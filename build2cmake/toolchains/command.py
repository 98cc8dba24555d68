"""`build2cmake toolchain list | install NAME | remove NAME | path NAME | run NAME -- COMMAND`:
the arguments (added to the CLI's parser) and what each verb does and prints."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from build2cmake.ground.errors import Build2CMakeError
from build2cmake.toolchains import install, sandbox, store
from build2cmake.toolchains.recipes import RECIPES, recipe

Printer = Callable[..., None]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The `toolchain` command and its verbs."""
    names = ", ".join(r.name for r in RECIPES)
    tool = commands.add_parser(
        "toolchain",
        help="ROCm toolchains build2cmake makes and builds in (list, install, remove, run)",
        description="ROCm toolchains managed by build2cmake: Debian root filesystems holding "
        f"one ROCm release each ({names}), made with mmdebstrap as root or, without root, in "
        "a user namespace; kept in /var/cache/build2cmake (root) or "
        "$XDG_CACHE_HOME/build2cmake/toolchains ($BUILD2CMAKE_TOOLCHAINS moves it). `build`, "
        "`build --variants` and `doctor` use them.",
    )
    verbs = tool.add_subparsers(dest="verb", required=True, metavar="VERB")
    verbs.add_parser("list", help="every toolchain build2cmake makes, and which are installed")
    for verb, words in (
        ("install", "make it (minutes, a few GB) unless one from the same recipe is there"),
        ("remove", "delete it and everything of it in the store"),
        ("path", "print its folder (exit 1 when it is not installed)"),
    ):
        parser = verbs.add_parser(verb, help=words)
        parser.add_argument("name", metavar="NAME", help=names)
    run = verbs.add_parser(
        "run",
        help="run a command inside it",
        description="Run COMMAND inside the toolchain, in the current folder (mounted at its "
        "path), with build2cmake on PYTHONPATH and the folders of $CPATH, $C_INCLUDE_PATH, "
        "$CPLUS_INCLUDE_PATH and $BUILD2CMAKE_INCLUDE_DIRS mounted read-only. Exits with "
        "COMMAND's status.",
    )
    run.add_argument("name", metavar="NAME", help=names)
    run.add_argument(
        "--bind", action="append", default=[], type=Path, metavar="DIR",
        help="also mount DIR, read-write, at its path (repeatable)",
    )  # fmt: skip
    run.add_argument(
        "--include-dir", action="append", default=[], type=Path, metavar="DIR",
        help="an include folder for compiles inside, mounted read-only and added to CPATH "
        "(repeatable)",
    )  # fmt: skip
    # REMAINDER: COMMAND's own options are its own. --bind and --include-dir may come before
    # NAME (argparse reads them) or after it (read by `run`, up to `--`).
    run.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND")


def run(args: argparse.Namespace, out: Printer, err: Printer) -> int:
    """Do what `args.verb` says; returns the exit code."""
    if args.verb == "list":
        out(*list_lines())
        return 0
    if args.verb == "install":
        chosen = recipe(args.name)
        # Progress lines go to standard error (escaped there), the result to standard output.
        done = install.install(chosen, out=sys.stderr)
        if not done.made:
            made = done.toolchain
            out(f"{chosen.name}: ROCm {made.version} is installed: {made.folder}")
        return 0
    if args.verb == "remove":
        removed = install.remove(args.name)
        for path in removed:
            out(f"removed {path}")
        if not removed:
            out(f"{args.name}: not installed; nothing to remove")
        return 0
    if args.verb == "path":
        recipe(args.name)
        try:
            toolchain = store.find(args.name)
        except Build2CMakeError as error:
            err(f"build2cmake: {error}")
            return 1
        out(str(toolchain.folder))
        return 0
    assert args.verb == "run"
    binds, includes, command = list(args.bind), list(args.include_dir), list(args.argv)
    while command:
        option, _, value = command[0].partition("=")
        if command[0] == "--":
            command = command[1:]
            break
        if option not in ("--bind", "--include-dir"):
            break
        if not value:
            if len(command) < 2:
                raise Build2CMakeError(f"toolchain run: {option} needs a folder")
            value, command = command[1], command[1:]
        (binds if option == "--bind" else includes).append(Path(value))
        command = command[1:]
    if not command:
        raise Build2CMakeError("toolchain run: no command given (toolchain run NAME -- COMMAND)")
    toolchain = store.find(args.name)
    result = sandbox.run(toolchain, command, cwd=Path.cwd(), binds=binds, include_dirs=includes)
    return result.returncode


def list_lines() -> list[str]:
    """`toolchain list`: the store, the mode, and one row per recipe (and per toolchain no
    recipe knows any more)."""
    root = store.default_root()
    if os.geteuid() == 0:
        mode = "root: made with mmdebstrap, run with chroot"
    else:
        problem, _ = sandbox.rootless_problem()
        mode = "rootless: made and run in a user namespace" if problem is None else problem
    lines = [f"toolchains in {root} ({mode})"]
    found = {t.name: t for t in store.installed(root)}
    rows = [("name", "ROCm", "made from", "status")]
    for known in RECIPES:
        made = found.pop(known.name, None)
        release = f"{known.release[0]}.{known.release[1]}" if known.release else "-"
        status = (
            f"{made.status}: {made.folder}" if made is not None
            else f"not installed (build2cmake toolchain install {known.name})"
        )  # fmt: skip
        rows.append((known.name, made.version if made else release, known.source.label, status))
    for made in found.values():
        rows.append((made.name, made.version, "no recipe of this build2cmake", f"{made.folder}"))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        lines.append(
            "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3]
        )
    return lines
