"""The command line: parse arguments, call build2cmake.api, print, exit 0 or 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from build2cmake import __version__, api
from build2cmake.errors import Build2CMakeError
from build2cmake.model import BUILDABLE_BACKENDS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="build2cmake",
        description="Turn a kernel project's build.toml into a CMake + scikit-build-core build.",
    )
    parser.add_argument("--version", action="version", version=f"build2cmake {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    gen = commands.add_parser(
        "generate-torch",
        help="write CMakeLists.txt, cmake/, pyproject.toml and the torch glue",
        description="Write the build files for build.toml; then build with "
        "`pip install --no-build-isolation -e <TARGET_DIR>`.",
    )
    gen.add_argument("build_toml", type=Path, metavar="BUILD_TOML")
    gen.add_argument(
        "target_dir",
        type=Path,
        nargs="?",
        metavar="TARGET_DIR",
        help="where to write (default: the folder holding BUILD_TOML)",
    )
    gen.add_argument(
        "--force",
        action="store_true",
        help="overwrite files that were edited or not written by build2cmake",
    )
    gen.add_argument(
        "--backend",
        choices=BUILDABLE_BACKENDS,
        help="build this backend by default instead of the installed torch's",
    )
    gen.add_argument(
        "--ops-id",
        metavar="ID",
        help="the unique part of the op namespace _<name>_<backend>_<ID> "
        "(default: derived from build.toml)",
    )

    val = commands.add_parser(
        "validate",
        help="check build.toml only",
        description="Check build.toml and the files it names; exit 0 "
        "when valid, 2 with a message otherwise.",
    )
    val.add_argument("build_toml", type=Path, metavar="BUILD_TOML")

    cln = commands.add_parser(
        "clean",
        help="remove what generate-torch wrote and the build folder",
        description="Remove exactly the files generate-torch wrote (kept if you edited them, "
        "unless --force) and the build folder; nothing else.",
    )
    cln.add_argument("build_toml", type=Path, metavar="BUILD_TOML")
    cln.add_argument("target_dir", type=Path, nargs="?", metavar="TARGET_DIR")
    cln.add_argument("--dry-run", action="store_true", help="list what would go; delete nothing")
    cln.add_argument("--force", action="store_true", help="also remove generated files you edited")

    upd = commands.add_parser(
        "update-build", help="rewrite an older build.toml in the current format, keeping comments"
    )
    upd.add_argument("build_toml", type=Path, metavar="BUILD_TOML")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 success, 2 something the user must fix)."""
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except Build2CMakeError as error:
        print(f"build2cmake: error: {error}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.command == "validate":
        project = api.validate(args.build_toml)
        kernels = ", ".join(f"{k.name} ({k.backend})" for k in project.kernels) or "none"
        print(
            f"{args.build_toml}: valid; package {project.package_name}, "
            f"backends {', '.join(project.backends)}, kernels: {kernels}"
        )
    elif args.command == "generate-torch":
        report = api.generate_torch(
            args.build_toml,
            args.target_dir,
            force=args.force,
            backend=args.backend,
            ops_id=args.ops_id,
        )
        for name in report.written:
            print(f"wrote {name}")
        for name in report.removed:
            print(f"removed {name} (no longer generated)")
        print(f"{len(report.written)} written, {len(report.unchanged)} unchanged")
    elif args.command == "clean":
        clean_report = api.clean(
            args.build_toml, args.target_dir, dry_run=args.dry_run, force=args.force
        )
        verb = "would remove" if args.dry_run else "removed"
        for name in clean_report.removed:
            print(f"{verb} {name}")
        for name in clean_report.kept_edited:
            print(f"kept {name} (edited since generate; --force removes it)")
        if not clean_report.removed and not clean_report.kept_edited:
            print("nothing to clean")
    elif args.command == "update-build":
        if api.update_build(args.build_toml):
            print(f"{args.build_toml}: rewritten in the current format")
        else:
            print(f"{args.build_toml}: already in the current format")
    return 0
