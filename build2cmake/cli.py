"""The command line: parse arguments, call build2cmake.api, print (escaped), exit 0, 2 or 3.

Each command is two small pieces beside each other: `_add_<command>` adds its subparser (and
sets `runner`, the command's name in COMMANDS), `_run_<command>` calls the library and prints;
COMMANDS lists them once, in the help's order, and the parser and RUNNERS are made from it.
kernel-builder's command names (cli_kernel_builder.py) are parsers of their own that fill in the
same arguments and name the same runners.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from build2cmake import __version__, api, cli_kernel_builder, completions
from build2cmake.builds import doctor
from build2cmake.builds.variant_builds import summary_table
from build2cmake.builds.variant_env import PackageSources
from build2cmake.config.hub_variants import parse_variants
from build2cmake.config.lock import dependency_text
from build2cmake.config.model import BUILDABLE_BACKENDS
from build2cmake.generate.init import DEFAULT_ROCM_ARCHS
from build2cmake.ground import interrupts
from build2cmake.ground.errors import Build2CMakeError, BuildConfigErrors, printable
from build2cmake.share import checks, publish
from build2cmake.toolchains import command as toolchain_command

if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="build2cmake",
        description="Turn a kernel project's build.toml into a CMake + scikit-build-core build.",
        epilog="kernel-builder's command names work too: "
        f"{', '.join(cli_kernel_builder.NAMES)} (see docs/sharing.md for what each does here).",
    )
    parser.add_argument("--version", action="version", version=f"build2cmake {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for _, add, _ in COMMANDS:
        if add is not None:
            add(commands)
    cli_kernel_builder.add_commands(
        commands,
        cli_kernel_builder.SharedOptions(
            build=_add_build_options, variants=_add_variant_options, upload=_add_upload_options
        ),
    )
    return parser


def _add_toolchain(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """toolchain list | install | remove | path | run: the ROCm toolchains build2cmake makes."""
    toolchain_command.add_parser(commands)
    commands.choices["toolchain"].set_defaults(runner="toolchain")


def _run_toolchain(args: argparse.Namespace) -> int:
    return toolchain_command.run(args, _out, _err)


def _project_argument(parser: argparse.ArgumentParser) -> None:
    """BUILD_TOML, or the project's folder as kernel-builder's KERNEL_DIR (default: here)."""
    parser.add_argument(
        "build_toml",
        type=Path,
        nargs="?",
        default=Path("build.toml"),
        metavar="BUILD_TOML|KERNEL_DIR",
        help="the project's build.toml, or its folder (default: ./build.toml)",
    )


# -- generate, validate, clean -----------------------------------------------------------------


def _add_generate_torch(commands: Commands) -> None:
    gen = commands.add_parser(
        "generate-torch",
        help="write CMakeLists.txt, cmake/, pyproject.toml and the torch glue",
        description="Write the build files for build.toml; then build with "
        "`pip install --no-build-isolation -e <TARGET_DIR>`.",
    )
    gen.set_defaults(runner="generate-torch")
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


def _run_generate_torch(args: argparse.Namespace) -> int:
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
    return 0


def _add_validate(commands: Commands) -> None:
    val = commands.add_parser(
        "validate",
        help="check build.toml only",
        description="Check build.toml and the files it names; exit 0 "
        "when valid, 2 with a message otherwise.",
    )
    val.set_defaults(runner="validate")
    val.add_argument("build_toml", type=Path, metavar="BUILD_TOML")


def _run_validate(args: argparse.Namespace) -> int:
    project = api.validate(args.build_toml)
    _warn(project.warnings)
    kernels = ", ".join(f"{k.name} ({k.backend})" for k in project.kernels) or "none"
    _out(
        f"{args.build_toml}: valid ({project.source_format}, {project.framework}); "
        f"package {project.package_name}, backends {', '.join(project.backends)}, "
        f"kernels: {kernels}"
    )
    return 0


def _add_clean(commands: Commands) -> None:
    cln = commands.add_parser(
        "clean",
        help="remove what generate-torch wrote and the build folder",
        description="Remove exactly the files generate-torch wrote (kept if you edited them, "
        "unless --force) and the build folder; nothing else.",
    )
    cln.set_defaults(runner="clean")
    cln.add_argument("build_toml", type=Path, metavar="BUILD_TOML")
    cln.add_argument("target_dir", type=Path, nargs="?", metavar="TARGET_DIR")
    cln.add_argument("--dry-run", action="store_true", help="list what would go; delete nothing")
    cln.add_argument("--force", action="store_true", help="also remove generated files you edited")


def _run_clean(args: argparse.Namespace) -> int:
    report = api.clean(args.build_toml, args.target_dir, dry_run=args.dry_run, force=args.force)
    _warn(report.warnings)
    verb = "would remove" if args.dry_run else "removed"
    for name in report.removed:
        _out(f"{verb} {name}")
    for name in report.kept_edited:
        _out(f"kept {name} (edited since generate; --force removes it)")
    if not report.removed and not report.kept_edited:
        _out("nothing to clean")
    return 0


# -- build -------------------------------------------------------------------------------------


def _add_build(commands: Commands) -> None:
    bld = commands.add_parser(
        "build",
        help="generate, compile and lay the kernel out as build/<variant>/ for `kernels`",
        description="Generate (as generate-torch), compile with CMake + Ninja for one backend "
        "and write build/<variant>/ (Python package, extension, metadata.json), the layout the "
        "Hugging Face kernels library loads with get_local_kernel and from Hub repositories. "
        "A kernels.lock that no longer matches build.toml's kernel-depends is refused.",
    )
    bld.set_defaults(runner="build")
    _project_argument(bld)
    _add_build_options(bld)
    _add_variant_options(bld)


def _add_build_options(bld: argparse.ArgumentParser) -> None:
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
    which.add_argument(
        "--variant",
        dest="variants",
        metavar="V",
        help="kernel-builder's spelling: one variant, e.g. torch213-cxx11-cpu-x86_64-linux",
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
        "--index-url",
        metavar="URL",
        help="package index for torch and nvcc (default: the one configured for uv or pip, "
        "else PyPI)",
    )
    group.add_argument(
        "--extra-index-url", action="append", default=[], metavar="URL", help="repeatable"
    )
    group.add_argument(
        "--find-links", action="append", default=[], metavar="PATH", help="repeatable"
    )


def _run_build(args: argparse.Namespace) -> int:
    build_toml = api.build_toml_of(args.build_toml)
    if args.variants or args.all:
        return _build_variants(args, build_toml)
    written, built, sharing = api.build_for_sharing(
        build_toml,
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
    return 0


def _print_sharing(sharing: api.SharingReport) -> None:
    for abi in sharing.abi:
        _out(*abi.summary().splitlines())
    if sharing.card is not None:
        _out(f"wrote {sharing.card} (the kernel card, from CARD.md)")
    else:
        _out("no CARD.md: no kernel card (build/CARD.md) written")


def _build_variants(args: argparse.Namespace, build_toml: Path) -> int:
    """build --variants/--all: progress lines, a summary table; exit 0 only if all built."""
    if args.backend is not None:
        raise Build2CMakeError("--backend: a variant names its backend; leave --backend out")
    results = api.build_variants(
        build_toml,
        # --variant(s) over --all: build-and-copy defaults to --all and takes --variant too.
        parse_variants(args.variants) if args.variants else None,
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


def _add_check_abi(commands: Commands) -> None:
    abi = commands.add_parser(
        "check-abi",
        help="check built extensions with kernel-abi-check (as kernel-builder check-abi)",
        description="Check every compiled extension of build/<variant>/ folders: manylinux "
        "symbol versions (ELF; macOS version for Mach-O), the Python stable ABI, and with "
        "--torch-stable-abi torch's stable ABI (shim functions of later torch releases, torch's "
        "C++ API). `build` runs the same checks. Exits 1 when a violation is found.",
    )
    abi.set_defaults(runner="check-abi")
    abi.add_argument(
        "path",
        type=Path,
        nargs="?",
        default=Path("build.toml"),
        metavar="BUILD_TOML|VARIANT_DIR|KERNEL_DIR",
        help="the project's build.toml or folder (all its build/<variant>/), or one variant folder",
    )
    abi.add_argument("-m", "--manylinux", default=checks.MANYLINUX, metavar="VERSION")
    abi.add_argument("-p", "--python-abi", default=checks.PYTHON_ABI, metavar="VERSION")
    abi.add_argument("--macos", default=checks.MACOS, metavar="VERSION")
    abi.add_argument(
        "--torch-stable-abi",
        metavar="VERSION",
        help="also check torch's stable ABI of this version (e.g. 2.10); default: not checked",
    )


def _run_check_abi(args: argparse.Namespace) -> int:
    policy = checks.AbiPolicy(
        manylinux=args.manylinux,
        python_abi=args.python_abi,
        macos=args.macos,
        torch_stable_abi=args.torch_stable_abi,
    )
    path = args.path
    if path.is_dir() and not (path / "metadata.json").is_file() and (path / "build.toml").is_file():
        path = path / "build.toml"  # kernel-builder's KERNEL_DIR
    abi_reports = api.check_abi(path, policy)
    if any(not r.checked for r in abi_reports):
        raise Build2CMakeError(abi_reports[0].summary())
    for abi_report in abi_reports:
        _out(*abi_report.summary().splitlines())
    if not abi_reports:
        _out("no compiled extension to check")
    return 0 if all(r.ok for r in abi_reports) else 1


# -- looking at a project and this machine ------------------------------------------------------


def _add_doctor(commands: Commands) -> None:
    doc = commands.add_parser(
        "doctor",
        help="what this machine can build: torch, HIP/CUDA compilers, archs, fixes",
        description="Report the torch, HIP and CUDA toolchains found here, which archs each can "
        "compile, and (given BUILD_TOML) which of its archs cannot be built here, why, and the "
        "command that fixes it. Exit 0 when everything build.toml needs is here, 1 otherwise.",
    )
    doc.set_defaults(runner="doctor")
    doc.add_argument(
        "build_toml", type=Path, nargs="?", metavar="BUILD_TOML", help="or the project's folder"
    )


def _run_doctor(args: argparse.Namespace) -> int:
    build_toml = None if args.build_toml is None else api.build_toml_of(args.build_toml)
    diagnosis = doctor.diagnose(build_toml)
    _out(*diagnosis.lines)
    return 0 if diagnosis.ok else 1


def _add_list_variants(commands: Commands) -> None:
    lst = commands.add_parser(
        "list-variants",
        help="the Hub variants `build --all` builds for BUILD_TOML",
        description="Print, one a line, the variants (torch x backend x toolkit) that Hub "
        "kernels carry for this machine's architecture and BUILD_TOML's backends, [torch] "
        "minver/maxver, [general.cuda] minver/maxver and cuda-minver admit.",
    )
    lst.set_defaults(runner="list-variants")
    _project_argument(lst)
    lst.add_argument(
        "--folders",
        "--arch",
        action="store_true",
        help="print build/<variant> folder names (torch213-cxx11-cpu-x86_64-linux) instead; "
        "--arch is kernel-builder's spelling",
    )


def _run_list_variants(args: argparse.Namespace) -> int:
    for variant in api.list_variants(api.build_toml_of(args.build_toml)):
        _out(variant.folder() if args.folders else variant.spec)
    return 0


def _add_ci(commands: Commands) -> None:
    ci = commands.add_parser("ci", help="write a CI workflow that builds every variant")
    ci.set_defaults(runner="ci")
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
    ci.add_argument(
        "--runner",
        dest="runners",
        action="append",
        default=[],
        metavar="LABEL",
        help="runs-on label of the build jobs (default: ubuntu-latest), e.g. a larger runner's "
        "name; repeat for a self-hosted runner's labels",
    )
    ci.add_argument(
        "--publish",
        action="store_true",
        help="add a job that runs `build2cmake upload` when a v* tag is pushed, with the Hub "
        "token from the repository secret HF_TOKEN",
    )


def _run_ci(args: argparse.Namespace) -> int:
    workflow = api.github_workflow(
        args.build_toml, args.repository, runners=tuple(args.runners), publish=args.publish
    )
    if args.output is None:
        sys.stdout.write(workflow)
    else:
        api.write_workflow(args.output, workflow, args.build_toml, args.repository)
        _out(f"wrote {args.output}")
    return 0


def _add_update_build(commands: Commands) -> None:
    upd = commands.add_parser(
        "update-build", help="rewrite an older build.toml as edition 5, keeping comments"
    )
    upd.set_defaults(runner="update-build")
    _project_argument(upd)


def _run_update_build(args: argparse.Namespace) -> int:
    build_toml = api.build_toml_of(args.build_toml)
    if api.update_build(build_toml):
        _out(f"{build_toml}: rewritten as edition 5")
    else:
        _out(f"{build_toml}: already edition 5")
    return 0


# -- sharing: init, test, upload ----------------------------------------------------------------


def _add_init(commands: Commands) -> None:
    ini = commands.add_parser(
        "init",
        help="create a new kernel project (build.toml, kernel sources, binding, tests, card)",
        description="Create a kernel project: build.toml (edition 5, [general.hub] repo-id), one "
        "kernel source per backend, torch-ext/ binding and package, tests/ (kernels_ci), "
        "example.py, benchmarks/, CARD.md, .gitignore and .gitattributes.",
    )
    ini.set_defaults(runner="init")
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
        "--overwrite",
        action="store_true",
        help="write into a non-empty DIR (replaces init's files, keeps the others); --overwrite "
        "is kernel-builder's spelling",
    )


def _run_init(args: argparse.Namespace) -> int:
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


def _add_test(commands: Commands) -> None:
    tst = commands.add_parser(
        "test",
        help="build if needed and run the kernels_ci tests against build/<variant>/",
        description="Run `pytest tests -m kernels_ci` with the kernel loaded from build/<variant>/ "
        "as kernels loads it. Without --variant: the first backend of CUDA, ROCm, XPU, Metal, "
        "CPU that build.toml declares and this machine can load, built first (incrementally). "
        "Exits with pytest's status.",
    )
    tst.set_defaults(runner="test")
    _project_argument(tst)
    tst.add_argument("--variant", metavar="V", help="test this existing build/<V>/ folder")
    tst.add_argument("--ops-id", metavar="ID", help="as for build")
    tst.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE")
    tst.add_argument("-j", "--jobs", type=int, metavar="N")


def _run_test(args: argparse.Namespace) -> int:
    status = api.run_kernel_tests(
        api.build_toml_of(args.build_toml),
        variant=args.variant,
        ops_id=args.ops_id,
        defines=tuple(args.defines),
        jobs=args.jobs,
    )
    if status == 5:
        _out("build2cmake test: no test is marked kernels_ci (@pytest.mark.kernels_ci)")
    return status


def _add_upload(commands: Commands) -> None:
    upl = commands.add_parser(
        "upload",
        help="publish build/ to the Hugging Face Hub (refuses a stale build)",
        description="Check that every build/<variant>/ matches build.toml and is newer than its "
        "sources (and that kernels.lock, if any, matches its kernel-depends), then publish with "
        "huggingface_hub, as kernel-builder upload does: build/ and "
        "benchmarks/benchmark*.py to branch v<version> of the repo-id (files of an uploaded "
        "variant that the build no longer makes are deleted), build/CARD.md (the card) to "
        "main as README.md. The token is huggingface_hub's (HF_TOKEN, or `hf auth login`); "
        "HF_ENDPOINT picks another Hub.",
    )
    upl.set_defaults(runner="upload")
    _project_argument(upl)
    _add_upload_options(upl)


def _add_upload_options(upl: argparse.ArgumentParser) -> None:
    upl.add_argument("--repo-id", help="default: [general.hub].repo-id")
    upl.add_argument("--branch", help="default: [general.hub].branch, else v<version>")
    # build-and-upload has build's --ops-id already (the same option, the same meaning).
    if not any("--ops-id" in a.option_strings for a in upl._actions):
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
    upl.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bars while uploading (kernel-builder's option)",
    )


def _run_upload(args: argparse.Namespace) -> int:
    plan = api.plan_upload(
        api.build_toml_of(args.build_toml),
        repo_id=args.repo_id,
        branch=args.branch,
        ops_id=args.ops_id,
        private=args.private,
        create_pr=args.create_pr,
        repo_type=args.repo_type,
    )
    for note in (*plan.notes, *([plan.lock_note] if plan.lock_note is not None else [])):
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
    if args.quiet:
        _no_progress_bars()
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


def _no_progress_bars() -> None:
    with contextlib.suppress(ImportError):
        from huggingface_hub.utils.tqdm import disable_progress_bars

        disable_progress_bars()


def _run_build_and_upload(args: argparse.Namespace) -> int:
    """kernel-builder's build-and-upload: `build` (every Hub variant unless --variant(s) or
    --backend says otherwise), then `upload` of build/, only when every variant built."""
    if not args.variants and args.backend is None:
        args.all = True
    status = _run_build(args)
    if status != 0:
        _err("build2cmake: not uploading: not every variant built")
        return status
    return _run_upload(args)


# -- lock, hash, check-builds, completions -------------------------------------------------------


def _add_lock(commands: Commands) -> None:
    lck = commands.add_parser(
        "lock",
        help="pin build.toml's kernel-depends to Hub commits and hashes in kernels.lock",
        description="Resolve every kernel-depends entry of build.toml (all backends) through "
        "huggingface_hub: version = N to the commit of the repository's v<N> branch (as the "
        "kernels loader resolves it), revision to its commit; hash each repository at that "
        "commit as nix-builder does (the SRI hash of the NAR of every file, downloaded one at a "
        "time); write kernels.lock beside build.toml in kernels-data's format. `build` and "
        "`upload` refuse a kernels.lock that no longer matches build.toml.",
    )
    lck.set_defaults(runner="lock")
    _project_argument(lck)
    lck.add_argument(
        "--force",
        action="store_true",
        help="replace a kernels.lock that is not one this command writes",
    )


def _run_lock(args: argparse.Namespace) -> int:
    report = api.lock(api.build_toml_of(args.build_toml), force=args.force)
    if not report.entries and not report.written:
        _out("build.toml has no kernel-depends: nothing to lock")
        return 0
    for entry in report.entries:
        _out(f"{dependency_text(entry.dependency)}: {entry.commit} {entry.hash}")
    _out(f"{'wrote' if report.written else 'unchanged:'} {report.path}")
    return 0


def _add_hash(commands: Commands) -> None:
    hsh = commands.add_parser(
        "hash",
        help="recompute each build/<variant>/ digest into its metadata.json",
        description="kernel-builder's hash: for every build/<variant>/ holding a metadata.json, "
        "hash its files (kernels-data's digest: SHA-256 per file, base64) and write the digest "
        "into metadata.json, which the kernels loader checks a download against.",
    )
    hsh.set_defaults(runner="hash")
    _project_argument(hsh)


def _run_hash(args: argparse.Namespace) -> int:
    for result in api.hash_variants(api.build_toml_of(args.build_toml)):
        state = "digest written" if result.changed else "digest unchanged"
        _out(f"build/{result.variant}/: {state} ({result.files} files)")
    return 0


def _add_check_builds(commands: Commands) -> None:
    chk = commands.add_parser(
        "check-builds",
        help="check each build/<variant>/metadata.json and its digest",
        description="kernel-builder's check-builds: every build/<variant>/metadata.json parses "
        "as the kernels loader parses it (with its own parser when kernels is installed), and "
        "its digest matches the variant's files, as the loader checks them. Exits 1 when one "
        "does not.",
    )
    chk.set_defaults(runner="check-builds")
    _project_argument(chk)


def _run_check_builds(args: argparse.Namespace) -> int:
    results = api.check_builds(api.build_toml_of(args.build_toml))
    for result in results:
        if not result.problems:
            _out(f"build/{result.variant}/: ok")
        for problem in result.problems:
            _out(f"build/{result.variant}/: {problem}")
    return 0 if all(not r.problems for r in results) else 1


def _add_completions(commands: Commands) -> None:
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


def _run_completions(args: argparse.Namespace) -> int:
    sys.stdout.write(completions.script(args.shell, _parser()))
    return 0


def _run_fill_card(args: argparse.Namespace) -> int:
    content = api.fill_card(api.build_toml_of(args.build_toml))
    if args.output is None and sys.stdout.isatty():
        # The card is the project's text: on a terminal, escaped line by line.
        _out(*content.splitlines())
    elif args.output is None:
        sys.stdout.write(content)
    else:
        api.write_filled_card(args.output, content)
        _err(f"wrote {args.output}")
    return 0


def _run_not_here(args: argparse.Namespace) -> int:
    raise Build2CMakeError(args.not_here)


# Every command, in the order of the help's list: the runner its subparser names, the function
# that adds the subparser (None for those only kernel-builder's names reach,
# cli_kernel_builder.py) and the function that runs it.
COMMANDS: tuple[
    tuple[str, Callable[[Commands], None] | None, Callable[[argparse.Namespace], int]], ...
] = (
    ("generate-torch", _add_generate_torch, _run_generate_torch),
    ("validate", _add_validate, _run_validate),
    ("clean", _add_clean, _run_clean),
    ("build", _add_build, _run_build),
    ("check-abi", _add_check_abi, _run_check_abi),
    ("doctor", _add_doctor, _run_doctor),
    ("list-variants", _add_list_variants, _run_list_variants),
    ("ci", _add_ci, _run_ci),
    ("update-build", _add_update_build, _run_update_build),
    ("init", _add_init, _run_init),
    ("test", _add_test, _run_test),
    ("upload", _add_upload, _run_upload),
    ("lock", _add_lock, _run_lock),
    ("hash", _add_hash, _run_hash),
    ("check-builds", _add_check_builds, _run_check_builds),
    ("completions", _add_completions, _run_completions),
    ("toolchain", _add_toolchain, _run_toolchain),
    ("build-and-upload", None, _run_build_and_upload),
    ("fill-card", None, _run_fill_card),
    ("not-here", None, _run_not_here),
)
RUNNERS: dict[str, Callable[[argparse.Namespace], int]] = {name: run for name, _, run in COMMANDS}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 success, 2 something the user must fix, 3 a bug of
    build2cmake's, 128 + N after signal N: SIGINT, SIGTERM, SIGHUP). Run as the program (no
    `argv`), it stops every process it started when one of those signals comes."""
    if argv is None:
        interrupts.install()
    try:
        args = _parser().parse_args(argv)
        return RUNNERS[args.runner](args)
    except interrupts.Interrupted as interrupted:
        _err(interrupted.message())
        return interrupted.exit_code
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
