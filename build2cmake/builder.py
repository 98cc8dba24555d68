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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from build2cmake import offload
from build2cmake.errors import Build2CMakeError, WriteRefusedError
from build2cmake.fileset import content_hash, locked
from build2cmake.model import Project
from build2cmake.variant import UNIVERSAL_VARIANT, arch_variant, installed_torch_backend

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


def _run(command: Sequence[str], what: str, cwd: Path | None = None) -> None:
    """Run a build step with its output on the terminal; a failure is one clear error."""
    print("+ " + " ".join(command), flush=True)
    result = subprocess.run(list(command), cwd=cwd, check=False)
    if result.returncode != 0:
        raise Build2CMakeError(f"{what} failed (exit {result.returncode}); see its output above")


def compile_project(
    project_dir: Path,
    backend: str,
    *,
    defines: Sequence[str] = (),
    jobs: int | None = None,
    python: str = sys.executable,
) -> tuple[Path, dict[str, object]]:
    """Configure, build and install the generated CMake project for `backend`.

    Returns the install folder (holding <package>/<extension>.so) and CMake's build record.
    """
    build_dir = project_dir / "build" / f"cmake-variant-{backend}"
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
    ]
    configure += [f"-D{define}" for define in defines]
    _run(configure, "CMake configure")
    build = [cmake_program(), "--build", str(build_dir)]
    if jobs:
        build += ["--parallel", str(jobs)]
    _run(build, "CMake build")
    if install_dir.exists():
        shutil.rmtree(install_dir)
    _run([cmake_program(), "--install", str(build_dir)], "CMake install")
    info = json.loads((build_dir / "build2cmake-build.json").read_text("utf-8"))
    return install_dir, info


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


def noarch_variant(project: Project, backend: str | None) -> tuple[str, str]:
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
    installed = installed_torch_backend()
    chosen = installed if installed in project.backends else project.backends[0]
    return f"torch-{chosen}", chosen


def build(
    project: Project,
    project_dir: Path,
    *,
    backend: str | None,
    extension_for: dict[str, str],
    defines: Sequence[str] = (),
    jobs: int | None = None,
    force: bool = False,
) -> BuildReport:
    """Compile (unless universal) and write build/<variant>/ with its metadata.json."""
    package_dir = project_dir / "torch-ext" / project.package_name
    if not (package_dir / "__init__.py").is_file():
        raise Build2CMakeError(
            f"{package_dir / '__init__.py'}: missing; the kernel's Python package lives in "
            f"torch-ext/{project.package_name}/ and needs an __init__.py"
        )
    pyext = project.torch.pyext if project.torch is not None else ("py", "pyi")
    if project.universal:
        variant, chosen = noarch_variant(project, backend)
        library = None
        archs: list[str] = []
        if project.noarch is not None and chosen == "cuda":
            archs = list(project.noarch.cuda_capabilities)
        elif project.noarch is not None and chosen == "rocm":
            archs = list(project.noarch.rocm_archs)
        metadata = metadata_for(project, extension_for["universal"], chosen, archs)
    else:
        if backend is None:
            chosen = installed_torch_backend()
            if chosen not in extension_for:
                raise Build2CMakeError(
                    f"backend {chosen!r} (from the installed torch) is not one that build.toml "
                    f"declares ({', '.join(extension_for)}); pick one with --backend"
                )
        else:
            chosen = backend
        install_dir, info = compile_project(project_dir, chosen, defines=defines, jobs=jobs)
        extension = str(info["extension"])
        libraries = sorted((install_dir / project.package_name).glob(extension + "*.so"))
        if len(libraries) != 1:
            raise Build2CMakeError(
                f"{install_dir}: expected one {extension}*.so, found {libraries}"
            )
        library = libraries[0]
        backend_version = str(info.get("backend_version") or "") or None
        # torch's version and C++ ABI as CMake found them (no import of torch: seconds of CPU
        # that would compete with the compiler).
        variant = arch_variant(
            str(info["torch_version"]), bool(info["torch_cxx11_abi"]), chosen, backend_version
        )
        cmake_archs = info.get("archs", [])
        assert isinstance(cmake_archs, list)
        archs = compiled_archs(chosen, library, [str(a) for a in cmake_archs])
        metadata = metadata_for(project, extension, chosen, archs)

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
