"""`build2cmake build`: compile a kernel and lay it out as build/<variant>/ for `kernels`.

The layout is what the Hugging Face `kernels` loader reads (get_local_kernel, Hub repos):

    build/<variant>/__init__.py, _ops.py, ... the package's Python files
    build/<variant>/_<name>_<backend>_<ops id>.abi3.so   (compiled kernels only)
    build/<variant>/metadata.json

The compiled part is the same CMake project pip builds (generate-torch writes it), configured in
its own folder build/cmake-variant-<backend> so that it never disturbs the editable install's.
Variant folders this command made are listed in build/.build2cmake-variants.json; it replaces
only those (and `clean` removes only those), never a variant folder built by something else.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from build2cmake import offload
from build2cmake.errors import Build2CMakeError, WriteRefusedError
from build2cmake.fileset import content_hash, locked
from build2cmake.model import Project
from build2cmake.variant import (
    UNIVERSAL_VARIANT,
    arch_variant,
    installed_torch_backend,
    installed_torch_toolkit,
    toolkit_for_variant,
)

VARIANTS_RECORD = "build/.build2cmake-variants.json"
# kernels 0.17 reads these keys; `license` and `backend` are required by its metadata parser.
NO_LICENSE = "NOASSERTION"


@dataclass(frozen=True)
class BuildReport:
    """Where `build` put the kernel and what it says about it."""

    variant: str
    path: Path
    metadata: dict[str, object]


def _tool(name: str) -> str:
    """`name` from its PyPI package (cmake and ninja are build2cmake dependencies), else PATH's."""
    with contextlib.suppress(ImportError, AttributeError):
        module = __import__(name)
        bin_dir = module.CMAKE_BIN_DIR if name == "cmake" else module.BIN_DIR
        candidate = Path(bin_dir) / name
        if candidate.is_file():
            return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise Build2CMakeError(f"no {name} found; install it: pip install {name}")
    return found


def cmake_program() -> str:
    """The cmake that builds: the `cmake` PyPI package's, else PATH's."""
    return _tool("cmake")


def ninja_program() -> str:
    """The ninja that builds: the `ninja` PyPI package's, else PATH's."""
    return _tool("ninja")


def read_record(project_dir: Path) -> dict[str, str]:
    """Variant folder name -> hash of the metadata.json build wrote there."""
    try:
        data = json.loads((project_dir / VARIANTS_RECORD).read_text("utf-8"))
        return {str(k): str(v) for k, v in data.items()}
    except (OSError, ValueError, AttributeError):
        return {}


def owned_variants(project_dir: Path) -> list[str]:
    """Variant folders under build/ that `build` made and nobody replaced since."""
    owned = []
    for name, recorded in sorted(read_record(project_dir).items()):
        metadata = project_dir / "build" / name / "metadata.json"
        with contextlib.suppress(OSError):
            if content_hash(metadata.read_bytes()) == recorded:
                owned.append(name)
    return owned


def _write_record(project_dir: Path, record: dict[str, str]) -> None:
    path = project_dir / VARIANTS_RECORD
    if not record:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(dict(sorted(record.items())), indent=2) + "\n", "utf-8")
    os.replace(tmp, path)


def _run(
    command: Sequence[str],
    what: str,
    cwd: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    log: TextIO | None = None,
) -> None:
    """Run a build step with its output on the terminal (or in `log`); a failure is one clear
    error."""
    print("+ " + " ".join(command), file=log or sys.stdout, flush=True)
    result = subprocess.run(
        list(command),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdout=log,
        stderr=subprocess.STDOUT if log is not None else None,
        check=False,
    )
    if result.returncode != 0:
        where = f"; see {log.name}" if log is not None else "; see its output above"
        raise Build2CMakeError(f"{what} failed (exit {result.returncode}){where}")


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
    info = json.loads((build_dir / "build2cmake-build.json").read_text("utf-8"))
    if after_configure is not None:
        after_configure(info)
    build = [cmake_program(), "--build", str(build_dir)]
    if jobs:
        build += ["--parallel", str(jobs)]
    _run(build, "CMake build", env=env, log=log)
    if install_dir.exists():
        shutil.rmtree(install_dir)
    _run([cmake_program(), "--install", str(build_dir)], "CMake install", env=env, log=log)
    return install_dir, info


# The cache variable through which `build` tells the CMake templates how a user passes a
# setting to this command, so that their messages suggest `-DNAME=...` rather than pip's
# `-C cmake.define.NAME=...`: a message writes `${BUILD2CMAKE_DEFINE_HINT}NAME=value` (no space,
# as CMake's cache keeps no trailing blank; `build` takes -DNAME=VALUE as well as -D NAME=VALUE).
DEFINE_HINT_VARIABLE = "BUILD2CMAKE_DEFINE_HINT"
BUILD_DEFINE_HINT = "-D"
_DEFINES_RECORD = "build2cmake-defines.json"


def fresh_cache_arguments(
    build_dir: Path, defines: Sequence[str], *, log: TextIO | None = None
) -> list[str]:
    """`["--fresh"]` when this build's -D values differ from the last build's in `build_dir`.

    A -D value stays in CMake's cache, so without this a value given to one `build` would
    silently apply to every later one. A fresh cache costs a re-run of CMake's compiler checks
    (a few seconds); objects whose commands are unchanged are not recompiled.
    """
    try:
        previous = json.loads((build_dir / _DEFINES_RECORD).read_text("utf-8"))
    except (OSError, ValueError):
        # No record: a first build (nothing cached), or a folder an older build2cmake
        # configured; start that one afresh too when it has a cache.
        return ["--fresh"] if (build_dir / "CMakeCache.txt").is_file() else []
    if not isinstance(previous, list) or previous == list(defines):
        return [] if isinstance(previous, list) else ["--fresh"]
    dropped = [d for d in previous if d not in defines]
    note = f" (no longer given: {', '.join('-D ' + str(d) for d in dropped)})" if dropped else ""
    print(
        f"build2cmake: the -D values differ from the last build's{note}; configuring with a "
        "fresh CMake cache, so that only the values given now apply",
        file=log or sys.stdout,
        flush=True,
    )
    return ["--fresh"]


def _record_defines(build_dir: Path, defines: Sequence[str]) -> None:
    (build_dir / _DEFINES_RECORD).write_text(json.dumps(list(defines)) + "\n", "utf-8")


def _python_files(package_dir: Path, pyext: Sequence[str]) -> list[Path]:
    suffixes = {"." + ext for ext in pyext}
    return sorted(
        p.relative_to(package_dir)
        for p in package_dir.rglob("*")
        if p.is_file() and p.suffix in suffixes and "__pycache__" not in p.parts
    )


def metadata_for(
    project: Project, extension: str, backend: str, archs: Sequence[str]
) -> dict[str, object]:
    """The metadata.json `kernels` reads for one build variant."""
    backend_info: dict[str, object] = {"type": backend}
    if archs:
        backend_info["archs"] = list(archs)
    return {
        "id": extension,
        # kernels' names are lowercase letters, digits and dashes; it maps them back to the
        # Python package name (dashes to underscores).
        "name": project.name.lower().replace("_", "-"),
        "version": project.version if project.version is not None else 1,
        "license": project.license or NO_LICENSE,
        "python-depends": list(project.python_depends),
        "backend": backend_info,
    }


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


class VariantMismatchError(Build2CMakeError):
    """The environment builds another variant than the one asked for."""


@dataclass(frozen=True)
class CompiledVariant:
    """A compiled (or universal) kernel, ready to be laid out as build/<variant>/."""

    variant: str
    library: Path | None
    metadata: dict[str, object]


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
        metadata = metadata_for(project, extension_for["universal"], chosen, archs)
        return CompiledVariant(variant, None, metadata)
    if backend is None:
        chosen = installed_torch_backend(python)
        if chosen not in extension_for:
            raise Build2CMakeError(
                f"backend {chosen!r} (from the installed torch) is not one that build.toml "
                f"declares ({', '.join(extension_for)}); pick one with --backend"
            )
    else:
        chosen = backend
    torch_toolkit = installed_torch_toolkit(python)
    named: list[str | None] = []

    def check_toolkit(info: dict[str, object]) -> None:
        version, note = toolkit_for_variant(
            chosen,
            str(info.get("backend_version") or "") or None,
            torch_toolkit,
            allow_mismatch=allow_toolkit_mismatch,
        )
        if note:
            print(f"build2cmake: {note}", file=log or sys.stdout, flush=True)
        named.append(version)
        if expected_variant is not None:
            made = arch_variant(
                str(info["torch_version"]),
                bool(info["torch_cxx11_abi"]),
                chosen,
                version,
                stable_abi=str(info.get("stable_abi") or "") or None,
            )
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
    # torch's version and C++ ABI as CMake found them (no import of torch: seconds of CPU
    # that would compete with the compiler).
    variant = arch_variant(
        str(info["torch_version"]),
        bool(info["torch_cxx11_abi"]),
        chosen,
        named[0],
        stable_abi=str(info.get("stable_abi") or "") or None,
    )
    cmake_archs = info.get("archs", [])
    assert isinstance(cmake_archs, list)
    archs = compiled_archs(chosen, library, [str(a) for a in cmake_archs])
    return CompiledVariant(variant, library, metadata_for(project, extension, chosen, archs))


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
) -> BuildReport:
    """Compile (unless universal) and write build/<variant>/ with its metadata.json."""
    _check_python_package(project, project_dir)
    compiled = compile_variant(
        project,
        project_dir,
        backend=backend,
        extension_for=extension_for,
        defines=defines,
        jobs=jobs,
        allow_toolkit_mismatch=allow_toolkit_mismatch,
    )
    return install_variant(project, project_dir, compiled, force=force)


def _check_python_package(project: Project, project_dir: Path) -> None:
    package_dir = project_dir / "torch-ext" / project.package_name
    if not (package_dir / "__init__.py").is_file():
        raise Build2CMakeError(
            f"{package_dir / '__init__.py'}: missing; the kernel's Python package lives in "
            f"torch-ext/{project.package_name}/ and needs an __init__.py"
        )


def install_variant(
    project: Project, project_dir: Path, compiled: CompiledVariant, *, force: bool = False
) -> BuildReport:
    """Write build/<variant>/ (Python files, extension, metadata.json) in one rename."""
    _check_python_package(project, project_dir)
    package_dir = project_dir / "torch-ext" / project.package_name
    pyext = project.torch.pyext if project.torch is not None else ("py", "pyi")
    variant, library, metadata = compiled.variant, compiled.library, compiled.metadata

    metadata_bytes = (json.dumps(metadata, indent=2) + "\n").encode("utf-8")
    build_root = project_dir / "build"
    build_root.mkdir(exist_ok=True)
    destination = build_root / variant
    with locked(build_root):
        record = read_record(project_dir)
        if destination.exists() and variant not in owned_variants(project_dir) and not force:
            raise WriteRefusedError(
                f"{destination}: exists and was not made by build2cmake build (or was changed "
                "since); move it away, or pass --force to replace it"
            )
        staging = Path(tempfile.mkdtemp(prefix=f".{variant}.", dir=build_root))
        try:
            for relative in _python_files(package_dir, pyext):
                (staging / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(package_dir / relative, staging / relative)
            if library is not None:
                shutil.copy2(library, staging / library.name)
            (staging / "metadata.json").write_bytes(metadata_bytes)
            staging.chmod(0o755)
            old = None
            if destination.exists() or destination.is_symlink():
                old = build_root / f".{variant}.old"
                if old.exists():
                    shutil.rmtree(old)
                os.replace(destination, old)
            os.replace(staging, destination)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        record[variant] = content_hash(metadata_bytes)
        _write_record(project_dir, record)
    return BuildReport(variant=variant, path=destination, metadata=metadata)
