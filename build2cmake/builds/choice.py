"""Which ROCm a one-variant `build2cmake build` compiles with: the machine's own or one of
build2cmake's toolchains; `doctor` names the same one.

The archs wanted are the kernels' rocm-archs (or -D BUILD2CMAKE_ROCM_ARCHS). The host's ROCm
builds when its compiler lists every one of them. Otherwise an installed toolchain builds when
it compiles every wanted arch the host compiles and more of them (the most; the newest ROCm on
a tie): switching then loses nothing. When each compiles archs the other cannot (the host's
ROCm 5.2 has gfx940, which clang 21 and 22 dropped; the toolchains have gfx942), the host builds
as before and one line says which toolchain compiles the rest and how to ask for it.
$BUILD2CMAKE_TOOLCHAIN chooses: `host`, or a toolchain's name (`rocm-7.2`).

A build in a toolchain is the Hub variant of this torch's release and the toolchain's ROCm
(torch2.13-rocm72 under torch 2.13), built by `build --variants` inside the toolchain (see
variant_builds.build_in_toolchain): the folder is the one a build on the host would make with
that ROCm, its torch comes from PyTorch's ROCm index, or a torch of the same release stands in.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TextIO

from build2cmake.builds import builder, variant_builds, variant_folders
from build2cmake.builds.variant import installed_torch_backend, query_torch
from build2cmake.builds.variant_env import PackageSources
from build2cmake.config.hub_variants import HubVariant
from build2cmake.config.model import Project
from build2cmake.ground.errors import Build2CMakeError, printable
from build2cmake.ground.safefs import RECORD_LIMIT_BYTES, ProjectFolder
from build2cmake.toolchains import probe, store
from build2cmake.toolchains.rocm_installs import RocmInstall

CHOICE_VARIABLE = "BUILD2CMAKE_TOOLCHAIN"


def wanted_archs(project: Project, defines: Sequence[str] = ()) -> list[str]:
    """The ROCm archs a build compiles for: -D BUILD2CMAKE_ROCM_ARCHS when given, else every
    rocm kernel's rocm-archs (target features such as :xnack- left out)."""
    for define in defines:
        name, _, value = define.partition("=")
        if name.split(":")[0] == "BUILD2CMAKE_ROCM_ARCHS":
            return sorted({a.split(":")[0] for a in value.replace(",", ";").split(";") if a})
    return sorted({a.split(":")[0] for k in project.kernels_for("rocm") for a in k.rocm_archs})


@dataclass(frozen=True)
class Ranking:
    """Which of the host and the toolchains compiles which wanted arch, and the one to use."""

    wanted: tuple[str, ...]
    host: probe.Capability
    toolchains: tuple[probe.Capability, ...]
    chosen: probe.Capability | None  # a toolchain that builds instead of the host; None: host
    # A toolchain that compiles wanted archs the host cannot, but not all the host compiles.
    partial: probe.Capability | None

    def builds(self, capability: probe.Capability) -> list[str]:
        """The wanted archs `capability` compiles."""
        if not capability.compiler:
            return []
        return [a for a in self.wanted if capability.compiles(a)]

    def builders_of(self, arch: str) -> list[probe.Capability]:
        """Every install (host first) that compiles `arch`."""
        return [c for c in (self.host, *self.toolchains) if c.compiler and c.compiles(arch)]


def rank(
    wanted: Sequence[str],
    host: probe.Capability,
    toolchains: Sequence[probe.Capability],
    *,
    release: tuple[int, int] | None = None,
) -> Ranking:
    """The install that builds `wanted` (see the module's rule); with `release`, only a
    toolchain of that ROCm release may (a ROCm build of torch names its variant after it)."""
    ranking = Ranking(tuple(wanted), host, tuple(toolchains), None, None)
    on_host = set(ranking.builds(host))
    if on_host == set(wanted):
        return ranking
    better: list[probe.Capability] = []
    partial: list[probe.Capability] = []
    for capability in toolchains:
        if capability.problem or (release is not None and capability.release != release):
            continue
        there = set(ranking.builds(capability))
        if there > on_host:
            better.append(capability)
        elif there - on_host:
            partial.append(capability)

    def order(c: probe.Capability) -> tuple[int, tuple[int, int]]:
        return len(ranking.builds(c)), c.release or (0, 0)

    return Ranking(
        tuple(wanted),
        host,
        tuple(toolchains),
        max(better, key=order) if better else None,
        max(partial, key=order) if partial else None,
    )


def choices_hint(toolchains: Sequence[store.Toolchain]) -> str:
    """How to choose: `BUILD2CMAKE_TOOLCHAIN=host|rocm-6.4|rocm-7.2`."""
    return f"{CHOICE_VARIABLE}={'|'.join(['host', *(t.name for t in toolchains)])}"


def _is_rocm_build(
    project: Project, backend: str | None, extension_for: Mapping[str, str], python: str
) -> bool:
    """Whether this build compiles the rocm backend, as compile_variant would decide."""
    if "rocm" not in extension_for or project.universal or project.framework == "tvm-ffi":
        return False
    if backend is not None:
        return backend == "rocm"
    torch_backend = installed_torch_backend(python)
    if torch_backend in extension_for:
        return torch_backend == "rocm"
    try:
        return builder.auto_backend(list(extension_for), torch_backend, log=io.StringIO()) == "rocm"
    except Build2CMakeError:
        # No GPU compiler here for it to choose: rocm is the one a toolchain can build, when it
        # is the only GPU backend declared.
        return "cuda" not in extension_for


def build_in_toolchain(
    project: Project,
    project_dir: Path,
    *,
    backend: str | None,
    extension_for: dict[str, str],
    defines: Sequence[str] = (),
    jobs: int | None = None,
    force: bool = False,
    allow_toolkit_mismatch: bool = False,
    python: str = sys.executable,
    env: Mapping[str, str] | None = None,
    out: TextIO | None = None,
    root: Path | None = None,
    host: Callable[[], probe.Capability] = probe.host,
) -> variant_folders.BuildReport | None:
    """`build` in a toolchain when the rule above (or $BUILD2CMAKE_TOOLCHAIN) says so: the
    build's report; None when the host builds (nothing is done then)."""
    env = os.environ if env is None else env
    out = out or sys.stdout
    asked = (env.get(CHOICE_VARIABLE) or "").strip()
    automatic = not asked or asked == "auto"
    installed = store.installed(root)
    wanted = wanted_archs(project, defines)
    if asked == "host" or (automatic and (not installed or not wanted)):
        return None  # nothing to choose from, or nothing the host could lack
    if not _is_rocm_build(project, backend, extension_for, python):
        return None
    here = host() if automatic else None
    if here is not None and all(here.compiles(a) for a in wanted) and here.compiler:
        return None  # the host compiles every arch: the common case costs one probe
    torch = query_torch(python)
    if here is None:
        toolchain = store.find(asked, root)
        said = f"building in toolchain {toolchain.name} ({CHOICE_VARIABLE}={asked})"
    else:
        release = _release(torch.backend_version) if torch.backend == "rocm" else None
        ranking = rank(wanted, here, probe.toolchains(installed), release=release)
        missing = [a for a in wanted if a not in ranking.builds(here)]
        host_words = (
            f"the host's ROCm {here.version} ({here.compiler_version})"
            if here.compiler
            else "the host (no ROCm found)"
        )
        if ranking.chosen is None:
            if ranking.partial is not None:
                other = ranking.partial
                lost = [a for a in ranking.builds(here) if a not in ranking.builds(other)]
                _say(
                    out,
                    f"build2cmake: {host_words} cannot compile {', '.join(missing)}; toolchain "
                    f"{other.label} can, but not {', '.join(lost)}, which the host can: building "
                    f"here; {CHOICE_VARIABLE}={other.label} builds there instead",
                )
            return None
        assert ranking.chosen.toolchain is not None
        toolchain = ranking.chosen.toolchain
        said = (
            f"building in toolchain {toolchain.name} (ROCm {toolchain.version}, "
            f"{ranking.chosen.compiler_version}): {host_words} cannot compile "
            f"{', '.join(missing)}; {choices_hint(installed)} chooses"
        )
    if torch.backend == "rocm" and _release(torch.backend_version) != toolchain.release:
        raise Build2CMakeError(
            f"torch is a ROCm {torch.backend_version} build, whose variant a ROCm of that "
            f"release builds; toolchain {toolchain.name} holds ROCm {toolchain.version} "
            f"({CHOICE_VARIABLE}=host builds with the host's)"
        )
    major, minor = (int(p) for p in torch.version.split(".")[:2])
    variant = HubVariant((major, minor), "rocm", toolchain.release)
    _say(
        out,
        f"build2cmake: {said}; the build is {variant.spec} there "
        f"(log: {project_dir / 'build' / f'cmake-{variant.spec}.log'})",
    )
    install = RocmInstall(
        Path("/usr"),
        toolchain.version,
        f"build2cmake toolchain {toolchain.name}",
        chroot=toolchain.folder,
        suite=toolchain.suite,
        toolchain=toolchain.name,
    )
    variant_builds.build_in_toolchain(
        project_dir,
        variant,
        install,
        sources=PackageSources(),
        jobs=variant_builds.split_jobs(jobs, 1),
        defines=defines,
        force=force,
        allow_toolkit_mismatch=allow_toolkit_mismatch,
        ops_id=extension_for["rocm"].removeprefix(f"_{project.package_name}_rocm_"),
    )
    folder = variant.folder()
    with ProjectFolder(project_dir) as project_folder:
        raw = project_folder.read(
            PurePosixPath("build") / folder / "metadata.json", RECORD_LIMIT_BYTES, "metadata.json"
        )
    try:
        metadata = json.loads(raw or b"{}")
    except (ValueError, RecursionError):
        metadata = {}
    return variant_folders.BuildReport(
        variant=folder,
        path=project_dir / "build" / folder,
        metadata=metadata if isinstance(metadata, dict) else {},
    )


def build(
    project: Project,
    project_dir: Path,
    *,
    backend: str | None,
    extension_for: dict[str, str],
    defines: Sequence[str] = (),
    jobs: int | None = None,
    force: bool = False,
    allow_toolkit_mismatch: bool = False,
) -> variant_folders.BuildReport:
    """Compile (unless universal) and write build/<variant>/ with its metadata.json; a ROCm
    build the host's ROCm cannot do may run in one of build2cmake's toolchains instead."""
    variant_folders.check_python_package(project, project_dir)
    elsewhere = build_in_toolchain(
        project,
        project_dir,
        backend=backend,
        extension_for=extension_for,
        defines=defines,
        jobs=jobs,
        force=force,
        allow_toolkit_mismatch=allow_toolkit_mismatch,
    )
    if elsewhere is not None:
        return elsewhere
    compiled = builder.compile_variant(
        project,
        project_dir,
        backend=backend,
        extension_for=extension_for,
        defines=defines,
        jobs=jobs,
        allow_toolkit_mismatch=allow_toolkit_mismatch,
    )
    return variant_folders.install_variant(project, project_dir, compiled, force=force)


def _release(version: str | None) -> tuple[int, int] | None:
    parts = (version or "").split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1])


def _say(out: TextIO, line: str) -> None:
    print(printable(line), file=out, flush=True)
