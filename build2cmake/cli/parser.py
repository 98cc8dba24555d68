"""The command table: every command once (COMMANDS, in the help's order), the parser made
from it with kernel-builder's names added (kernel_builder.py), and the completions command,
which writes its scripts from that parser (completions.py)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from build2cmake import __version__
from build2cmake.cli import build, completions, kernel_builder, project, sharing
from build2cmake.ground.errors import Build2CMakeError

if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]


def argument_parser() -> argparse.ArgumentParser:
    """build2cmake's parser: the commands of COMMANDS, then kernel-builder's names."""
    parser = argparse.ArgumentParser(
        prog="build2cmake",
        description="Turn a kernel project's build.toml into a CMake + scikit-build-core build.",
        epilog="kernel-builder's command names work too: "
        f"{', '.join(kernel_builder.NAMES)} (see docs/sharing.md for what each does here).",
    )
    parser.add_argument("--version", action="version", version=f"build2cmake {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for _, add, _ in COMMANDS:
        if add is not None:
            add(commands)
    kernel_builder.add_commands(
        commands,
        kernel_builder.SharedOptions(
            build=build.add_build_options,
            variants=build.add_variant_options,
            upload=sharing.add_upload_options,
        ),
    )
    return parser


def add_completions(commands: Commands) -> None:
    cmp = commands.add_parser(
        "completions",
        help="print a shell completion script (bash, zsh, fish)",
        description="Print the completion script for SHELL, generated from build2cmake's own "
        "commands and options; its first lines say where to install it.",
    )
    cmp.set_defaults(runner="completions")
    cmp.add_argument(
        "shell",
        choices=completions.SHELLS,
        metavar="SHELL",
        help=f"{', '.join(completions.SHELLS)} (kernel-builder also writes elvish and powershell)",
    )


def run_completions(args: argparse.Namespace) -> int:
    sys.stdout.write(completions.script(args.shell, argument_parser()))
    return 0


def run_not_here(args: argparse.Namespace) -> int:
    raise Build2CMakeError(args.not_here)


# Every command, in the order of the help's list: the runner its subparser names, the function
# that adds the subparser (None for those only kernel-builder's names reach,
# kernel_builder.py) and the function that runs it.
COMMANDS: tuple[
    tuple[str, Callable[[Commands], None] | None, Callable[[argparse.Namespace], int]], ...
] = (
    ("generate-torch", project.add_generate_torch, project.run_generate_torch),
    ("validate", project.add_validate, project.run_validate),
    ("clean", project.add_clean, project.run_clean),
    ("build", build.add_build, build.run_build),
    ("check-abi", build.add_check_abi, build.run_check_abi),
    ("doctor", project.add_doctor, project.run_doctor),
    ("list-variants", project.add_list_variants, project.run_list_variants),
    ("ci", project.add_ci, project.run_ci),
    ("update-build", project.add_update_build, project.run_update_build),
    ("init", project.add_init, project.run_init),
    ("test", build.add_test, build.run_test),
    ("upload", sharing.add_upload, sharing.run_upload),
    ("lock", project.add_lock, project.run_lock),
    ("hash", build.add_hash, build.run_hash),
    ("costs", build.add_costs, build.run_costs),
    ("check-builds", build.add_check_builds, build.run_check_builds),
    ("completions", add_completions, run_completions),
    ("toolchain", project.add_toolchain, project.run_toolchain),
    ("build-and-upload", None, sharing.run_build_and_upload),
    ("fill-card", None, sharing.run_fill_card),
    ("not-here", None, run_not_here),
)


RUNNERS: dict[str, Callable[[argparse.Namespace], int]] = {name: run for name, _, run in COMMANDS}
