"""The command line: parse arguments, call build2cmake.api, print (escaped), exit 0, 2 or 3."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from build2cmake import __version__, api, checks, doctor, publish
from build2cmake.errors import Build2CMakeError, BuildConfigErrors, printable
from build2cmake.hub_variants import parse_variants
from build2cmake.init import DEFAULT_ROCM_ARCHS
from build2cmake.model import BUILDABLE_BACKENDS
from build2cmake.toolchains import command as toolchain_command
from build2cmake.variant_builds import summary_table
from build2cmake.variant_env import PackageSources


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
    bld.add_argument(
        "--strict",
        action="store_true",
        help="fail when kernel-abi-check finds a violation (or is not installed)",
    )
    bld.add_argument(
        "--allow-toolkit-mismatch",
        action="store_true",
        help="build even when nvcc's (HIP's) major release differs from the one torch was built "
        "with (the variant is named after torch's)",
    )
    _add_variant_options(bld)

    abi = commands.add_parser(
        "check-abi",
        help="check built extensions with kernel-abi-check (as kernel-builder check-abi)",
        description="Check every compiled extension of build/<variant>/ folders: manylinux "
        "symbol versions (ELF; macOS version for Mach-O), the Python stable ABI, and with "
        "--torch-stable-abi torch's stable ABI (shim functions of later torch releases, torch's "
        "C++ API). `build` runs the same checks. Exits 1 when a violation is found.",
    )
    abi.add_argument(
        "path",
        type=Path,
        nargs="?",
        default=Path("build.toml"),
        metavar="BUILD_TOML|VARIANT_DIR",
        help="the project's build.toml (all its build/<variant>/) or one variant folder",
    )
    abi.add_argument("-m", "--manylinux", default=checks.MANYLINUX, metavar="VERSION")
    abi.add_argument("-p", "--python-abi", default=checks.PYTHON_ABI, metavar="VERSION")
    abi.add_argument("--macos", default=checks.MACOS, metavar="VERSION")
    abi.add_argument(
        "--torch-stable-abi",
        metavar="VERSION",
        help="also check torch's stable ABI of this version (e.g. 2.10); default: not checked",
    )

    doc = commands.add_parser(
        "doctor",
        help="what this machine can build: torch, HIP/CUDA compilers, archs, fixes",
        description="Report the torch, HIP and CUDA toolchains found here, which archs each can "
        "compile, and (given BUILD_TOML) which of its archs cannot be built here, why, and the "
        "command that fixes it. Exit 0 when everything build.toml needs is here, 1 otherwise.",
    )
    doc.add_argument("build_toml", type=Path, nargs="?", metavar="BUILD_TOML")

    lst = commands.add_parser(
        "list-variants",
        help="the Hub variants `build --all` builds for BUILD_TOML",
        description="Print, one a line, the variants (torch x backend x toolkit) that Hub "
        "kernels carry and BUILD_TOML's backends, [torch] minver/maxver, [general.cuda] "
        "minver/maxver and cuda-minver admit.",
    )
    lst.add_argument("build_toml", type=Path, metavar="BUILD_TOML")
    lst.add_argument(
        "--folders", action="store_true", help="print build/<variant> folder names instead"
    )

    ci = commands.add_parser("ci", help="write a CI workflow that builds every variant")
    ci.add_argument("provider", choices=["github"], metavar="PROVIDER", help="github")
    ci.add_argument("build_toml", type=Path, metavar="BUILD_TOML")
    ci.add_argument(
        "--repository",
        type=Path,
        metavar="DIR",
        help="the repository root (default: the folder holding BUILD_TOML)",
    )
    ci.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="FILE",
        help="where to write the workflow (default: standard output)",
    )

    upd = commands.add_parser(
        "update-build", help="rewrite an older build.toml as edition 5, keeping comments"
    )
    upd.add_argument("build_toml", type=Path, metavar="BUILD_TOML")
    _add_sharing_commands(commands)
    _add_toolchain_command(commands)
    return parser


def _add_toolchain_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """toolchain list | install | remove | path | run: the ROCm toolchains build2cmake makes."""
    toolchain_command.add_parser(commands)


def _add_sharing_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """init, test and upload: kernel-builder's workflow around the build."""
    ini = commands.add_parser(
        "init",
        help="create a new kernel project (build.toml, kernel sources, binding, tests, card)",
        description="Create a kernel project: build.toml (edition 5, [general.hub] repo-id), one "
        "kernel source per backend, torch-ext/ binding and package, tests/ (kernels_ci), "
        "example.py, benchmarks/, CARD.md, .gitignore and .gitattributes.",
    )
    ini.add_argument(
        "directory", type=Path, nargs="?", metavar="DIR", help="default: ./<kernel name>"
    )
    ini.add_argument(
        "--name", required=True, metavar="OWNER/NAME", help="the Hub repository, e.g. my-org/relu"
    )
    ini.add_argument(
        "--backends",
        nargs="+",
        default=[],
        metavar="BACKEND",
        help=f"{' '.join(BUILDABLE_BACKENDS)} or all (default: cuda)",
    )
    ini.add_argument("--license", default="Apache-2.0", help="SPDX id (default: Apache-2.0)")
    ini.add_argument(
        "--rocm-archs",
        nargs="+",
        metavar="ARCH",
        help="the rocm kernel's rocm-archs (default: gfx90a gfx942)",
    )
    ini.add_argument(
        "--force",
        action="store_true",
        help="write into a non-empty DIR (replaces init's files, keeps the others)",
    )

    tst = commands.add_parser(
        "test",
        help="build if needed and run the kernels_ci tests against build/<variant>/",
        description="Run `pytest tests -m kernels_ci` with the kernel loaded from build/<variant>/ "
        "as kernels loads it. Without --variant: the first backend of CUDA, ROCm, XPU, Metal, "
        "CPU that build.toml declares and this machine can load, built first (incrementally). "
        "Exits with pytest's status.",
    )
    tst.add_argument(
        "build_toml", type=Path, nargs="?", default=Path("build.toml"), metavar="BUILD_TOML"
    )
    tst.add_argument("--variant", metavar="V", help="test this existing build/<V>/ folder")
    tst.add_argument("--ops-id", metavar="ID", help="as for build")
    tst.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE")
    tst.add_argument("-j", "--jobs", type=int, metavar="N")

    upl = commands.add_parser(
        "upload",
        help="publish build/ to the Hugging Face Hub (refuses a stale build)",
        description="Check that every build/<variant>/ matches build.toml and is newer than its "
        "sources, then publish with huggingface_hub, as kernel-builder upload does: build/ and "
        "benchmarks/benchmark*.py to branch v<version> of the repo-id (files of an uploaded "
        "variant that the build no longer makes are deleted), build/CARD.md (the card) to "
        "main as README.md. The token is huggingface_hub's (HF_TOKEN, or `hf auth login`); "
        "HF_ENDPOINT picks another Hub.",
    )
    upl.add_argument(
        "build_toml", type=Path, nargs="?", default=Path("build.toml"), metavar="BUILD_TOML"
    )
    upl.add_argument("--repo-id", help="default: [general.hub].repo-id")
    upl.add_argument("--branch", help="default: [general.hub].branch, else v<version>")
    upl.add_argument("--ops-id", metavar="ID", help="the ops id the variants were built with")
    upl.add_argument("--private", action="store_true", help="create the repository private")
    upl.add_argument(
        "--create-pr",
        action="store_true",
        help="open a pull request per branch instead of committing (the repository and branch "
        "must exist)",
    )
    upl.add_argument(
        "--repo-type",
        default="kernel",
        metavar="kernel",
        help="kind of Hub repository: kernel, the only kind the Hub keeps kernels in since "
        "2026-09-13 (model is refused)",
    )
    upl.add_argument(
        "--output-json", type=Path, metavar="PATH", help="write a JSON summary of the upload"
    )
    upl.add_argument(
        "--dry-run",
        action="store_true",
        help="check build/ and list every operation, one a line; contact nothing",
    )


def _add_variant_options(bld: argparse.ArgumentParser) -> None:
    group = bld.add_argument_group(
        "Hub variants",
        "Build several torch x toolkit variants, each in its own uv environment holding that "
        "torch and (CUDA) the matching nvcc from PyPI, into build/<variant>/.",
    )
    which = group.add_mutually_exclusive_group()
    which.add_argument(
        "--variants",
        metavar="LIST",
        help="comma-separated, e.g. torch2.13-cpu,torch2.13-cu130 (see list-variants)",
    )
    which.add_argument("--all", action="store_true", help="every variant list-variants prints")
    group.add_argument(
        "--concurrent",
        type=int,
        default=1,
        metavar="N",
        help="variants built at once (default 1); -j is split between them",
    )
    group.add_argument(
        "--no-isolation",
        action="store_true",
        help="build with this environment's torch and compilers instead of uv environments "
        "(no downloads); each variant must be what this environment builds",
    )
    group.add_argument(
        "--index-url", metavar="URL", help="package index for torch and nvcc (default PyPI)"
    )
    group.add_argument(
        "--extra-index-url", action="append", default=[], metavar="URL", help="repeatable"
    )
    group.add_argument(
        "--find-links", action="append", default=[], metavar="PATH", help="repeatable"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 success, 2 something the user must fix, 3 a bug of
    build2cmake's)."""
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except BuildConfigErrors as errors:
        # Every problem of a build.toml, one error line each.
        for error in errors.errors:
            _err(f"build2cmake: error: {error}")
        return 2
    except Build2CMakeError as error:
        _err(f"build2cmake: error: {error}")
        return 2
    except OSError as error:
        # The library turns the OSErrors it expects into Build2CMakeError; this is the net for
        # the rest (an unreadable file, a name too long), which are the user's to fix too.
        where = f"{error.filename}: " if error.filename is not None else ""
        _err(f"build2cmake: error: {printable(where + str(error.strerror or error))}")
        return 2
    except Exception as error:  # the net under our own bugs
        # A bug of ours, whatever the input: one line, not a traceback the input could shape.
        if os.environ.get("BUILD2CMAKE_TRACEBACK"):
            raise
        _err(f"build2cmake: internal error: {type(error).__name__}: {printable(str(error))}")
        _err(
            "build2cmake: this is a bug in build2cmake, not in your project; please report it "
            "with the command you ran (BUILD2CMAKE_TRACEBACK=1 shows the traceback)"
        )
        return 3


def _out(*lines: str, flush: bool = False) -> None:
    """Print each of `lines` as one line of standard output, escaped with errors.printable: a
    name or path from a cloned repository can neither forge a line nor reach the terminal as an
    escape sequence."""
    for line in lines:
        print(printable(line), flush=flush)


def _err(text: str) -> None:
    """Print a message to standard error: each line escaped (a Build2CMakeError's only line
    breaks are its own, before each detail)."""
    for line in text.split("\n"):
        print(printable(line), file=sys.stderr)


def _warn(warnings: Sequence[str]) -> None:
    for warning in warnings:
        _err(f"build2cmake: warning: {printable(warning)}")


def _run(args: argparse.Namespace) -> int:
    if args.command == "validate":
        project = api.validate(args.build_toml)
        _warn(project.warnings)
        kernels = ", ".join(f"{k.name} ({k.backend})" for k in project.kernels) or "none"
        _out(
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
        _warn(report.warnings)
        if report.skipped_backends:
            _out(
                f"skipped backends {', '.join(report.skipped_backends)}: build.toml declares "
                f"them, but build2cmake builds only {', '.join(BUILDABLE_BACKENDS)}"
            )
        for name in report.written:
            _out(f"wrote {name}")
        for name in report.removed:
            _out(f"removed {name} (no longer generated)")
        _out(f"{len(report.written)} written, {len(report.unchanged)} unchanged")
    elif args.command == "clean":
        clean_report = api.clean(
            args.build_toml, args.target_dir, dry_run=args.dry_run, force=args.force
        )
        _warn(clean_report.warnings)
        verb = "would remove" if args.dry_run else "removed"
        for name in clean_report.removed:
            _out(f"{verb} {name}")
        for name in clean_report.kept_edited:
            _out(f"kept {name} (edited since generate; --force removes it)")
        if not clean_report.removed and not clean_report.kept_edited:
            _out("nothing to clean")
    elif args.command == "build" and (args.variants or args.all):
        return _build_variants(args)
    elif args.command == "build":
        written, built, sharing = api.build_for_sharing(
            args.build_toml,
            strict=args.strict,
            backend=args.backend,
            ops_id=args.ops_id,
            defines=tuple(args.defines),
            jobs=args.jobs,
            force=args.force,
            allow_toolkit_mismatch=args.allow_toolkit_mismatch,
        )
        _warn(written.warnings)
        backend = built.metadata["backend"]
        assert isinstance(backend, dict)
        archs = ", ".join(backend.get("archs", [])) or "-"
        # The "built" line stays last: scripts read the variant folder from it.
        _print_sharing(sharing)
        _out(f"built {built.path} (backend {backend['type']}, archs {archs})")
    elif args.command == "check-abi":
        policy = checks.AbiPolicy(
            manylinux=args.manylinux,
            python_abi=args.python_abi,
            macos=args.macos,
            torch_stable_abi=args.torch_stable_abi,
        )
        abi_reports = api.check_abi(args.path, policy)
        if any(not r.checked for r in abi_reports):
            raise Build2CMakeError(abi_reports[0].summary())
        for abi_report in abi_reports:
            _out(*abi_report.summary().splitlines())
        if not abi_reports:
            _out("no compiled extension to check")
        return 0 if all(r.ok for r in abi_reports) else 1
    elif args.command == "doctor":
        diagnosis = doctor.diagnose(args.build_toml)
        _out(*diagnosis.lines)
        return 0 if diagnosis.ok else 1
    elif args.command in ("init", "test", "upload"):
        return _run_sharing(args)
    elif args.command == "toolchain":
        return toolchain_command.run(args, _out, _err)
    elif args.command == "list-variants":
        for variant in api.list_variants(args.build_toml):
            _out(variant.folder() if args.folders else variant.spec)
    elif args.command == "ci":
        workflow = api.github_workflow(args.build_toml, args.repository)
        if args.output is None:
            sys.stdout.write(workflow)
        else:
            api.write_workflow(args.output, workflow, args.build_toml, args.repository)
            _out(f"wrote {args.output}")
    elif args.command == "update-build":
        if api.update_build(args.build_toml):
            _out(f"{args.build_toml}: rewritten as edition 5")
        else:
            _out(f"{args.build_toml}: already edition 5")
    return 0


def _print_sharing(sharing: api.SharingReport) -> None:
    for abi in sharing.abi:
        _out(*abi.summary().splitlines())
    if sharing.card is not None:
        _out(f"wrote {sharing.card} (the kernel card, from CARD.md)")
    else:
        _out("no CARD.md: no kernel card (build/CARD.md) written")


def _run_sharing(args: argparse.Namespace) -> int:
    if args.command == "init":
        report = api.init(
            args.directory,
            args.name,
            backends=tuple(args.backends),
            license_id=args.license,
            rocm_archs=tuple(args.rocm_archs or DEFAULT_ROCM_ARCHS),
            force=args.force,
        )
        for name in report.written:
            _out(f"wrote {report.directory / name}")
        _out(
            f"initialized {report.name.repo_id} ({', '.join(report.backends)}) in "
            f"{report.directory}; next: build2cmake build {report.directory / 'build.toml'}"
        )
        return 0
    if args.command == "test":
        status = api.run_kernel_tests(
            args.build_toml,
            variant=args.variant,
            ops_id=args.ops_id,
            defines=tuple(args.defines),
            jobs=args.jobs,
        )
        if status == 5:
            _out("build2cmake test: no test is marked kernels_ci (@pytest.mark.kernels_ci)")
        return status
    plan = api.plan_upload(
        args.build_toml,
        repo_id=args.repo_id,
        branch=args.branch,
        ops_id=args.ops_id,
        private=args.private,
        create_pr=args.create_pr,
        repo_type=args.repo_type,
    )
    for note in plan.notes:
        _err(f"note: {note}")
    if plan.dirty:
        _err(
            f"warning: {', '.join(plan.dirty)} built from a checkout with uncommitted changes: "
            "the recorded commit does not fully identify their sources"
        )
    if args.dry_run:
        _out(*publish.dry_run_lines(plan.request, plan.operations))
        _out("dry run: nothing uploaded")
        return 0
    outcome = publish.upload(plan.request, plan.project_dir, plan.variants)
    if outcome.status == "no_changes":
        _out("no changes to upload")
    for branch, url in outcome.pull_requests:
        _out(f"pull request against {branch}: {url}")
    if outcome.url is not None:
        _out(f"uploaded: {outcome.url}")
    if args.output_json is not None:
        api.write_upload_summary(args.output_json, outcome)
    return 0


def _build_variants(args: argparse.Namespace) -> int:
    """build --variants/--all: progress lines, a summary table; exit 0 only if all built."""
    if args.backend is not None:
        raise Build2CMakeError("--backend: a variant names its backend; leave --backend out")
    results = api.build_variants(
        args.build_toml,
        None if args.all else parse_variants(args.variants),
        sources=PackageSources(
            index_url=args.index_url,
            extra_index_urls=tuple(args.extra_index_url),
            find_links=tuple(args.find_links),
        ),
        concurrent=args.concurrent,
        ops_id=args.ops_id,
        defines=tuple(args.defines),
        jobs=args.jobs,
        force=args.force,
        allow_toolkit_mismatch=args.allow_toolkit_mismatch,
        isolated=not args.no_isolation,
    )
    _out(*summary_table(results).splitlines())
    return 0 if all(r.ok for r in results) else 1
