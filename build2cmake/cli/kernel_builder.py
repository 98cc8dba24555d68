"""kernel-builder's command names, for users who type them (kernel-builder/src/main.rs).

Each is a parser of its own, hidden from the main help's command list (the epilog names them
once), taking kernel-builder's arguments (KERNEL_DIR for the project's folder, `--unique-id`,
`-f`, `-d`, `--max-jobs`, `--cores`, ...) and filling in the arguments of the build2cmake
command that does the work, whose runner it names. kernel-builder's commands whose names
build2cmake also uses (build, upload, init, check-abi, list-variants, hash, update-build,
completions, check-builds) are build2cmake's own commands, which accept those arguments too.
Commands that only make sense with Nix answer with one line saying what to do instead.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

AddOptions = Callable[[argparse.ArgumentParser], None]
if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]


@dataclass(frozen=True)
class SharedOptions:
    """The option groups of build2cmake's own commands that these parsers reuse."""

    build: AddOptions
    variants: AddOptions
    upload: AddOptions


NOT_HERE = {
    "devshell": "devshell opens kernel-builder's Nix development shell; build2cmake builds in "
    "the environment you have: `build2cmake generate-torch build.toml`, then `pip install "
    "--no-build-isolation -e .` (an editable build that rebuilds on import); `build2cmake "
    "doctor build.toml` says what this machine can build",
    "testshell": "testshell opens kernel-builder's Nix test shell; build2cmake tests in the "
    "environment you have: `build2cmake test` runs the kernels_ci tests against "
    "build/<variant>/ (or `python -m pytest tests` after `pip install --no-build-isolation -e .`)",
    "skills": "skills installs kernel-builder's skill files; build2cmake has none to install "
    "(its documentation is README.md and docs/)",
    "generate-docs": "generate-docs writes kernel-builder's command reference; build2cmake's is "
    "`build2cmake COMMAND -h` and the command table of README.md",
}
NAMES = (
    "create-pyproject",
    "clean-pyproject",
    "check-config",
    "build-and-copy",
    "build-and-upload",
    "fill-card",
    *NOT_HERE,
)


def _in_folder(text: str) -> Path:
    """KERNEL_DIR as kernel-builder takes it: a folder stands for the build.toml in it."""
    path = Path(text)
    return path / "build.toml" if path.is_dir() else path


def _kernel_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "build_toml",
        type=_in_folder,
        nargs="?",
        default=Path("build.toml"),
        metavar="KERNEL_DIR",
        help="the kernel project's folder (default: the current folder); a build.toml too",
    )


class _NotHere(argparse.Action):
    """An option build2cmake has no counterpart for: the command answers with one line."""

    def __init__(self, *args: Any, why: str, **kwargs: Any) -> None:
        self.why = why
        super().__init__(*args, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        namespace.runner = "not-here"
        namespace.not_here = f"{option_string}: {self.why}"


def add_commands(commands: Commands, shared: SharedOptions) -> None:
    """Add kernel-builder's names to build2cmake's subcommands (none of them listed in the
    main help: no `help=`)."""
    for add in (_create_pyproject, _clean_pyproject, _check_config, _fill_card):
        add(commands)
    _build_and_copy(commands, shared)
    _build_and_upload(commands, shared)
    for name, why in NOT_HERE.items():
        # Every argument accepted ('\0' prefixes no option): the answer is the same line.
        nix = commands.add_parser(name, prefix_chars="\0", add_help=False)
        nix.add_argument("arguments", nargs="*")
        nix.set_defaults(runner="not-here", not_here=why)


def _create_pyproject(commands: Commands) -> None:
    gen = commands.add_parser(
        "create-pyproject",
        description="kernel-builder's create-pyproject: build2cmake generate-torch.",
    )
    gen.set_defaults(runner="generate-torch", backend=None)
    _kernel_dir(gen)
    gen.add_argument("target_dir", type=Path, nargs="?", metavar="TARGET_DIR")
    gen.add_argument("-f", "--force", action="store_true", help="overwrite edited files")
    gen.add_argument("--unique-id", dest="ops_id", metavar="ID", help="generate-torch's --ops-id")
    provenance = (
        "build2cmake records the kernel's commit and dirty flag from the checkout's git when it "
        "builds (metadata.json's provenance), and takes neither from the command line "
        "(kernel-builder's option is for Nix builds, whose sources have no .git)"
    )
    gen.add_argument("--kernel-sha", action=_NotHere, why=provenance, metavar="SHA")
    gen.add_argument("--kernel-dirty", action=_NotHere, why=provenance, nargs=0)


def _clean_pyproject(commands: Commands) -> None:
    cln = commands.add_parser(
        "clean-pyproject",
        description="kernel-builder's clean-pyproject: build2cmake clean.",
    )
    cln.set_defaults(runner="clean")
    _kernel_dir(cln)
    cln.add_argument("target_dir", type=Path, nargs="?", metavar="TARGET_DIR")
    cln.add_argument("-d", "--dry-run", action="store_true", help="list what would go")
    cln.add_argument("-f", "--force", action="store_true", help="also remove edited files")
    cln.add_argument(
        "--ops-id",
        metavar="ID",
        help="accepted and not needed: clean removes what generate's manifest lists",
    )


def _check_config(commands: Commands) -> None:
    val = commands.add_parser(
        "check-config", description="kernel-builder's check-config: build2cmake validate."
    )
    val.set_defaults(runner="validate")
    _kernel_dir(val)


def _fill_card(commands: Commands) -> None:
    crd = commands.add_parser(
        "fill-card",
        description="kernel-builder's fill-card: the project's CARD.md filled in as `build` "
        "fills it, to standard output or OUTPUT.",
    )
    crd.set_defaults(runner="fill-card")
    _kernel_dir(crd)
    crd.add_argument("output", type=Path, nargs="?", metavar="OUTPUT")


def _nix_options(parser: argparse.ArgumentParser) -> None:
    """kernel-builder's Nix options, mapped onto build's."""
    parser.add_argument(
        "--max-jobs", dest="concurrent", type=int, metavar="N", help="--concurrent: variants"
    )
    parser.add_argument("--cores", dest="jobs", type=int, metavar="N", help="-j: jobs per variant")
    parser.add_argument(
        "-L",
        "--print-build-logs",
        action="store_true",
        help="accepted: each variant's whole log is build/cmake-<variant>.log, named as it starts",
    )


def _build_and_copy(commands: Commands, shared: SharedOptions) -> None:
    bld = commands.add_parser(
        "build-and-copy",
        description="kernel-builder's build-and-copy: every Hub variant of the project into "
        "build/ (build2cmake build --all).",
    )
    bld.set_defaults(runner="build")
    _kernel_dir(bld)
    shared.build(bld)
    shared.variants(bld)
    _nix_options(bld)
    bld.set_defaults(all=True, concurrent=1)


def _build_and_upload(commands: Commands, shared: SharedOptions) -> None:
    bld = commands.add_parser(
        "build-and-upload",
        description="kernel-builder's build-and-upload: build2cmake build (every Hub variant, "
        "unless --variant or --variants names some, or --backend asks for one build as `build` "
        "makes it: the way for a torch-noarch kernel), then, when every variant built, "
        "build2cmake upload.",
    )
    bld.set_defaults(runner="build-and-upload")
    _kernel_dir(bld)
    shared.build(bld)
    shared.variants(bld)
    _nix_options(bld)
    shared.upload(bld)
    bld.set_defaults(concurrent=1)
