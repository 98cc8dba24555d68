"""`build2cmake build`: compile a kernel and lay it out as build/<variant>/ for `kernels`.

The layout is what the Hugging Face `kernels` loader reads (get_local_kernel, Hub repos):

    build/<variant>/__init__.py, _ops.py, ... the package's Python files
    build/<variant>/_<name>_<backend>_<ops id>.abi3.so   (compiled kernels only)
    build/<variant>/metadata.json

The compiled part is the same CMake project pip builds (generate-torch writes it), configured in
its own folder build/cmake-variant-<backend> so that it never disturbs the editable install's.
Here the compile and metadata.json; laying the variant out and the record of the folders `build`
made are variant_folders.py's.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import TextIO

from build2cmake.builds import dist_jobs
from build2cmake.builds import provenance as build_provenance
from build2cmake.builds.variant import (
    UNIVERSAL_VARIANT,
    arch_variant,
    installed_torch_backend,
    installed_torch_toolkit,
    toolkit_for_variant,
    tvm_ffi_default_backend,
    tvm_ffi_variant,
)
from build2cmake.builds.variant_folders import CompiledVariant, remove_any
from build2cmake.config import loader_rules
from build2cmake.config.model import KernelDependency, Project
from build2cmake.generate.project import BUILD_FOLDER_WRITERS
from build2cmake.generate.render import (
    backend_choice_module,
    rocm_discovery_module,
    schedule_script,
)
from build2cmake.ground import folder_marks
from build2cmake.ground.errors import Build2CMakeError, printable
from build2cmake.ground.interrupts import Interrupted
from build2cmake.ground.safefs import RECORD_LIMIT_BYTES, ProjectFolder, read_regular_file
from build2cmake.toolchains import offload
from build2cmake.toolchains.programs import cmake_program, ninja_program
from build2cmake.toolchains.rocm_discovery import NOT_FOUND, missing_library_hints

# kernels 0.17 reads these keys; `license` and `backend` are required by its metadata parser.
NO_LICENSE = "NOASSERTION"


def _run(
    command: Sequence[str],
    what: str,
    cwd: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    log: TextIO | None = None,
    not_found: list[str] | None = None,
) -> None:
    """Run a build step with its output on the terminal (or in `log`); a failure is one clear
    error. With `not_found`, the output passes through here, the headers its "'<header>'
    file not found" errors name are appended to it, and a failure names the first failing
    step's own first error (Ninja's `FAILED:` line, then the compiler's or launcher's words)."""
    print(printable("+ " + " ".join(command)), file=log or sys.stdout, flush=True)
    if not_found is None:
        result = subprocess.run(
            list(command),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdout=log,
            stderr=subprocess.STDOUT if log is not None else None,
            check=False,
        )
        returncode = result.returncode
    else:
        out = log or sys.stdout
        first_error = _FirstError()
        with subprocess.Popen(
            list(command),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        ) as process:
            assert process.stdout is not None
            for raw in process.stdout:
                line = raw.decode("utf-8", "replace")
                out.write(line)
                out.flush()
                match = NOT_FOUND.search(line)
                if match and len(not_found) < 100:
                    not_found.append(match.group(1))
                first_error.read(line)
        returncode = process.returncode
        if returncode != 0 and first_error.text:
            where = f"; see {log.name}" if log is not None else ""
            raise Build2CMakeError(
                f"{what} failed (exit {returncode}); the first failing step, "
                f"{first_error.step}: {first_error.text}{where}"
            )
    if returncode != 0:
        where = f"; see {log.name}" if log is not None else "; see its output above"
        raise Build2CMakeError(f"{what} failed (exit {returncode}){where}")


class _FirstError:
    """The first step Ninja reports as failed (`FAILED: <outputs>`) and the first line of its
    output that says error, as the compiler (or a launcher such as ccache) wrote it, or that a
    step of ours wrote (`build2cmake: ...`, e.g. the extension that would not load)."""

    _LOOK_LINES = 200
    _ERROR = re.compile(r"\berror\b", re.IGNORECASE)

    def __init__(self) -> None:
        self.step = ""
        self.text = ""
        self._looked = 0

    def read(self, line: str) -> None:
        """Take one line of the build's output."""
        if self.text or self._looked > self._LOOK_LINES:
            return
        if not self.step:
            if line.startswith("FAILED: "):
                self.step = line[len("FAILED: ") :].strip()[:200]
            return
        self._looked += 1
        ours = line.startswith("build2cmake: ")
        if (ours or self._ERROR.search(line)) and not line.startswith(("FAILED: ", "ninja: ")):
            self.text = line.strip()[:300]


def compile_project(
    project_dir: Path,
    backend: str,
    *,
    defines: Sequence[str] = (),
    jobs: int | None = None,
    python: str = sys.executable,
    build_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    log: TextIO | None = None,
    after_configure: Callable[[dict[str, object]], None] | None = None,
) -> tuple[Path, dict[str, object]]:
    """Configure, build and install the generated CMake project for `backend`.

    `python` is the interpreter whose torch is built against; `after_configure` sees CMake's
    build record before anything compiles (and may refuse). Returns the install folder (holding
    <package>/<extension>.so) and CMake's build record.
    """
    build_dir = build_dir or project_dir / "build" / f"cmake-variant-{backend}"
    install_dir = build_dir / "install"
    # CMake, Ninja and the compilers follow symlinks: a `build` or `build/cmake-variant-*` link
    # planted in the project, or one anywhere in that folder (CMakeFiles, our records), would
    # lead their writes elsewhere. The folder is made a real one and checked before they run.
    if build_dir.is_relative_to(project_dir):
        with ProjectFolder(project_dir) as folder:
            relative = build_dir.relative_to(project_dir).as_posix()
            # Whatever a folder we did not make holds (a CMake cache that runs code, objects
            # Ninja would link unrebuilt) must not reach CMake: see folder_marks. The claim makes
            # a missing folder itself, so a first build has nothing to report as removed.
            note = folder_marks.claim(folder, relative)
            if note is not None:
                print(printable(note), file=log or sys.stdout, flush=True)
            folder.check_real_tree(relative, BUILD_FOLDER_WRITERS)
    else:
        build_dir.mkdir(parents=True, exist_ok=True)  # a folder of the caller's choosing
        with ProjectFolder(build_dir) as folder:
            for name in folder.listdir():
                folder.check_real_tree(name, BUILD_FOLDER_WRITERS)
    # Distributed compiles (dist_jobs): where sccache's config names an sccache-dist scheduler,
    # the jobs default to the cluster's slots, not this machine's cores, and the Ninja pools
    # (sized from local memory) to the job count, as -D values recorded like the user's.
    distributed = dist_jobs.plan(defines, backend, jobs, env)
    if distributed is not None:
        print(printable(distributed.note), file=log or sys.stdout, flush=True)
        jobs = distributed.jobs or jobs
        defines = [*defines, *distributed.defines]
    configure = [
        cmake_program(),
        "-S",
        str(project_dir),
        "-B",
        str(build_dir),
        "-G",
        "Ninja",
        f"-DCMAKE_MAKE_PROGRAM={ninja_program()}",
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DPython_EXECUTABLE={python}",
        f"-DBUILD2CMAKE_BACKEND={backend}",
        f"-DCMAKE_INSTALL_PREFIX={install_dir}",
        # How CMake's messages should spell a setting for this command (pip's is
        # `-C cmake.define.NAME=...`, the templates' default).
        f"-D{DEFINE_HINT_VARIABLE}={BUILD_DEFINE_HINT}",
    ]
    configure += [f"-D{define}" for define in defines]
    configure += fresh_cache_arguments(build_dir, defines, log=log)
    _run(configure, "CMake configure", env=env, log=log)
    _record_defines(build_dir, defines)
    with ProjectFolder(build_dir) as folder:
        raw = folder.read(_BUILD_RECORD, RECORD_LIMIT_BYTES, "CMake's build record")
    if raw is None:
        raise Build2CMakeError(f"{build_dir / _BUILD_RECORD}: CMake configure did not write it")
    info = json.loads(raw.decode("utf-8"))
    if after_configure is not None:
        after_configure(info)
    build = [cmake_program(), "--build", str(build_dir)]
    if jobs:
        build += ["--parallel", str(jobs)]
    not_found: list[str] = []
    try:
        _run(build, "CMake build", env=env, log=log, not_found=not_found)
    except Interrupted:
        _record_finished_compiles(build_dir, backend)
        raise
    except Build2CMakeError:
        _record_finished_compiles(build_dir, backend)
        if backend == "rocm":
            # A missing header of a ROCm library kernels include (rocWMMA, hipBLASLt, ...): one
            # line naming the library and how to install it, as ROCm discovery knows it.
            for line in missing_library_hints(not_found, cmake_program(), env):
                print(printable(line), file=log or sys.stdout, flush=True)
        raise
    with ProjectFolder(build_dir) as folder:
        remove_any(folder, PurePosixPath(install_dir.name))
    _run([cmake_program(), "--install", str(build_dir)], "CMake install", env=env, log=log)
    return install_dir, info


COSTS_FILE_RECORD = "build2cmake-costs-file.txt"


def named_costs_file(build_dir: Path) -> Path | None:
    """The costs file configure chose for `build_dir` (its build2cmake-costs-file.txt), when
    that names one as configure writes it: an absolute path to `<name>-<backend>.tsv`, one line
    of printable characters. The build folder is the project's, so anything else is nothing."""
    try:
        raw = read_regular_file(build_dir / COSTS_FILE_RECORD, 4096, "the costs file record")
    except Build2CMakeError:
        return None  # none kept (BUILD2CMAKE_COSTS_DIR=OFF, another generator)
    text = raw.decode("utf-8", "replace").removesuffix("\n")
    costs = Path(text)
    if not (text.isprintable() and costs.is_absolute() and costs.name.endswith(".tsv")):
        return None
    return costs


def schedule_module() -> ModuleType | None:
    """The package's own copy of the schedule script (cmake/build2cmake_schedule.py), loaded."""
    try:
        spec = importlib.util.spec_from_file_location("build2cmake_schedule", schedule_script())
        if spec is None or spec.loader is None:
            return None
        schedule = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(schedule)
    except (OSError, ValueError, ImportError):
        return None
    return schedule


def _record_finished_compiles(build_dir: Path, backend: str) -> None:
    """After a build that stopped before its link (a failed source, a signal): the compile times
    of what finished go where a whole build's would, so that the next build, here or on a runner
    that restores the compiler cache, starts its longest sources first. In this process, with
    the package's own copy of the schedule script, and nothing started: after a signal, nothing
    new may run. Best effort and silent: it never changes the outcome."""
    costs = named_costs_file(build_dir)
    schedule = schedule_module()
    if costs is None or schedule is None or not costs.name.endswith(f"-{backend}.tsv"):
        return
    with contextlib.suppress(OSError, ValueError):
        schedule.record(str(costs), str(build_dir))


# The cache variable through which `build` tells the CMake templates how a user passes a
# setting to this command, so that their messages suggest `-DNAME=...` rather than pip's
# `-C cmake.define.NAME=...`: a message writes `${BUILD2CMAKE_DEFINE_HINT}NAME=value` (no space,
# as CMake's cache keeps no trailing blank; `build` takes -DNAME=VALUE as well as -D NAME=VALUE).
DEFINE_HINT_VARIABLE = "BUILD2CMAKE_DEFINE_HINT"
BUILD_DEFINE_HINT = "-D"
_DEFINES_RECORD = "build2cmake-defines.json"
# What the generated CMake records about the build (build2cmake_write_build_info).
_BUILD_RECORD = "build2cmake-build.json"


def fresh_cache_arguments(
    build_dir: Path, defines: Sequence[str], *, log: TextIO | None = None
) -> list[str]:
    """`["--fresh"]` when this build's -D values differ from the last build's in `build_dir`.

    A -D value stays in CMake's cache, so without this a value given to one `build` would
    silently apply to every later one. A fresh cache costs a re-run of CMake's compiler checks
    (a few seconds); objects whose commands are unchanged are not recompiled.
    """
    # Read without following symlinks: the folder is the project's, which may be hostile.
    with ProjectFolder(build_dir) as folder:
        try:
            raw = folder.read(_DEFINES_RECORD, RECORD_LIMIT_BYTES, "-D record")
            previous = json.loads(raw.decode("utf-8")) if raw is not None else None
        except (Build2CMakeError, ValueError, RecursionError):
            previous = None
        if previous is None:
            # No record: a first build (nothing cached), or a folder an older build2cmake
            # configured; start that one afresh too when it has a cache.
            return ["--fresh"] if folder.lstat("CMakeCache.txt") is not None else []
    if not isinstance(previous, list) or previous == list(defines):
        return [] if isinstance(previous, list) else ["--fresh"]
    dropped = [d for d in previous if d not in defines]
    note = f" (no longer given: {', '.join('-D ' + str(d) for d in dropped)})" if dropped else ""
    print(
        printable(
            f"build2cmake: the -D values differ from the last build's{note}; configuring with "
            "a fresh CMake cache, so that only the values given now apply"
        ),
        file=log or sys.stdout,
        flush=True,
    )
    return ["--fresh"]


def _record_defines(build_dir: Path, defines: Sequence[str]) -> None:
    # Written beside and renamed over the record: a symlink planted in its name is replaced,
    # never written through.
    with ProjectFolder(build_dir) as folder:
        folder.write_atomic(_DEFINES_RECORD, (json.dumps(list(defines)) + "\n").encode("utf-8"))


def kernel_dependency_record(dependency: KernelDependency) -> dict[str, object]:
    """One `kernel-depends` entry as kernels-data writes it (version or revision, not both)."""
    record: dict[str, object] = {"repo-id": dependency.repo_id}
    if dependency.version is not None:
        record["version"] = dependency.version
    if dependency.revision is not None:
        record["revision"] = dependency.revision
    return record


def metadata_for(
    project: Project,
    extension: str,
    backend: str,
    archs: Sequence[str],
    *,
    provenance: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The metadata.json `kernels` reads for one build variant (the `digest` is added when the
    variant's files are laid out, see install_variant).

    Keyword-only arguments add records that do not follow from build.toml (`provenance`:
    see build2cmake.builds.provenance); later ones belong after it, keyword-only too.
    """
    backend_info: dict[str, object] = {"type": backend}
    if archs:
        # In the form kernels' arch check compares (a [torch-noarch] rocm-archs entry may
        # carry target features, which would never match the device's arch).
        backend_info["archs"] = loader_rules.metadata_archs(backend, archs)
    metadata: dict[str, object] = {
        "id": extension,
        # kernels' names are lowercase letters, digits and dashes; it maps them back to the
        # Python package name (dashes to underscores).
        "name": project.name.lower().replace("_", "-"),
        "version": project.version if project.version is not None else 1,
        "license": project.license or NO_LICENSE,
        "python-depends": list(project.python_depends_for(backend)),
        "kernel-depends": [
            kernel_dependency_record(dependency)
            for dependency in project.kernel_depends_for(backend)
        ],
        "backend": backend_info,
    }
    if provenance is not None:
        metadata["provenance"] = dict(provenance)
    return metadata


def compiled_archs(backend: str, library: Path, cmake_archs: Sequence[str]) -> list[str]:
    """The GPU archs the library holds code for.

    ROCm: read from the library's offload bundles (the truth, whatever flags did). CUDA: the
    capabilities CMake compiled each kernel for (cuda-capabilities or the documented default).
    """
    if backend == "rocm":
        return sorted({target.split(":")[0] for target in offload.rocm_targets(library)})
    if backend == "cuda":
        return list(cmake_archs)
    return []


def noarch_variant(
    project: Project, backend: str | None, python: str = sys.executable
) -> tuple[str, str]:
    """The variant folder and backend of a kernel with nothing to compile.

    An older `universal = true` kernel is `torch-universal`, which `kernels` loads for any
    backend; a [torch-noarch] kernel is `torch-<backend>`: the one asked for, else the
    installed torch's when build.toml declares it, else the first declared.
    """
    if project.noarch is not None and project.noarch.universal:
        chosen = backend or (
            "cpu" if "cpu" in project.backends or not project.backends else project.backends[0]
        )
        return UNIVERSAL_VARIANT, chosen
    if backend is not None:
        if backend not in project.backends:
            raise Build2CMakeError(
                f"--backend {backend}: build.toml declares {', '.join(project.backends)}"
            )
        return f"torch-{backend}", backend
    installed = installed_torch_backend(python)
    chosen = installed if installed in project.backends else project.backends[0]
    return f"torch-{chosen}", chosen


def auto_backend(declared: Sequence[str], torch_backend: str, *, log: TextIO | None = None) -> str:
    """The backend to build for a torch that is a build for none of `declared`: the one declared
    GPU backend whose compiler is here, as the generated build itself chooses (the same CMake
    module, build2cmake_backend.cmake, run as a script). Zero or several: an error saying which
    compilers were found."""
    command = [
        cmake_program(),
        f"-DBUILD2CMAKE_DECLARED_BACKENDS={';'.join(declared)}",
        f"-DBUILD2CMAKE_TORCH_BACKEND={torch_backend}",
        f"-DBUILD2CMAKE_FIND_ROCM_MODULE={rocm_discovery_module()}",
        "-P",
        str(backend_choice_module()),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    said = dict(line.partition("=")[::2] for line in result.stderr.splitlines() if "=" in line)
    chosen = said.get("backend", "")
    if chosen in declared:
        print(printable(said.get("note", "")), file=log or sys.stdout, flush=True)
        return chosen
    raise Build2CMakeError(
        f"backend {torch_backend!r} (from the installed torch) is not one that build.toml "
        f"declares ({', '.join(declared)}), and not exactly one of its GPU backends has a "
        f"compiler here ({said.get('found', 'none found')}); pick one with --backend"
    )


class VariantMismatchError(Build2CMakeError):
    """The environment builds another variant than the one asked for."""


def compile_variant(
    project: Project,
    project_dir: Path,
    *,
    backend: str | None,
    extension_for: dict[str, str],
    defines: Sequence[str] = (),
    jobs: int | None = None,
    python: str = sys.executable,
    build_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    log: TextIO | None = None,
    allow_toolkit_mismatch: bool = False,
    expected_variant: str | None = None,
) -> CompiledVariant:
    """Compile (unless universal) against `python`'s torch; name the variant as kernels will
    look for it (after that torch's CUDA/ROCm release, see variant.toolkit_for_variant).

    With `expected_variant`, a configure that makes another variant stops before compiling.
    """
    if project.universal:
        variant, chosen = noarch_variant(project, backend, python)
        archs: list[str] = []
        if project.noarch is not None and chosen == "cuda":
            archs = list(project.noarch.cuda_capabilities)
        elif project.noarch is not None and chosen == "rocm":
            archs = list(project.noarch.rocm_archs)
        metadata = metadata_for(
            project,
            extension_for["universal"],
            chosen,
            archs,
            provenance=build_provenance.provenance(project_dir),
        )
        return CompiledVariant(variant, None, metadata)
    tvm_ffi = project.framework == "tvm-ffi"
    if backend is None and tvm_ffi:
        chosen = tvm_ffi_default_backend(project.buildable_backends)
    elif backend is None:
        chosen = installed_torch_backend(python)
        if chosen not in extension_for:
            chosen = auto_backend(list(extension_for), chosen, log=log)
    else:
        chosen = backend
    # A tvm-ffi build involves no torch: its variant is named after the compiler's toolkit.
    torch_toolkit = ("none", None) if tvm_ffi else installed_torch_toolkit(python)
    named: list[str | None] = []

    def variant_of(info: dict[str, object], version: str | None) -> str:
        if tvm_ffi:
            return tvm_ffi_variant(str(info["tvm_ffi_version"]), chosen, version)
        return arch_variant(
            str(info["torch_version"]),
            bool(info["torch_cxx11_abi"]),
            chosen,
            version,
            stable_abi=str(info.get("stable_abi") or "") or None,
        )

    def check_toolkit(info: dict[str, object]) -> None:
        compiler_version = str(info.get("backend_version") or "") or None
        if tvm_ffi:
            version, note = compiler_version, None
        else:
            version, note = toolkit_for_variant(
                chosen, compiler_version, torch_toolkit, allow_mismatch=allow_toolkit_mismatch
            )
        if note:
            print(printable(f"build2cmake: {note}"), file=log or sys.stdout, flush=True)
        named.append(version)
        if expected_variant is not None:
            made = variant_of(info, version)
            if made != expected_variant:
                raise VariantMismatchError(
                    f"the environment's torch and toolkit make {made}, not {expected_variant}"
                )

    install_dir, info = compile_project(
        project_dir,
        chosen,
        defines=defines,
        jobs=jobs,
        python=python,
        build_dir=build_dir,
        env=env,
        log=log,
        after_configure=check_toolkit,
    )
    extension = str(info["extension"])
    libraries = sorted((install_dir / project.package_name).glob(extension + "*.so"))
    if len(libraries) != 1:
        raise Build2CMakeError(f"{install_dir}: expected one {extension}*.so, found {libraries}")
    library = libraries[0]
    # torch's version and C++ ABI (or tvm-ffi's release) as CMake found them (no import of
    # torch: seconds of CPU that would compete with the compiler).
    variant = variant_of(info, named[0])
    cmake_archs = info.get("archs", [])
    assert isinstance(cmake_archs, list)
    archs = compiled_archs(chosen, library, [str(a) for a in cmake_archs])
    metadata = metadata_for(
        project, extension, chosen, archs, provenance=build_provenance.provenance(project_dir)
    )
    return CompiledVariant(variant, library, metadata)
