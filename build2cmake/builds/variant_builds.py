"""`build2cmake build --variants`: the same build as `build`, once per Hub variant, each in its
own uv environment (variant_env), one after another or several at a time.

Each variant compiles in build/cmake-<variant spec>/ with its output in
build/cmake-<variant spec>.log; the terminal gets one line when a variant starts and one when it
ends, then a summary table. A failed variant does not stop the others.

A ROCm variant is built with a ROCm of its release (rocm_installs): one on this machine
(-DBUILD2CMAKE_ROCM_PATH), else one of build2cmake's toolchains (build2cmake.toolchains), inside
which the same `build2cmake build --variants` runs for that variant alone. Its torch comes from
PyTorch's ROCm index; where that cannot be reached, a CPU or CUDA torch of the same release
stands in, for kernels that include none of torch's GPU headers, and metadata.json records it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TextIO

from build2cmake.builds import builder, dist_jobs, variant_folders
from build2cmake.builds.index_settings import redacted
from build2cmake.builds.variant import NEUTRAL_FOLDER, installed_torch_toolkit
from build2cmake.builds.variant_env import (
    PackageSources,
    TorchRelease,
    TorchSources,
    VariantEnv,
    check_torch_release,
    configured_sources,
    describe_sources,
    index_reachable,
    prepare_env,
    rocm_torch_index,
    torch_sources,
)
from build2cmake.config.hub_variants import HubVariant
from build2cmake.config.model import Project
from build2cmake.config.schema import cutlass_major
from build2cmake.ground.errors import Build2CMakeError, printable
from build2cmake.ground.safefs import ProjectFolder
from build2cmake.toolchains import recipes as toolchain_recipes
from build2cmake.toolchains import rocm_installs
from build2cmake.toolchains import sandbox as toolchain_sandbox
from build2cmake.toolchains import store as toolchain_store

# torch's headers that exist only in a GPU build of torch: a stand-in (CPU or CUDA) torch has no
# ATen/hip and c10/hip, and its ATen/cuda and c10/cuda are CUDA's, which a hipified source
# would turn into the missing hip ones.
_GPU_TORCH_INCLUDE = re.compile(
    rb'^[ \t]*#[ \t]*include[ \t]*[<"]((?:ATen|c10)/(?:hip|cuda)/[^>"]*)[>"]', re.MULTILINE
)
_QUOTED_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.MULTILINE)
_SOURCE_LIMIT = 16 << 20
# The key of metadata.json that records a stand-in torch. `kernels` reads metadata.json with
# unknown top-level keys ignored (kernels 0.17's Metadata), so the variant still loads.
STAND_IN_KEY = "torch-stand-in"


@dataclass(frozen=True)
class VariantResult:
    """How one variant's build went."""

    variant: HubVariant
    folder: str
    ok: bool
    seconds: float
    archs: tuple[str, ...] = ()
    message: str = ""
    log: Path | None = None
    note: str = ""  # e.g. the torch that stood in for a ROCm torch


def split_jobs(total: int | None, concurrent: int) -> int:
    """Compile jobs per variant when `concurrent` variants build at once out of `total` jobs
    (default: one per CPU), at least one each."""
    cpus = total or os.cpu_count() or 1
    return max(1, cpus // max(1, concurrent))


def build_variants(
    project: Project,
    project_dir: Path,
    variants: Sequence[HubVariant],
    *,
    extension_for: dict[str, str],
    sources: PackageSources,
    concurrent: int = 1,
    jobs: int | None = None,
    defines: Sequence[str] = (),
    force: bool = False,
    allow_toolkit_mismatch: bool = False,
    python: str = sys.executable,
    env_root: Path | None = None,
    isolated: bool = True,
    out: TextIO = sys.stdout,
    rocm_roots: rocm_installs.SearchRoots | None = None,
    reachable: Callable[[str], bool] = index_reachable,
) -> list[VariantResult]:
    """Build every variant; a failure is recorded in its result, never raised.

    `isolated=False` builds each with `python` and the toolchain of the current environment
    instead of a uv environment (a machine without network access, whose torch is the
    variant's); a variant that environment does not make fails. `rocm_roots` says where ROCm
    installations are looked for, `reachable` whether a package index answers (tests).
    """
    if concurrent < 1:
        raise Build2CMakeError(f"--concurrent {concurrent}: use 1 or more")
    # With an sccache-dist cluster (dist_jobs), the variants share its slots, not the local CPUs.
    backends = {v.backend for v in variants}
    per_variant_jobs = split_jobs(jobs or dist_jobs.cluster_slots(defines, backends), concurrent)
    cutlass = cutlass_major(d for k in project.kernels_for("cuda") for d in k.depends)
    install_lock = threading.Lock()
    print_lock = threading.Lock()
    build_root = project_dir / "build"
    build_root.mkdir(exist_ok=True)
    rocm = rocm_installs.discover(rocm_roots) if any(v.backend == "rocm" for v in variants) else []

    def say(line: str) -> None:
        # A failure's message may carry a path or name from the clone: escaped like every line.
        with print_lock:
            print(printable(line), file=out, flush=True)

    if isolated:
        # No source on the command line: the indexes configured for uv or pip.
        sources = configured_sources(sources, python)
        if sources.origin:
            say(f"package sources: {describe_sources(sources)}; --index-url URL overrides them")

    def one(index: int, variant: HubVariant) -> VariantResult:
        folder = variant.folder()
        log_path = build_root / f"cmake-{variant.spec}.log"
        say(f"[{index}/{len(variants)}] {variant.spec}: building (log: {log_path})")
        start = time.monotonic()
        try:
            with open(log_path, "w", encoding="utf-8") as log:
                result = _build_one(
                    project,
                    project_dir,
                    variant,
                    extension_for=extension_for,
                    sources=sources,
                    cutlass=cutlass,
                    jobs=per_variant_jobs,
                    defines=defines,
                    force=force,
                    allow_toolkit_mismatch=allow_toolkit_mismatch,
                    python=python,
                    env_root=env_root,
                    isolated=isolated,
                    log=log,
                    install_lock=install_lock,
                    rocm=rocm,
                    rocm_roots=rocm_roots,
                    reachable=reachable,
                )
        except (Build2CMakeError, OSError, subprocess.SubprocessError) as error:
            result = VariantResult(variant, folder, False, 0.0, message=str(error))
        seconds = time.monotonic() - start
        result = dataclasses.replace(result, seconds=seconds, log=log_path)
        status = "ok" if result.ok else f"FAILED: {result.message}"
        note = f"; {result.note}" if result.note else ""
        say(f"[{index}/{len(variants)}] {variant.spec}: {status} ({seconds:.0f} s){note}")
        return result

    with ThreadPoolExecutor(max_workers=concurrent) as pool:
        futures = [pool.submit(one, i + 1, v) for i, v in enumerate(variants)]
        return [f.result() for f in futures]


def _build_one(
    project: Project,
    project_dir: Path,
    variant: HubVariant,
    *,
    extension_for: dict[str, str],
    sources: PackageSources,
    cutlass: int | None,
    jobs: int,
    defines: Sequence[str],
    force: bool,
    allow_toolkit_mismatch: bool,
    python: str,
    env_root: Path | None,
    isolated: bool,
    log: TextIO,
    install_lock: threading.Lock,
    rocm: Sequence[rocm_installs.RocmInstall] = (),
    rocm_roots: rocm_installs.SearchRoots | None = None,
    reachable: Callable[[str], bool] = index_reachable,
) -> VariantResult:
    folder = variant.folder()
    if variant.backend not in extension_for:
        raise Build2CMakeError(
            f"build.toml declares no {variant.backend} backend "
            f"(it declares {', '.join(extension_for)})"
        )
    rocm_defines: list[str] = []
    if variant.backend == "rocm" and variant.toolkit is not None and isolated:
        install = _rocm_for(variant, rocm, rocm_roots)
        if install.chroot is not None:
            return build_in_toolchain(
                project_dir,
                variant,
                install,
                sources=sources,
                jobs=jobs,
                defines=defines,
                force=force,
                allow_toolkit_mismatch=allow_toolkit_mismatch,
                ops_id=_ops_id(project, extension_for),
            )
        print(printable(f"ROCm {install.version} from {install.found_in}"), file=log, flush=True)
        rocm_defines.append(f"BUILD2CMAKE_ROCM_PATH={install.root}")
    stand_in: dict[str, object] | None = None
    resolved: list[TorchRelease] = []  # the torch release asked of the index, when it was
    if isolated:
        chosen = torch_sources(variant, sources, reachable=reachable)
        if chosen.unreachable is not None:
            # No ROCm torch will come: refuse a kernel that needs one before downloading any.
            refuse_gpu_headers(
                project, project_dir, "a CPU or CUDA torch", chosen, chosen.unreachable
            )

        def check_release() -> None:
            # A torch release of the variant's series must exist there, and (CUDA) be built for
            # the variant's CUDA release: one line before anything is downloaded.
            if variant.framework == "torch":
                release = check_torch_release(variant, chosen.sources, python=python, log=log)
                resolved.append(release)
                where = describe_sources(chosen.sources)
                print(printable(f"torch {release.version} from {where}: {_built_for(release)}"),
                      file=log)  # fmt: skip

        env = prepare_env(
            variant,
            chosen.sources,
            cutlass=cutlass,
            python=python,
            root=env_root,
            log=log,
            before_create=check_release,
        )
        if variant.backend == "rocm":
            stand_in = _stand_in(project, project_dir, variant, env, chosen)
    else:
        env = VariantEnv(path=Path(sys.prefix), python=Path(python), env=dict(os.environ))
    try:
        compiled = builder.compile_variant(
            project,
            project_dir,
            backend=variant.backend,
            extension_for=extension_for,
            defines=[*env.defines, *rocm_defines, *defines],
            jobs=jobs,
            python=str(env.python),
            build_dir=project_dir / "build" / f"cmake-{variant.spec}",
            env=env.env,
            log=log,
            allow_toolkit_mismatch=allow_toolkit_mismatch,
            expected_variant=folder,
        )
    except builder.VariantMismatchError as error:
        raise Build2CMakeError(f"{error}{_index_hint(variant) if isolated else ''}") from None
    if stand_in is not None:
        compiled = dataclasses.replace(
            compiled, metadata={**compiled.metadata, STAND_IN_KEY: stand_in}
        )
    with install_lock:
        report = variant_folders.install_variant(project, project_dir, compiled, force=force)
    backend_info = report.metadata.get("backend", {})
    archs = backend_info.get("archs", []) if isinstance(backend_info, dict) else []
    # Where its torch came from, said where the index was asked (not when the environment was
    # reused): the index uv took it from.
    notes = [f"torch {r.version} from {redacted(r.index)}" for r in resolved if r.index]
    return VariantResult(
        variant,
        folder,
        True,
        0.0,
        tuple(str(a) for a in archs),
        note="; ".join(n for n in [*notes, _stand_in_note(stand_in)] if n),
    )


def _built_for(release: TorchRelease) -> str:
    """What a torch release was built for, in words."""
    if release.backend is None:
        return "its build is read from it once it is installed"
    if release.toolkit is None:
        return f"a {release.backend} build"
    toolkit = {"cuda": "CUDA", "rocm": "ROCm"}.get(release.backend, release.backend)
    return f"a {toolkit} {release.toolkit[0]}.{release.toolkit[1]} build"


def _rocm_for(
    variant: HubVariant,
    installs: Sequence[rocm_installs.RocmInstall],
    roots: rocm_installs.SearchRoots | None,
) -> rocm_installs.RocmInstall:
    """The ROCm of `variant`'s release, or one error line naming it and the places looked in."""
    assert variant.toolkit is not None
    install = rocm_installs.pick(list(installs), variant.toolkit)
    if install is not None:
        return install
    release = f"{variant.toolkit[0]}.{variant.toolkit[1]}"
    found = ", ".join(f"{i.version} ({i.found_in})" for i in installs) or "none"
    places = "; ".join((roots or rocm_installs.SearchRoots()).places())
    raise Build2CMakeError(
        f"needs ROCm {release}.x, which is not installed (ROCm found: {found}; looked in: "
        f"{places}); {toolchain_recipes.install_hint(variant.toolkit)}"
    )


def _ops_id(project: Project, extension_for: dict[str, str]) -> str:
    """The ops id the extensions were named with (render.extension_name)."""
    return extension_for["rocm"].removeprefix(f"_{project.package_name}_rocm_")


def _torch_release(python: Path) -> str:
    """The installed torch's version (with its local tag, e.g. 2.13.0+cpu)."""
    result = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('torch'))"],
        capture_output=True,
        text=True,
        cwd=NEUTRAL_FOLDER,
        check=False,
    )
    return result.stdout.strip() or "?"


def _stand_in(
    project: Project,
    project_dir: Path,
    variant: HubVariant,
    env: VariantEnv,
    chosen: TorchSources,
) -> dict[str, object] | None:
    """The stand-in record when the environment's torch is not a ROCm build (None when it is);
    refuses a kernel that includes torch's GPU headers, which such a torch does not have."""
    backend, _ = installed_torch_toolkit(str(env.python))
    if backend == "rocm":
        return None
    assert variant.toolkit is not None
    index = rocm_torch_index(variant.toolkit)
    release = _torch_release(env.python)
    refuse_gpu_headers(project, project_dir, f"torch {release} ({backend} build)", chosen, index)
    return {
        "torch": release,
        "torch-backend": backend,
        "instead-of": f"a ROCm {variant.toolkit[0]}.{variant.toolkit[1]} build of torch ({index})",
        "reason": f"{index} cannot be reached" if chosen.unreachable else "sources given",
    }


def refuse_gpu_headers(
    project: Project, project_dir: Path, torch: str, chosen: TorchSources, index: str
) -> None:
    """Refuse, naming the first one, a kernel that includes torch's GPU headers when `torch`
    (not a ROCm build) stands in: it has none of them."""
    includes = gpu_torch_includes(project, project_dir)
    if includes:
        where, header = includes[0]
        why = "cannot be reached" if chosen.unreachable else "was not used"
        raise Build2CMakeError(
            f"{where} includes {header}, a header of a ROCm build of torch, but {torch} stands "
            f"in for it ({index} {why}); install torch from that index: --index-url {index}"
        )


def _stand_in_note(record: dict[str, object] | None) -> str:
    if record is None:
        return ""
    return f"torch {record['torch']} ({record['torch-backend']} build) stood in for ROCm torch"


def gpu_torch_includes(project: Project, project_dir: Path) -> list[tuple[str, str]]:
    """(file, header) for each #include of torch's GPU headers (ATen/hip, c10/hip, ATen/cuda,
    c10/cuda) in the ROCm kernels' sources and the project headers they include ("..."),
    followed through the project only (a symlink or a path leading out is not read)."""
    found: list[tuple[str, str]] = []
    pending: list[PurePosixPath] = []
    search_dirs: set[PurePosixPath] = set()
    for kernel in project.kernels_for("rocm"):
        pending += kernel.sources
        search_dirs.update(kernel.includes)
    if project.torch is not None:
        search_dirs.update(project.torch.includes)
    seen: set[PurePosixPath] = set()
    with ProjectFolder(project_dir) as folder:
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            try:
                text = folder.read(name, _SOURCE_LIMIT, "a kernel source")
            except Build2CMakeError:
                continue  # a symlink or unreadable: the build itself reports it
            if text is None:
                continue
            for match in _GPU_TORCH_INCLUDE.finditer(text):
                found.append((str(name), match[1].decode("utf-8", "replace")))
            for match in _QUOTED_INCLUDE.finditer(text):
                included = match[1].decode("utf-8", "replace")
                for base in (name.parent, *sorted(search_dirs)):
                    candidate = _normal(base / included)
                    if candidate is not None and _project_file(folder, candidate):
                        pending.append(candidate)
                        break
    return sorted(set(found))


def _project_file(folder: ProjectFolder, name: PurePosixPath) -> bool:
    """Whether `name` is a regular file of the project; an include that names no path the
    project folder accepts (a backslash, a NUL) is not one: the compiler's business, not ours."""
    try:
        return folder.is_file(name)
    except Build2CMakeError:
        return False


def _normal(path: PurePosixPath) -> PurePosixPath | None:
    """`path` with `..` resolved, or None when it leaves the project."""
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            if not parts:
                return None
            parts.pop()
        elif part not in (".", ""):
            if part == "/":
                return None
            parts.append(part)
    return PurePosixPath(*parts) if parts else None


def _local_folders(sources: PackageSources) -> list[str]:
    """The folders on this machine that `sources` name (--find-links paths, file:// indexes):
    a build in a chroot sees them at the same paths. A file:// index counts with the folder
    above it: a local mirror's pages (`<root>/simple/<name>/`) link to files beside them
    (`<root>/files/...`), which uv opens too."""
    folders = []
    indexes = [url for url in (sources.index_url, *sources.extra_index_urls) if url]
    for url in [*indexes, *sources.find_links]:
        path = url[len("file://") :] if url.startswith("file://") else url
        if "://" in path or not Path(path).is_dir():
            continue
        folder = Path(path).resolve()
        if url in indexes and folder.parent != Path(folder.anchor):
            folder = folder.parent
        folders.append(str(folder))
    return folders


def build_in_toolchain(
    project_dir: Path,
    variant: HubVariant,
    install: rocm_installs.RocmInstall,
    *,
    sources: PackageSources,
    jobs: int,
    defines: Sequence[str],
    force: bool,
    allow_toolkit_mismatch: bool,
    ops_id: str,
) -> VariantResult:
    """Build `variant` inside the toolchain of `install`, with the same variant build run
    there (build2cmake.builds.inside) on the project, generated already.

    The run there writes this variant's log (build/cmake-<spec>.log) and build/<variant>/
    itself, in the project, which the toolchain sees at the same path.
    """
    folder = variant.folder()
    assert install.chroot is not None
    toolchain = toolchain_store.read_toolchain(install.chroot)
    if toolchain is None:
        raise Build2CMakeError(
            f"ROCm {install.version} was in the toolchain {install.chroot}, which is gone"
        )
    command = [
        # -P: `python -m` in the project folder would put it first on sys.path, and a
        # build2cmake/ package (or a json.py) of the clone would run instead of ours, as root.
        # The project is generated already (and, for a one-variant build, locked by this
        # process): the run inside compiles the variant alone (builds/inside.py).
        "python", "-P", "-m", "build2cmake.builds.inside",
        str(project_dir.resolve() / "build.toml"),
        "--variant", variant.spec, "-j", str(jobs), "--ops-id", ops_id,
        *sources.uv_arguments(),
        *(["--sources-origin", sources.origin] if sources.origin else []),
        *(arg for d in defines for arg in ("-D", d)),
        *(["--force"] if force else []),
        *(["--allow-toolkit-mismatch"] if allow_toolkit_mismatch else []),
    ]  # fmt: skip
    # The project and the local package sources at their own paths; the user's include folders
    # (CPATH, BUILD2CMAKE_INCLUDE_DIRS, ...) read-only, by the sandbox.
    binds = [project_dir.resolve(), *(Path(f) for f in _local_folders(sources))]
    result = toolchain_sandbox.run(
        toolchain, command, cwd=project_dir, binds=binds, capture_output=True, text=True
    )

    if result.returncode != 0:
        failed = [line for line in result.stdout.splitlines() if ": FAILED: " in line]
        why = (
            re.sub(r" \([0-9]+ s\)$", "", failed[-1].split(": FAILED: ", 1)[1])
            if failed
            else (result.stderr.strip().splitlines() or ["no output"])[-1]
        )
        raise Build2CMakeError(
            f"in the chroot {install.suite} (toolchain {toolchain.name}, ROCm {install.version}): "
            f"{why}"
        )
    with ProjectFolder(project_dir) as project_folder:
        raw = project_folder.read(
            PurePosixPath("build") / folder / "metadata.json", 1 << 20, "metadata.json"
        )
    if raw is None:
        # The run reported success yet made no variant: nothing was built, whatever it said.
        raise Build2CMakeError(
            f"in the chroot {install.suite} (toolchain {toolchain.name}, ROCm {install.version}): "
            f"the build made no build/{folder}/metadata.json"
        )
    try:
        metadata = json.loads(raw)
    except (ValueError, RecursionError):
        metadata = {}  # the run in the chroot wrote it; only the summary's archs come from it
    if not isinstance(metadata, dict):
        metadata = {}
    backend_info = metadata.get("backend", {})
    archs = backend_info.get("archs", []) if isinstance(backend_info, dict) else []
    stand_in = metadata.get(STAND_IN_KEY)
    notes = [f"built in toolchain {toolchain.name} (ROCm {toolchain.version})"]
    notes += [_stand_in_note(stand_in)] if isinstance(stand_in, dict) else []
    return VariantResult(
        variant, folder, True, 0.0, tuple(str(a) for a in archs), note="; ".join(notes)
    )


def _index_hint(variant: HubVariant) -> str:
    """Where a torch for `variant` comes from when the default index has another build."""
    if variant.backend == "cpu" or variant.toolkit is None:
        return ""
    tag = (
        variant.backend_tag
        if variant.backend == "cuda"
        else (f"rocm{variant.toolkit[0]}.{variant.toolkit[1]}")
    )
    return (
        f"; PyPI has one {variant.backend} build per torch release: take this one from "
        f"PyTorch's index, --index-url https://download.pytorch.org/whl/{tag}"
    )


def summary_table(results: Sequence[VariantResult]) -> str:
    """The table printed after all variants: variant, result, time, archs."""
    rows = [("variant", "result", "time", "archs")]
    for r in results:
        rows.append(
            (
                r.folder,
                ("ok, torch stand-in" if "stood in" in r.note else "ok") if r.ok else "FAILED",
                f"{r.seconds:.0f} s",
                ", ".join(r.archs) or "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
    ]
    built = sum(r.ok for r in results)
    lines.append(f"{built} of {len(results)} variants built")
    return "\n".join(lines)
