"""`build2cmake doctor`: what this machine can build, and the command that fixes each gap.

ROCm is found by running the build's own discovery module (build2cmake_find_rocm.cmake, with
cmake -P); the CUDA search mirrors build2cmake_cuda.cmake. What doctor finds is what a build uses.
The machine's other ROCm trees and build2cmake's toolchains are listed beside it, each asked the
same way (toolchains.probe), and the install that compiles each declared arch is named by the
rule `build2cmake build` follows (builds.choice).
"""

from __future__ import annotations

import io
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from build2cmake import __version__
from build2cmake.builds import choice
from build2cmake.builds.builder import auto_backend
from build2cmake.builds.variant import TorchInfo, arch_variant, query_torch
from build2cmake.config import load_project
from build2cmake.config.model import Project
from build2cmake.ground.errors import Build2CMakeError, printable
from build2cmake.toolchains import probe, rocm_discovery, rocm_installs, store
from build2cmake.toolchains.programs import cmake_program
from build2cmake.toolchains.recipes import RECIPES
from build2cmake.toolchains.rocm_discovery import RocmInstall, RocmLibrary, incomplete_library

DEBIAN_ROCM_PACKAGES = "hipcc libamdhip64-dev rocm-device-libs libamd-comgr-dev libhsa-runtime-dev"


@dataclass(frozen=True)
class Compiler:
    """A GPU compiler found here: where, which version, and the targets it can generate."""

    path: str
    version: str
    targets: tuple[str, ...]  # gfx90a, ... or sm_90, ...
    origin: str  # how it was found


@dataclass
class Report:
    """doctor's findings: the text to print and whether build.toml's needs are all met."""

    lines: list[str] = field(default_factory=list)
    problems: int = 0

    @property
    def ok(self) -> bool:
        return self.problems == 0

    @property
    def text(self) -> str:
        """The report, each entry of `lines` one line (escaped: it may hold paths and names)."""
        return "\n".join(printable(line) for line in self.lines)

    def problem(self, what: str, fix: str) -> None:
        self.problems += 1
        self.lines.append(f"  PROBLEM {what}")
        self.lines.append(f"      fix: {fix}")

    def warning(self, what: str, fix: str) -> None:
        """Something that may stop a build, depending on the sources; not counted as a problem."""
        self.lines.append(f"  WARNING {what}")
        self.lines.append(f"      fix: {fix}")


def _output(command: list[str]) -> str:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return result.stdout + result.stderr


def find_rocm() -> tuple[RocmInstall | None, str]:
    """Run the build's own ROCm discovery (cmake -P build2cmake_find_rocm.cmake).

    Returns the installation found (or None) and the roots that were searched, so that doctor
    and the build cannot disagree about where ROCm is.
    """
    try:
        cmake = cmake_program()
    except Build2CMakeError:
        return None, "nothing: cmake is not installed (python -m pip install cmake)"
    return rocm_discovery.find_rocm(cmake)


def find_hip_compiler() -> Compiler | None:
    """The HIP compiler the generated CMake would use (it runs the same discovery), or None."""
    rocm, _ = find_rocm()
    return None if rocm is None else _rocm_compiler(rocm)


def _rocm_compiler(rocm: RocmInstall) -> Compiler:
    version = f"ROCm {rocm.version} " if rocm.version else "ROCm "
    return _hip_compiler(rocm.compiler, f"{version}at {rocm.root}, {rocm.layout_detail}")


def _hip_compiler(path: str, origin: str) -> Compiler:
    version, targets = rocm_discovery.compiler_targets(path)
    return Compiler(path, version, targets, origin)


def find_nvcc() -> Compiler | None:
    """nvcc as the generated CMake finds it: $CUDA_HOME, $CUDA_PATH, PATH, /usr/local/cuda."""
    candidates = [
        (Path(os.environ[var], "bin", "nvcc"), f"${var}")
        for var in ("CUDA_HOME", "CUDA_PATH")
        if os.environ.get(var)
    ]
    on_path = shutil.which("nvcc")
    if on_path:
        candidates.append((Path(on_path), "PATH"))
    candidates.append((Path("/usr/local/cuda/bin/nvcc"), "/usr/local/cuda"))
    for path, origin in candidates:
        if path.is_file():
            version = re.search(r"release ([0-9]+\.[0-9]+)", _output([str(path), "--version"]))
            codes = _output([str(path), "--list-gpu-code"])
            targets = tuple(sorted(set(re.findall(r"sm_[0-9]+[af]?", codes)), key=_sm_key))
            return Compiler(str(path), version.group(1) if version else "unknown", targets, origin)
    return None


def _sm_key(code: str) -> tuple[int, str]:
    digits = re.sub(r"\D", "", code)
    return int(digits or 0), code


def _torch_section(report: Report) -> TorchInfo | None:
    try:
        torch = query_torch()
    except Build2CMakeError as error:
        report.lines.append("torch:   not importable")
        report.problem(str(error), "python -m pip install torch")
        return None
    gpu = f" {torch.backend_version}" if torch.backend_version else ""
    report.lines.append(
        f"torch:   {torch.version} ({torch.backend}{gpu} build, "
        f"{'cxx11' if torch.cxx11_abi else 'pre-cxx11'} ABI)"
    )
    if torch.backend == "cpu" or torch.backend_version:
        variant = arch_variant(torch.version, torch.cxx11_abi, torch.backend, torch.backend_version)
        report.lines.append(f"         kernels loads build/{variant}/ for it")
    return torch


def _compiler_lines(label: str, compiler: Compiler | None, missing: str) -> list[str]:
    if compiler is None:
        return [f"{label} not found ({missing})"]
    shown = ", ".join(compiler.targets) if compiler.targets else "none listed"
    return [
        f"{label} {compiler.path} ({compiler.version}; {compiler.origin})",
        f"         targets: {shown}",
    ]


def diagnose(build_toml: Path | None) -> Report:
    """Everything doctor prints, for build_toml or (None) just for this machine."""
    report = Report()
    report.lines.append(f"build2cmake {__version__} on {platform.system()} {platform.machine()}")
    torch = _torch_section(report)
    rocm, searched = find_rocm()
    hip = None if rocm is None else _rocm_compiler(rocm)
    nvcc = find_nvcc()
    report.lines += _compiler_lines("HIP:    ", hip, f"searched {searched}")
    if rocm is not None:
        report.lines.append(f"         libraries: {_libraries_summary(rocm.libraries)}")
    report.lines += _compiler_lines(
        "CUDA:   ", nvcc, "searched $CUDA_HOME, $CUDA_PATH, PATH, /usr/local/cuda"
    )
    project = load_project(build_toml) if build_toml is not None else None
    host = _host_capability(rocm, hip)
    installs = _other_rocm_section(report, rocm)
    toolchains = _toolchain_section(report)
    if build_toml is None or project is None:
        return report
    report.lines.append(
        f"{build_toml}: {project.name}, backends {', '.join(project.backends) or '-'}"
    )
    if project.universal:
        report.lines.append("  universal (pure Python): nothing to compile")
        return report
    for backend in project.backends:
        kernels = project.kernels_for(backend)
        if backend == "rocm":
            builder = _check_rocm(report, build_toml, project, hip, host, [*installs, *toolchains])
            if builder is not None:
                _list_toolchain_libraries(report, builder)
            elif rocm is not None:
                _check_rocthrust(report, project, rocm)
                _list_rocm_libraries(report, rocm)
        elif backend == "cuda":
            _check_cuda(report, build_toml, project, nvcc)
        elif backend == "cpu":
            report.lines.append(
                f"  cpu: {len(kernels)} kernel(s); the host C++ compiler builds them"
            )
        else:
            report.lines.append(
                f"  {backend}: not built by build2cmake (it builds cpu, cuda, rocm)"
            )
    if torch is not None and torch.backend not in project.backends:
        # What pip and `build` would do: the build's own rule (build2cmake_backend.cmake).
        try:
            chosen = auto_backend(
                list(project.buildable_backends), torch.backend, log=io.StringIO()
            )
            then = f"pip and build2cmake build choose {chosen}, the one with a compiler here"
        except Build2CMakeError:
            then = "choose one with --backend (pip: -C cmake.define.BUILD2CMAKE_BACKEND=<backend>)"
        report.lines.append(
            f"  note: the installed torch is a {torch.backend} build, which this kernel does not "
            f"declare; {then}"
        )
    report.lines.append("no problems found" if report.ok else f"{report.problems} problem(s)")
    return report


def _libraries_summary(libraries: tuple[RocmLibrary, ...]) -> str:
    """One line: the ROCm libraries found, those found incomplete, those missing."""
    found = [lib.name for lib in libraries if lib.path and not lib.incomplete]
    incomplete = [lib.name for lib in libraries if lib.path and lib.incomplete]
    missing = [lib.name for lib in libraries if not lib.path]
    parts = [", ".join(found) or "none"]
    if incomplete:
        parts.append(f"incomplete: {', '.join(incomplete)}")
    if missing:
        parts.append(f"missing: {', '.join(missing)}")
    return "; ".join(parts)


def _host_capability(rocm: RocmInstall | None, hip: Compiler | None) -> probe.Capability:
    """The HIP compiler a build here uses, as the toolchain rule compares it."""
    if rocm is None or hip is None:
        return probe.Capability("host", "", "", problem="no HIP compiler")
    return probe.Capability(
        label="host",
        where=f"{rocm.root} ({rocm.layout_detail})",
        version=rocm.version,
        compiler=hip.path,
        compiler_version=hip.version,
        targets=hip.targets,
        libraries=rocm.libraries,
    )


def _other_rocm_section(report: Report, rocm: RocmInstall | None) -> list[probe.Capability]:
    """The machine's ROCm trees other than the one a build uses (-D BUILD2CMAKE_ROCM_PATH
    builds with one): each with its compiler's targets and its libraries."""
    used = Path(rocm.root).resolve() if rocm is not None else None
    others = [
        i for i in rocm_installs.discover()
        if i.chroot is None and i.root.resolve() != used
    ]  # fmt: skip
    found = []
    for install in others:
        capability = probe.host(str(install.root))
        if not capability.compiler:
            continue
        found.append(capability)
        report.lines.append(
            f"ROCm:    {install.root} (ROCm {capability.version}, {capability.compiler_version}; "
            f"{install.found_in}; build with -D BUILD2CMAKE_ROCM_PATH={install.root})"
        )
        report.lines.append(f"         targets: {', '.join(capability.targets) or 'none listed'}")
        report.lines.append(f"         libraries: {_libraries_summary(capability.libraries)}")
    return found


def _toolchain_section(report: Report) -> list[probe.Capability]:
    """build2cmake's toolchains beside the host's ROCm: installed ones with their compiler's
    targets and their libraries, the others with the command that installs them."""
    root = store.default_root()
    installed = store.installed(root)
    if not installed:
        report.lines.append(
            f"toolchains: none installed in {root} (build2cmake toolchain install "
            f"{RECIPES[-1].name} makes one; build2cmake toolchain list shows them all)"
        )
        return []
    capabilities = probe.toolchains(installed)
    report.lines.append(f"toolchains ({root}; build2cmake toolchain list):")
    for capability in capabilities:
        toolchain = capability.toolchain
        assert toolchain is not None
        if capability.problem:
            report.lines.append(f"  {toolchain.name:<9} {toolchain.folder}: {capability.problem}")
            continue
        report.lines.append(
            f"  {toolchain.name:<9} ROCm {toolchain.version} ({capability.compiler_version}) in "
            f"{toolchain.folder}"
        )
        report.lines.append(f"            targets: {', '.join(capability.targets)}")
        report.lines.append(f"            libraries: {_libraries_summary(capability.libraries)}")
    names = {t.name for t in installed}
    for recipe in RECIPES:
        if recipe.name not in names:
            report.lines.append(
                f"  {recipe.name:<9} not installed: build2cmake toolchain install {recipe.name} "
                f"({recipe.summary})"
            )
    return capabilities


def _check_rocm(
    report: Report,
    build_toml: Path,
    project: Project,
    hip: Compiler | None,
    host: probe.Capability,
    others: list[probe.Capability],
) -> store.Toolchain | None:
    """The rocm backend's archs: who compiles each, what a build uses, what is missing and the
    fix. Returns the toolchain `build2cmake build` would compile in (None: the host)."""
    wanted = sorted({a.split(":")[0] for k in project.kernels_for("rocm") for a in k.rocm_archs})
    toolchains = [c for c in others if c.toolchain is not None]
    ranking = choice.rank(wanted, host, toolchains)
    chosen = ranking.chosen.toolchain if ranking.chosen is not None else None
    # What $BUILD2CMAKE_TOOLCHAIN asks for is what `build` uses: the host, or that toolchain.
    asked = (os.environ.get(choice.CHOICE_VARIABLE) or "").strip()
    if asked == "host":
        chosen = None
    elif asked and asked != "auto":
        chosen = next((c.toolchain for c in toolchains if c.label == asked), chosen)
    installable = [r.name for r in RECIPES if r.name not in {c.label for c in toolchains}]
    install = f"build2cmake toolchain install {installable[-1]}" if installable else ""
    if hip is None:
        report.lines.append(f"  rocm: archs {', '.join(wanted)}")
        _who_compiles(report, ranking, others, chosen)
        if chosen is None:
            report.problem(
                "no HIP compiler: the rocm backend cannot be built here",
                f"apt-get install {DEBIAN_ROCM_PACKAGES}  (Debian/Ubuntu), or install ROCm and "
                "export ROCM_PATH=/path/to/rocm" + (f"; or {install}" if install else ""),
            )
        for arch in wanted:
            if chosen is not None and not ranking.builders_of(arch):
                report.problem(f"{arch}: no ROCm here compiles it", install or "-")
        return chosen
    buildable = [a for a in wanted if a in hip.targets] if hip.targets else wanted
    missing = [a for a in wanted if a not in buildable]
    report.lines.append(
        f"  rocm: archs {', '.join(wanted)}; buildable here: {', '.join(buildable) or 'none'}"
    )
    _who_compiles(report, ranking, others, chosen)
    for arch in missing:
        keep = ";".join(buildable)
        elsewhere = [c.label for c in ranking.builders_of(arch) if c.toolchain is not None]
        if chosen is not None and chosen.name in elsewhere:
            continue
        if elsewhere:
            other = ranking.partial or next(c for c in toolchains if c.label == elsewhere[-1])
            partial = other.label
            lost = [a for a in buildable if not other.compiles(a)]
            if not lost:  # the user kept the build on the host ($BUILD2CMAKE_TOOLCHAIN=host)
                report.warning(
                    f"{arch}: {hip.version} at {hip.path} cannot compile it; toolchain "
                    f"{', '.join(elsewhere)} can, but {choice.CHOICE_VARIABLE}={asked} keeps "
                    "build2cmake build on the host, which leaves it out",
                    f"{choice.CHOICE_VARIABLE}={partial} build2cmake build {build_toml}  (or "
                    f"unset {choice.CHOICE_VARIABLE})",
                )
                continue
            report.warning(
                f"{arch}: {hip.version} at {hip.path} cannot compile it; toolchain "
                f"{', '.join(elsewhere)} can, but not {', '.join(lost)}, so build2cmake build "
                "compiles on the host and leaves it out",
                f"{choice.CHOICE_VARIABLE}={partial} build2cmake build {build_toml}  (then "
                f"{', '.join(lost)} is left out instead)",
            )
            continue
        report.problem(
            f"{arch}: {hip.version} at {hip.path} cannot compile it (not in its target list)",
            f"install a ROCm whose compiler lists {arch} and export ROCM_PATH=/path/to/rocm"
            + (f" ({install} is one)" if install else "")
            + f"; or leave it out: build2cmake build {build_toml} --backend rocm "
            f"-D BUILD2CMAKE_ROCM_ARCHS='{keep}'  (pip: -C "
            f"cmake.define.BUILD2CMAKE_ROCM_ARCHS='{keep}')",
        )
    return chosen


def _who_compiles(
    report: Report,
    ranking: choice.Ranking,
    others: list[probe.Capability],
    chosen: store.Toolchain | None,
) -> None:
    """One line per declared arch naming every install that compiles it, then which one
    `build2cmake build` uses; only when there is more than the host to choose from."""
    if not others:
        return
    for arch in ranking.wanted:
        names = [c.label for c in ranking.builders_of(arch)]
        names += [c.where for c in others if c.toolchain is None and c.compiles(arch)]
        report.lines.append(f"    {arch:<8} compiled by: {', '.join(names) or 'nothing here'}")
    installed = [c.toolchain for c in others if c.toolchain is not None]
    if chosen is not None:
        report.lines.append(
            f"    build2cmake build compiles in toolchain {chosen.name} (ROCm {chosen.version}); "
            f"{choice.choices_hint(installed)} chooses"
        )
    elif installed:
        report.lines.append(
            f"    build2cmake build compiles on the host; {choice.choices_hint(installed)} chooses"
        )


def _list_toolchain_libraries(report: Report, toolchain: store.Toolchain) -> None:
    """The ROCm libraries of the toolchain a build compiles in: found, or what to do. The
    user's include folders reach builds there (CPATH, BUILD2CMAKE_INCLUDE_DIRS), so they count."""
    capability = probe.of_toolchain(toolchain)
    report.lines.append(f"  rocm libraries of toolchain {toolchain.name}:")
    width = max((len(lib.name) for lib in capability.libraries), default=0)
    name_a_folder = (
        "name a folder holding its complete headers: BUILD2CMAKE_INCLUDE_DIRS=/path/to/include "
        "(or CPATH; mounted read-only into the toolchain)"
    )
    for lib in capability.libraries:
        if lib.path and lib.incomplete:
            report.lines.append(
                f'    {lib.name:<{width}}  incomplete: {lib.path} includes "{lib.incomplete}", '
                f"which is not there; {name_a_folder}"
            )
        elif lib.path:
            report.lines.append(f"    {lib.name:<{width}}  found: {lib.path}")
        else:
            report.lines.append(f"    {lib.name:<{width}}  missing <{lib.header}>: {name_a_folder}")


def _check_rocthrust(report: Report, project: Project, rocm: RocmInstall) -> None:
    """Warn, as configure does, when HIP code sees torch's headers and rocThrust is missing."""
    kernels = [
        k.name
        for k in project.kernels_for("rocm")
        if "torch" in k.depends and any(s.suffix in (".cu", ".hip") for s in k.sources)
    ]
    if not kernels or rocm.thrust:
        return
    report.warning(
        f"{', '.join(kernels)}: HIP sources compiled with torch's headers (depends on torch), "
        "and torch's util/complex.h includes <thrust/complex.h> under a HIP compiler, but "
        f"{rocm.root}/include/thrust/complex.h (rocThrust) is not installed; a HIP source that "
        "includes torch's tensor headers fails with \"'thrust/complex.h' file not found\"",
        rocm.thrust_hint or "install rocThrust",
    )


def _list_rocm_libraries(report: Report, rocm: RocmInstall) -> None:
    """The ROCm libraries kernels include (kernel-builder's ROCm build environment has them all):
    where each was found, or how to install it. A missing one is a problem only for a kernel
    that includes it, which configure names (with the file that includes it)."""
    where = rocm.library_dirs.replace(":", ", ") or f"{rocm.root}/include"
    report.lines.append(f"  rocm libraries (looked in {where}):")
    width = max((len(lib.name) for lib in rocm.libraries), default=0)
    for lib in rocm.libraries:
        if lib.path and lib.incomplete:
            report.lines.append(f"    {lib.name:<{width}}  {incomplete_library(lib)}")
        elif lib.path:
            report.lines.append(f"    {lib.name:<{width}}  found: {lib.path}")
        else:
            report.lines.append(f"    {lib.name:<{width}}  missing <{lib.header}>: {lib.install}")


def _check_cuda(report: Report, build_toml: Path, project: Project, nvcc: Compiler | None) -> None:
    kernels = project.kernels_for("cuda")
    wanted = sorted(
        {c for k in kernels for c in k.cuda_capabilities},
        key=lambda c: float(c.rstrip("af+PTX") or 0),
    )
    shown = ", ".join(wanted) or "default (the GPUs torch sees, else a list nvcc supports)"
    if nvcc is None:
        report.lines.append(f"  cuda: capabilities {shown}")
        report.problem(
            "no nvcc: the cuda backend cannot be built here",
            "install the CUDA toolkit and export CUDA_HOME=/path/to/cuda",
        )
        return
    unsupported = []
    for capability in wanted:
        match = re.match(r"^([0-9]+)\.([0-9])", capability)
        if match and nvcc.targets and f"sm_{match.group(1)}{match.group(2)}" not in nvcc.targets:
            unsupported.append(capability)
    report.lines.append(
        f"  cuda: capabilities {shown}; nvcc {nvcc.version} builds "
        f"{', '.join(c for c in wanted if c not in unsupported) or 'none of them'}"
    )
    for capability in unsupported:
        report.problem(
            f"{capability}: nvcc {nvcc.version} at {nvcc.path} cannot compile for it",
            "use a CUDA toolkit whose `nvcc --list-gpu-code` lists it (export CUDA_HOME=...), "
            f"or remove {capability} from cuda-capabilities in {build_toml}",
        )
    if any(d.startswith("cutlass") for k in kernels for d in k.depends):
        if _cutlass_headers() is None:
            report.problem(
                "a cuda kernel depends on CUTLASS, whose headers come from the nvidia-cutlass "
                "package, which is not installed",
                "python -m pip install --no-deps nvidia-cutlass",
            )
        else:
            report.lines.append(f"  cutlass headers: {_cutlass_headers()}")


def _cutlass_headers() -> str | None:
    import importlib.util

    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or spec.origin is None:
        return None
    include = Path(spec.origin).parent / "source" / "include"
    return str(include) if (include / "cutlass" / "cutlass.h").is_file() else None
