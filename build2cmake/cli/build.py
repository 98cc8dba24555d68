"""The commands that compile and check build/<variant>/: build (one variant, or the Hub
variants in uv environments), check-abi, test, hash and check-builds; and build's option groups,
which kernel-builder's build-and-copy and build-and-upload take too."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from build2cmake import api
from build2cmake.builds.variant_builds import summary_table
from build2cmake.builds.variant_env import PackageSources
from build2cmake.cli.output import out, warn
from build2cmake.cli.project import project_argument
from build2cmake.config.hub_variants import parse_variants
from build2cmake.config.model import BUILDABLE_BACKENDS
from build2cmake.ground.errors import Build2CMakeError
from build2cmake.share import checks

if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]


def add_build(commands: Commands) -> None:
    bld = commands.add_parser(
        "build",
        help="generate, compile and lay the kernel out as build/<variant>/ for `kernels`",
        description="Generate (as generate-torch), compile with CMake + Ninja for one backend "
        "and write build/<variant>/ (Python package, extension, metadata.json), the layout the "
        "Hugging Face kernels library loads with get_local_kernel and from Hub repositories. "
        "A kernels.lock that no longer matches build.toml's kernel-depends is refused.",
    )
    bld.set_defaults(runner="build")
    project_argument(bld)
    add_build_options(bld)
    add_variant_options(bld)


def add_build_options(bld: argparse.ArgumentParser) -> None:
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


def add_variant_options(bld: argparse.ArgumentParser) -> None:
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


def run_build(args: argparse.Namespace) -> int:
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
    warn(written.warnings)
    backend = built.metadata["backend"]
    assert isinstance(backend, dict)
    archs = ", ".join(backend.get("archs", [])) or "-"
    # The "built" line stays last: scripts read the variant folder from it.
    _print_sharing(sharing)
    hint = api.costs_suggestion(build_toml, str(backend["type"]))
    if hint:
        out(hint)
    out(f"built {built.path} (backend {backend['type']}, archs {archs})")
    return 0


def _print_sharing(sharing: api.SharingReport) -> None:
    for abi in sharing.abi:
        out(*abi.summary().splitlines())
    if sharing.card is not None:
        out(f"wrote {sharing.card} (the kernel card, from CARD.md)")
    else:
        out("no CARD.md: no kernel card (build/CARD.md) written")


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
    out(*summary_table(results).splitlines())
    return 0 if all(r.ok for r in results) else 1


def add_check_abi(commands: Commands) -> None:
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


def run_check_abi(args: argparse.Namespace) -> int:
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
        out(*abi_report.summary().splitlines())
    if not abi_reports:
        out("no compiled extension to check")
    return 0 if all(r.ok for r in abi_reports) else 1


def add_test(commands: Commands) -> None:
    tst = commands.add_parser(
        "test",
        help="build if needed and run the kernels_ci tests against build/<variant>/",
        description="Run `pytest tests -m kernels_ci` with the kernel loaded from build/<variant>/ "
        "as kernels loads it. Without --variant: the first backend of CUDA, ROCm, XPU, Metal, "
        "CPU that build.toml declares and this machine can load, built first (incrementally). "
        "Exits with pytest's status.",
    )
    tst.set_defaults(runner="test")
    project_argument(tst)
    tst.add_argument("--variant", metavar="V", help="test this existing build/<V>/ folder")
    tst.add_argument("--ops-id", metavar="ID", help="as for build")
    tst.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE")
    tst.add_argument("-j", "--jobs", type=int, metavar="N")


def run_test(args: argparse.Namespace) -> int:
    status = api.run_kernel_tests(
        api.build_toml_of(args.build_toml),
        variant=args.variant,
        ops_id=args.ops_id,
        defines=tuple(args.defines),
        jobs=args.jobs,
    )
    if status == 5:
        out("build2cmake test: no test is marked kernels_ci (@pytest.mark.kernels_ci)")
    return status


def add_hash(commands: Commands) -> None:
    hsh = commands.add_parser(
        "hash",
        help="recompute each build/<variant>/ digest into its metadata.json",
        description="kernel-builder's hash: for every build/<variant>/ holding a metadata.json, "
        "hash its files (kernels-data's digest: SHA-256 per file, base64) and write the digest "
        "into metadata.json, which the kernels loader checks a download against.",
    )
    hsh.set_defaults(runner="hash")
    project_argument(hsh)


def run_hash(args: argparse.Namespace) -> int:
    for result in api.hash_variants(api.build_toml_of(args.build_toml)):
        state = "digest written" if result.changed else "digest unchanged"
        out(f"build/{result.variant}/: {state} ({result.files} files)")
    return 0


def add_costs(commands: Commands) -> None:
    cst = commands.add_parser(
        "costs",
        help="keep this machine's compile times in the project, for a first build elsewhere",
        description="Write the seconds each compile of the project took in this machine's "
        "builds (recorded by `build` and `pip install -e .`) into build2cmake-costs.tsv beside "
        "build.toml. Commit it: a build on a machine that never built the kernel then starts "
        "its longest compiles first, as a rebuild here does. It decides the order only; a stale "
        "file changes nothing else. Lines of backends not built here are kept.",
    )
    cst.set_defaults(runner="costs")
    project_argument(cst)
    cst.add_argument(
        "--force",
        action="store_true",
        help="replace a build2cmake-costs.tsv build2cmake did not write",
    )


def run_costs(args: argparse.Namespace) -> int:
    report = api.save_costs(api.build_toml_of(args.build_toml), force=args.force)
    counts = ", ".join(f"{backend}: {count} compiles" for backend, count in report.written.items())
    out(f"wrote {report.path.name} ({counts})")
    return 0


def add_check_builds(commands: Commands) -> None:
    chk = commands.add_parser(
        "check-builds",
        help="check each build/<variant>/metadata.json and its digest",
        description="kernel-builder's check-builds: every build/<variant>/metadata.json parses "
        "as the kernels loader parses it (with its own parser when kernels is installed), and "
        "its digest matches the variant's files, as the loader checks them. Exits 1 when one "
        "does not.",
    )
    chk.set_defaults(runner="check-builds")
    project_argument(chk)


def run_check_builds(args: argparse.Namespace) -> int:
    results = api.check_builds(api.build_toml_of(args.build_toml))
    for result in results:
        if not result.problems:
            out(f"build/{result.variant}/: ok")
        for problem in result.problems:
            out(f"build/{result.variant}/: {problem}")
    return 0 if all(not r.problems for r in results) else 1
