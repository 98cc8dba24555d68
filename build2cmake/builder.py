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
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from build2cmake import offload
from build2cmake.errors import Build2CMakeError, WriteRefusedError
from build2cmake.fileset import content_hash
from build2cmake.model import Project
from build2cmake.safefs import RECORD_LIMIT_BYTES, ProjectFolder, read_regular_file
from build2cmake.variant import UNIVERSAL_VARIANT, arch_variant, installed_torch_backend

VARIANTS_RECORD = "build/.build2cmake-variants.json"
# A variant folder name as kernels spells them (torch213-cxx11-cpu-x86_64-linux,
# torch-universal): one path component, never hidden, never `.`/`..`.
_VARIANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}", re.ASCII)
_HASH = re.compile(r"sha256:[0-9a-f]{64}", re.ASCII)
# Python files copied into a variant and the extension: bounded so a planted device or huge
# file cannot stall the copy.
PACKAGE_FILE_LIMIT_BYTES = 64 << 20
LIBRARY_LIMIT_BYTES = 4 << 30
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


def read_record(folder: ProjectFolder) -> tuple[dict[str, str], list[str]]:
    """Variant folder name -> hash of the metadata.json build wrote there, and a warning for
    each entry that was ignored (not a plain variant name, or no sha256 hash)."""
    try:
        raw = folder.read(VARIANTS_RECORD, RECORD_LIMIT_BYTES, "variants record")
    except Build2CMakeError as error:
        return {}, [f"ignoring the variants record: {error}"]
    if raw is None:
        return {}, []
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return {}, [f"{VARIANTS_RECORD}: ignoring it: not JSON"]
    if not isinstance(data, dict):
        return {}, [f"{VARIANTS_RECORD}: ignoring it: not a JSON object"]
    record: dict[str, str] = {}
    warnings: list[str] = []
    for name, recorded in data.items():
        if not _VARIANT_NAME.fullmatch(name) or name.startswith("cmake"):
            warnings.append(f"{VARIANTS_RECORD}: ignoring {name!r}: not a variant folder name")
        elif not isinstance(recorded, str) or not _HASH.fullmatch(recorded):
            warnings.append(f"{VARIANTS_RECORD}: ignoring {name!r}: hash is not sha256:<hex>")
        else:
            record[name] = recorded
    return record, warnings


def owned_variants(folder: ProjectFolder) -> tuple[list[str], list[str]]:
    """Variant folders under build/ that `build` made and nobody replaced since (real folders
    whose metadata.json is a regular file with the recorded hash), and read warnings."""
    record, warnings = read_record(folder)
    owned = []
    for name, recorded in sorted(record.items()):
        if not folder.is_dir(f"build/{name}"):
            continue
        metadata = f"build/{name}/metadata.json"
        if not folder.is_file(metadata):
            continue
        with contextlib.suppress(Build2CMakeError):
            data = folder.read(metadata, RECORD_LIMIT_BYTES, "metadata.json")
            if data is not None and content_hash(data) == recorded:
                owned.append(name)
    return owned, warnings


def _write_record(folder: ProjectFolder, record: dict[str, str]) -> None:
    if not record:
        folder.unlink(VARIANTS_RECORD)
        return
    text = json.dumps(dict(sorted(record.items())), indent=2) + "\n"
    folder.write_atomic(VARIANTS_RECORD, text.encode("utf-8"))


def _run(command: Sequence[str], what: str, cwd: Path | None = None) -> None:
    """Run a build step with its output on the terminal; a failure is one clear error."""
    print("+ " + " ".join(command), flush=True)
    result = subprocess.run(list(command), cwd=cwd, check=False)
    if result.returncode != 0:
        raise Build2CMakeError(f"{what} failed (exit {result.returncode}); see its output above")


def compile_project(
    folder: ProjectFolder,
    backend: str,
    *,
    defines: Sequence[str] = (),
    jobs: int | None = None,
    python: str = sys.executable,
) -> tuple[PurePosixPath, dict[str, object]]:
    """Configure, build and install the generated CMake project for `backend`.

    Returns the install folder (relative to the project, holding <package>/<extension>.so) and
    CMake's build record. The build folder is made a real folder first: CMake follows paths, so
    a `build` or `build/cmake-variant-*` symlink planted in the project would lead it elsewhere.
    """
    build_rel = PurePosixPath("build") / f"cmake-variant-{backend}"
    install_rel = build_rel / "install"
    folder.makedirs(build_rel)
    project_dir = folder.path
    build_dir = project_dir / str(build_rel)
    install_dir = project_dir / str(install_rel)
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
    folder.rmtree(install_rel)
    _run([cmake_program(), "--install", str(build_dir)], "CMake install")
    raw = folder.read(build_rel / "build2cmake-build.json", RECORD_LIMIT_BYTES, "build record")
    try:
        info = json.loads((raw or b"").decode("utf-8"))
    except ValueError:
        info = None
    if not isinstance(info, dict):
        raise Build2CMakeError(f"{build_dir}/build2cmake-build.json: missing or not a JSON object")
    return install_rel, info


def _python_files(folder: ProjectFolder, package: PurePosixPath, pyext: Sequence[str]) -> list[str]:
    """The package's Python files (relative to it), walking real folders only."""
    suffixes = tuple("." + ext for ext in pyext)
    found: list[str] = []
    pending = [PurePosixPath()]
    while pending:
        sub = pending.pop()
        for name in folder.listdir(package / sub if sub.parts else package):
            if name == "__pycache__":
                continue
            rel = sub / name
            info = folder.lstat(package / rel)
            if info is None:
                continue
            if stat.S_ISDIR(info.st_mode):
                pending.append(rel)
            elif name.endswith(suffixes) and (
                stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)
            ):
                found.append(str(rel))
    return sorted(found)


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


def build(
    project: Project,
    folder: ProjectFolder,
    *,
    backend: str | None,
    extension_for: dict[str, str],
    defines: Sequence[str] = (),
    jobs: int | None = None,
    force: bool = False,
) -> BuildReport:
    """Compile (unless universal) and write build/<variant>/ with its metadata.json.

    The caller holds `folder`'s lock. Every write and delete goes through `folder`, so nothing
    outside the project is touched whatever symlinks the project holds.
    """
    project_dir = folder.path
    package = PurePosixPath("torch-ext") / project.package_name
    if not folder.is_file(package / "__init__.py"):
        raise Build2CMakeError(
            f"{project_dir / str(package) / '__init__.py'}: missing (or not a regular file); the "
            f"kernel's Python package lives in {package}/ and needs an __init__.py"
        )
    pyext = project.torch.pyext if project.torch is not None else ("py", "pyi")
    library: Path | None = None
    if project.universal:
        variant = UNIVERSAL_VARIANT
        # metadata.json has no "universal" backend type; the package runs on any of them.
        chosen = (
            project.backends[0] if project.backends and "cpu" not in project.backends else "cpu"
        )
        metadata = metadata_for(project, extension_for["universal"], chosen, [])
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
        install_rel, info = compile_project(folder, chosen, defines=defines, jobs=jobs)
        extension = str(info["extension"])
        install_package = install_rel / project.package_name
        libraries = [
            name
            for name in folder.listdir(install_package)
            if name.startswith(extension) and name.endswith(".so")
            and folder.is_file(install_package / name)
        ]  # fmt: skip
        if len(libraries) != 1:
            raise Build2CMakeError(
                f"{project_dir / str(install_package)}: expected one {extension}*.so, "
                f"found {libraries}"
            )
        library = project_dir / str(install_package / libraries[0])
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
    if not _VARIANT_NAME.fullmatch(variant):
        raise Build2CMakeError(f"{variant!r}: not a usable variant folder name")

    metadata_bytes = (json.dumps(metadata, indent=2) + "\n").encode("utf-8")
    build_root = PurePosixPath("build")
    destination = build_root / variant
    folder.makedirs(build_root)
    record, _ = read_record(folder)
    owned, _ = owned_variants(folder)
    if folder.lstat(destination) is not None and variant not in owned and not force:
        raise WriteRefusedError(
            f"{project_dir / str(destination)}: exists and was not made by build2cmake build (or "
            "was changed since); move it away, or pass --force to replace it"
        )
    staging = folder.make_temporary_dir(build_root, f".{variant}.")
    try:
        for relative in _python_files(folder, package, pyext):
            # Read through a symlink only when it stays inside the project: the variant is
            # uploaded, and must not carry a file from elsewhere on this machine.
            data = read_regular_file(
                project_dir / str(package / relative),
                PACKAGE_FILE_LIMIT_BYTES,
                "package file",
                root=project_dir,
            )
            folder.write_atomic(staging / relative, data)
        if library is not None:
            binary = folder.read(
                library.relative_to(project_dir).as_posix(), LIBRARY_LIMIT_BYTES, "extension"
            )
            if binary is None:
                raise Build2CMakeError(f"{library}: vanished after the install step")
            folder.write_atomic(staging / library.name, binary, mode=0o755)
        folder.write_atomic(staging / "metadata.json", metadata_bytes)
        old = None
        if folder.lstat(destination) is not None:
            old = build_root / f".{variant}.old"
            _remove_any(folder, old)
            folder.rename(destination, old)
        folder.rename(staging, destination)
        if old is not None:
            with contextlib.suppress(Build2CMakeError):
                _remove_any(folder, old)
    except BaseException:
        with contextlib.suppress(Build2CMakeError):
            folder.rmtree(staging)
        raise
    record[variant] = content_hash(metadata_bytes)
    _write_record(folder, record)
    return BuildReport(variant=variant, path=project_dir / str(destination), metadata=metadata)


def _remove_any(folder: ProjectFolder, name: PurePosixPath) -> None:
    """Remove `name` whatever it is (a folder's tree, or a file or symlink itself)."""
    info = folder.lstat(name)
    if info is None:
        return
    if stat.S_ISDIR(info.st_mode):
        folder.rmtree(name)
    else:
        folder.unlink(name)
