"""`build2cmake build --variants`: the same build as `build`, once per Hub variant, each in its
own uv environment (variant_env), one after another or several at a time.

Each variant compiles in build/cmake-<variant spec>/ with its output in
build/cmake-<variant spec>.log; the terminal gets one line when a variant starts and one when it
ends, then a summary table. A failed variant does not stop the others.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from build2cmake import builder
from build2cmake.errors import Build2CMakeError
from build2cmake.hub_variants import HubVariant
from build2cmake.model import Project
from build2cmake.variant_env import PackageSources, VariantEnv, prepare_env


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
) -> list[VariantResult]:
    """Build every variant; a failure is recorded in its result, never raised.

    `isolated=False` builds each with `python` and the toolchain of the current environment
    instead of a uv environment (a machine without network access, whose torch is the
    variant's); a variant that environment does not make fails.
    """
    if concurrent < 1:
        raise Build2CMakeError(f"--concurrent {concurrent}: use 1 or more")
    per_variant_jobs = split_jobs(jobs, concurrent)
    cutlass = any(d.startswith("cutlass") for k in project.kernels_for("cuda") for d in k.depends)
    install_lock = threading.Lock()
    print_lock = threading.Lock()
    build_root = project_dir / "build"
    build_root.mkdir(exist_ok=True)

    def say(line: str) -> None:
        with print_lock:
            print(line, file=out, flush=True)

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
                )
        except (Build2CMakeError, OSError, subprocess.SubprocessError) as error:
            result = VariantResult(variant, folder, False, 0.0, message=str(error))
        seconds = time.monotonic() - start
        result = VariantResult(
            variant, result.folder, result.ok, seconds, result.archs, result.message, log_path
        )
        status = "ok" if result.ok else f"FAILED: {result.message}"
        say(f"[{index}/{len(variants)}] {variant.spec}: {status} ({seconds:.0f} s)")
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
    cutlass: bool,
    jobs: int,
    defines: Sequence[str],
    force: bool,
    allow_toolkit_mismatch: bool,
    python: str,
    env_root: Path | None,
    isolated: bool,
    log: TextIO,
    install_lock: threading.Lock,
) -> VariantResult:
    folder = variant.folder()
    if variant.backend not in extension_for:
        raise Build2CMakeError(
            f"build.toml declares no {variant.backend} backend "
            f"(it declares {', '.join(extension_for)})"
        )
    if isolated:
        env = prepare_env(variant, sources, cutlass=cutlass, python=python, root=env_root, log=log)
    else:
        env = VariantEnv(path=Path(sys.prefix), python=Path(python), env=dict(os.environ))
    try:
        compiled = builder.compile_variant(
            project,
            project_dir,
            backend=variant.backend,
            extension_for=extension_for,
            defines=[*env.defines, *defines],
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
    with install_lock:
        report = builder.install_variant(project, project_dir, compiled, force=force)
    backend_info = report.metadata.get("backend", {})
    archs = backend_info.get("archs", []) if isinstance(backend_info, dict) else []
    return VariantResult(variant, folder, True, 0.0, tuple(str(a) for a in archs))


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
                "ok" if r.ok else "FAILED",
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
