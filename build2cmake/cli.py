"""The command line: parse arguments, call build2cmake.api, print, exit 0 or 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from build2cmake import __version__, api, doctor
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

    bld = commands.add_parser(
        "build",
        help="generate, compile and lay the kernel out as build/<variant>/ for `kernels`",
        description="Generate (as generate-torch), compile with CMake + Ninja for one backend "
        "and write build/<variant>/ (Python package, extension, metadata.json), the layout the "
        "Hugging Face kernels library loads with get_local_kernel and from Hub repositories.",
    )
    bld.add_argument("build_toml", type=Path, metavar="BUILD_TOML")
    bld.add_argument(
        "--backend",
        choices=BUILDABLE_BACKENDS,
        help="backend to build (default: the installed torch's)",
    )
    bld.add_argument("--ops-id", metavar="ID", help="as for generate-torch")
    bld.add_argument(
        "-D",
        dest="defines",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a CMake cache entry, e.g. -D BUILD2CMAKE_ROCM_ARCHS='gfx90a;gfx940' (repeatable)",
    )
    bld.add_argument("-j", "--jobs", type=int, metavar="N", help="parallel compile jobs")
    bld.add_argument(
        "--force",
        action="store_true",
        help="overwrite edited generated files and variant folders build2cmake did not make",
    )

    doc = commands.add_parser(
        "doctor",
        help="what this machine can build: torch, HIP/CUDA compilers, archs, fixes",
        description="Report the torch, HIP and CUDA toolchains found here, which archs each can "
        "compile, and (given BUILD_TOML) which of its archs cannot be built here, why, and the "
        "command that fixes it. Exit 0 when everything build.toml needs is here, 1 otherwise.",
    )
    doc.add_argument("build_toml", type=Path, nargs="?", metavar="BUILD_TOML")

    upd = commands.add_parser(
        "update-build", help="rewrite an older build.toml as edition 5, keeping comments"
    )
    upd.add_argument("build_toml", type=Path, metavar="BUILD_TOML")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 success, 2 something the user must fix)."""
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except Build2CMakeError as error:
        for line in str(error).splitlines() or [""]:
            print(f"build2cmake: error: {line}", file=sys.stderr)
        return 2


def _print_warnings(warnings: Sequence[str]) -> None:
    for warning in warnings:
        print(f"build2cmake: warning: {warning}", file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    if args.command == "validate":
        project = api.validate(args.build_toml)
        _print_warnings(project.warnings)
        kernels = ", ".join(f"{k.name} ({k.backend})" for k in project.kernels) or "none"
        print(
            f"{args.build_toml}: valid ({project.source_format}, {project.framework}); "
            f"package {project.package_name}, backends {', '.join(project.backends)}, "
            f"kernels: {kernels}"
        )
    elif args.command == "generate-torch":
        report = api.generate_torch(
            args.build_toml,
            args.target_dir,
            force=args.force,
            backend=args.backend,
            ops_id=args.ops_id,
        )
        _print_warnings(report.warnings)
        if report.skipped_backends:
            print(
                f"skipped backends {', '.join(report.skipped_backends)}: build.toml declares "
                f"them, but build2cmake builds only {', '.join(BUILDABLE_BACKENDS)}"
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
    elif args.command == "build":
        _, built = api.build(
            args.build_toml,
            backend=args.backend,
            ops_id=args.ops_id,
            defines=tuple(args.defines),
            jobs=args.jobs,
            force=args.force,
        )
        backend = built.metadata["backend"]
        assert isinstance(backend, dict)
        archs = ", ".join(backend.get("archs", [])) or "-"
        print(f"built {built.path} (backend {backend['type']}, archs {archs})")
    elif args.command == "doctor":
        diagnosis = doctor.diagnose(args.build_toml)
        print(diagnosis.text)
        return 0 if diagnosis.ok else 1
    elif args.command == "update-build":
        if api.update_build(args.build_toml):
            print(f"{args.build_toml}: rewritten as edition 5")
        else:
            print(f"{args.build_toml}: already edition 5")
    return 0
