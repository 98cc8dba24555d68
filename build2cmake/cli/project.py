"""The commands on a project's files and on this machine: generate-torch, validate, clean,
doctor, list-variants, ci, update-build, init, lock, toolchain; and the project argument (a
build.toml or its folder) that most commands take."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from build2cmake import api
from build2cmake.builds import doctor
from build2cmake.cli.output import err, out, warn
from build2cmake.config.lock import dependency_text
from build2cmake.config.model import BUILDABLE_BACKENDS
from build2cmake.generate.init import DEFAULT_ROCM_ARCHS
from build2cmake.toolchains import command as toolchain_command

if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]


def project_argument(parser: argparse.ArgumentParser) -> None:
    """BUILD_TOML, or the project's folder as kernel-builder's KERNEL_DIR (default: here)."""
    parser.add_argument(
        "build_toml",
        type=Path,
        nargs="?",
        default=Path("build.toml"),
        metavar="BUILD_TOML|KERNEL_DIR",
        help="the project's build.toml, or its folder (default: ./build.toml)",
    )


def add_generate_torch(commands: Commands) -> None:
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


def run_generate_torch(args: argparse.Namespace) -> int:
    report = api.generate_torch(
        args.build_toml,
        args.target_dir,
        force=args.force,
        backend=args.backend,
        ops_id=args.ops_id,
    )
    warn(report.warnings)
    if report.skipped_backends:
        out(
            f"skipped backends {', '.join(report.skipped_backends)}: build.toml declares "
            f"them, but build2cmake builds only {', '.join(BUILDABLE_BACKENDS)}"
        )
    for name in report.written:
        out(f"wrote {name}")
    for name in report.removed:
        out(f"removed {name} (no longer generated)")
    out(f"{len(report.written)} written, {len(report.unchanged)} unchanged")
    return 0


def add_validate(commands: Commands) -> None:
    val = commands.add_parser(
        "validate",
        help="check build.toml only",
        description="Check build.toml and the files it names; exit 0 "
        "when valid, 2 with a message otherwise.",
    )
    val.set_defaults(runner="validate")
    val.add_argument("build_toml", type=Path, metavar="BUILD_TOML")


def run_validate(args: argparse.Namespace) -> int:
    project = api.validate(args.build_toml)
    warn(project.warnings)
    kernels = ", ".join(f"{k.name} ({k.backend})" for k in project.kernels) or "none"
    out(
        f"{args.build_toml}: valid ({project.source_format}, {project.framework}); "
        f"package {project.package_name}, backends {', '.join(project.backends)}, "
        f"kernels: {kernels}"
    )
    return 0


def add_clean(commands: Commands) -> None:
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


def run_clean(args: argparse.Namespace) -> int:
    report = api.clean(args.build_toml, args.target_dir, dry_run=args.dry_run, force=args.force)
    warn(report.warnings)
    verb = "would remove" if args.dry_run else "removed"
    for name in report.removed:
        out(f"{verb} {name}")
    for name in report.kept_edited:
        out(f"kept {name} (edited since generate; --force removes it)")
    if not report.removed and not report.kept_edited:
        out("nothing to clean")
    return 0


def add_doctor(commands: Commands) -> None:
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


def run_doctor(args: argparse.Namespace) -> int:
    build_toml = None if args.build_toml is None else api.build_toml_of(args.build_toml)
    diagnosis = doctor.diagnose(build_toml)
    out(*diagnosis.lines)
    return 0 if diagnosis.ok else 1


def add_list_variants(commands: Commands) -> None:
    lst = commands.add_parser(
        "list-variants",
        help="the Hub variants `build --all` builds for BUILD_TOML",
        description="Print, one a line, the variants (torch x backend x toolkit) that Hub "
        "kernels carry for this machine's architecture and BUILD_TOML's backends, [torch] "
        "minver/maxver, [general.cuda] minver/maxver and cuda-minver admit.",
    )
    lst.set_defaults(runner="list-variants")
    project_argument(lst)
    lst.add_argument(
        "--folders",
        "--arch",
        action="store_true",
        help="print build/<variant> folder names (torch213-cxx11-cpu-x86_64-linux) instead; "
        "--arch is kernel-builder's spelling",
    )


def run_list_variants(args: argparse.Namespace) -> int:
    for variant in api.list_variants(api.build_toml_of(args.build_toml)):
        out(variant.folder() if args.folders else variant.spec)
    return 0


def add_ci(commands: Commands) -> None:
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


def run_ci(args: argparse.Namespace) -> int:
    workflow = api.github_workflow(
        args.build_toml, args.repository, runners=tuple(args.runners), publish=args.publish
    )
    if args.output is None:
        sys.stdout.write(workflow)
    else:
        api.write_workflow(args.output, workflow, args.build_toml, args.repository)
        out(f"wrote {args.output}")
    return 0


def add_update_build(commands: Commands) -> None:
    upd = commands.add_parser(
        "update-build", help="rewrite an older build.toml as edition 5, keeping comments"
    )
    upd.set_defaults(runner="update-build")
    project_argument(upd)


def run_update_build(args: argparse.Namespace) -> int:
    build_toml = api.build_toml_of(args.build_toml)
    if api.update_build(build_toml):
        out(f"{build_toml}: rewritten as edition 5")
    else:
        out(f"{build_toml}: already edition 5")
    return 0


def add_init(commands: Commands) -> None:
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


def run_init(args: argparse.Namespace) -> int:
    report = api.init(
        args.directory,
        args.name,
        backends=tuple(args.backends),
        license_id=args.license,
        rocm_archs=tuple(args.rocm_archs or DEFAULT_ROCM_ARCHS),
        force=args.force,
    )
    for name in report.written:
        out(f"wrote {report.directory / name}")
    out(
        f"initialized {report.name.repo_id} ({', '.join(report.backends)}) in "
        f"{report.directory}; next: build2cmake build {report.directory / 'build.toml'}"
    )
    return 0


def add_lock(commands: Commands) -> None:
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
    project_argument(lck)
    lck.add_argument(
        "--force",
        action="store_true",
        help="replace a kernels.lock that is not one this command writes",
    )


def run_lock(args: argparse.Namespace) -> int:
    report = api.lock(api.build_toml_of(args.build_toml), force=args.force)
    if not report.entries and not report.written:
        out("build.toml has no kernel-depends: nothing to lock")
        return 0
    for entry in report.entries:
        out(f"{dependency_text(entry.dependency)}: {entry.commit} {entry.hash}")
    out(f"{'wrote' if report.written else 'unchanged:'} {report.path}")
    return 0


def add_toolchain(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """toolchain list | install | remove | path | run: the ROCm toolchains build2cmake makes."""
    toolchain_command.add_parser(commands)
    commands.choices["toolchain"].set_defaults(runner="toolchain")


def run_toolchain(args: argparse.Namespace) -> int:
    return toolchain_command.run(args, out, err)
