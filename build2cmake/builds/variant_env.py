"""Isolated Python environments, one per Hub variant: the variant's torch and the matching nvcc,
all from PyPI (or the indexes the user names), made with uv.

An environment lives in the user's cache (`$XDG_CACHE_HOME/build2cmake/envs/<variant>-<key>`),
shared by every project, and is reused while what it was made from (packages, indexes, Python)
is unchanged. Its path stays the same between runs, so ccache's hashes (which include the
compiler's and the headers' paths) match and a build after `clean` reuses earlier objects.

What goes in:
- torch for the variant (`torch>=X.Y,<X.Y+1`) without its nvidia-* and triton dependencies: a
  compile needs torch's headers and libraries, not the CUDA libraries torch loads at run time
  (over 3 GB). Its small pure-Python dependencies are installed, so that `import torch` works
  where torch's own GPU libraries are not needed (a CPU torch).
- CUDA 13.x variants: nvcc, its headers, NVVM and the CUDA runtime of that release from PyPI
  (`nvidia-cuda-nvcc`, `-crt`, `nvidia-nvvm`, `-runtime`, `-cccl`), merged into one toolkit
  folder `<env>/cuda` (bin, include, lib, nvvm) that CMake and nvcc understand. PyPI has no nvcc
  for CUDA 12 (nvidia-cuda-nvcc-cu12 holds only ptxas and NVVM): 12.x variants use the
  machine's toolkit, $CUDA_HOME_12_Y or /usr/local/cuda-12.Y.
- CPU variants against a CUDA torch (PyPI's Linux torch): the toolkit of torch's CUDA release
  too, because torch's CMake package looks for it.
- CUDA variants of torch: the headers of the CUDA libraries torch's own CUDA headers include
  (cuBLAS, cuSPARSE, cuSOLVER, cuRAND, cuFFT; `ATen/cuda/CUDAContext.h` needs the first three)
  of the variant's release, read from their wheels without the libraries (cuda_headers): into
  the toolkit folder for 13.x, on CPATH after the machine's toolkit for 12.x.
- `nvidia-cutlass==X.*` when a CUDA kernel depends on cutlass_X_Y: the newest release of that
  major on PyPI (schema.cutlass_major).
- ROCm variants: torch from PyTorch's ROCm index of the variant's release
  (https://download.pytorch.org/whl/rocmX.Y; ROCm torch is not on PyPI), or the user's
  `--index-url`. Where that index cannot be reached, torch of the same release from PyPI (or the
  sources given) stands in: a CPU or CUDA build, whose headers and libraries compile a kernel that
  includes none of torch's GPU headers (variant_builds checks that and records the stand-in). The
  HIP compiler is not on PyPI either: a ROCm of the variant's release on the machine, or in a
  build2cmake chroot, builds it (rocm_installs).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import http.client
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from build2cmake.builds import cuda_headers, index_settings
from build2cmake.builds.index_settings import redacted
from build2cmake.builds.variant import NEUTRAL_FOLDER
from build2cmake.config.hub_variants import HubVariant
from build2cmake.ground.bounded import parse_json_record
from build2cmake.ground.errors import Build2CMakeError, printable

_ENV_RECORD = ".build2cmake-env.json"
# Packages torch lists that a compile does not need (GPU runtime libraries, triton).
_RUNTIME_ONLY = ("nvidia-", "cuda-", "triton")


@dataclass(frozen=True)
class PackageSources:
    """Where uv looks for packages: PyPI unless told otherwise (uv's own options)."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    # Where these came from when not from the command line (index_settings), for messages.
    origin: str = ""
    # pip's rule for several indexes: every index's releases compared (uv: the first index
    # that has a package).
    best_match: bool = False

    def uv_arguments(self) -> list[str]:
        """The uv pip install options that name these sources (a folder as an absolute path:
        uv runs in a neutral folder)."""
        args = []
        if self.index_url:
            args += ["--index-url", _absolute(self.index_url)]
        for url in self.extra_index_urls:
            args += ["--extra-index-url", _absolute(url)]
        for link in self.find_links:
            args += ["--find-links", _absolute(link)]
        if self.best_match:
            args += ["--index-strategy", "unsafe-best-match"]
        return args

    def named(self) -> bool:
        """Whether any source is named (else uv's defaults: PyPI, or uv's own settings)."""
        return bool(self.index_url or self.extra_index_urls or self.find_links)


def configured_sources(given: PackageSources, python: str = sys.executable) -> PackageSources:
    """`given` when the command line named a source; else the indexes the user configured for
    uv or pip (index_settings has the precedence), with where they came from."""
    if given.named() or given.origin:
        return given
    found = index_settings.configured(python=python)
    if found.by_uv:
        # uv reads its own settings; they are named in messages, not passed.
        return replace(given, origin=found.origin)
    if not found.origin:
        return given
    return PackageSources(
        found.index_url,
        found.extra_index_urls,
        found.find_links,
        origin=found.origin,
        best_match=True,
    )


def _absolute(source: str) -> str:
    """A URL as it is; a local path made absolute against the current folder."""
    return source if "://" in source else os.path.abspath(source)


# PyTorch's index of ROCm builds of torch, one per ROCm release.
ROCM_TORCH_INDEX = "https://download.pytorch.org/whl/rocm{major}.{minor}"
# How long an index may take to answer before it counts as unreachable (a machine without
# access to it should not wait long for every ROCm variant).
_PROBE_SECONDS = 3.0


def rocm_torch_index(release: tuple[int, int]) -> str:
    """PyTorch's index of torch builds for ROCm `release`."""
    return ROCM_TORCH_INDEX.format(major=release[0], minor=release[1])


def index_reachable(url: str, timeout: float = _PROBE_SECONDS) -> bool:
    """Whether `url` answers (any HTTP answer but an error) within `timeout` seconds."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return True
    except (OSError, ValueError, http.client.HTTPException):
        return False


@dataclass(frozen=True)
class TorchSources:
    """Where a variant's torch comes from, and, when not from where it should, why."""

    sources: PackageSources
    unreachable: str | None = None  # the ROCm index that could not be reached


def torch_sources(
    variant: HubVariant,
    sources: PackageSources,
    *,
    reachable: Callable[[str], bool] = index_reachable,
) -> TorchSources:
    """The sources of `variant`'s environment: for a ROCm variant PyTorch's ROCm index of its
    release, unless the user named an index (--index-url) or that index cannot be reached
    (then `sources` as given: PyPI's torch of the same release stands in)."""
    chosen_index = sources.index_url and not sources.origin  # --index-url, not a mirror of PyPI
    if variant.backend != "rocm" or variant.toolkit is None or chosen_index:
        return TorchSources(sources)
    index = rocm_torch_index(variant.toolkit)
    if reachable(index + "/torch/"):
        return TorchSources(replace(sources, index_url=index))
    return TorchSources(sources, unreachable=index)


@dataclass(frozen=True)
class VariantEnv:
    """A ready environment: its Python, and the variables and -D values a build needs."""

    path: Path
    python: Path
    env: dict[str, str] = field(default_factory=dict)
    defines: tuple[str, ...] = ()


def uv_program() -> str:
    """uv from its PyPI package (`pip install uv`), else PATH's."""
    with contextlib.suppress(ImportError, FileNotFoundError):
        import uv  # type: ignore[import-not-found,unused-ignore]

        return str(uv.find_uv_bin())
    found = shutil.which("uv")
    if found is None:
        raise Build2CMakeError(
            "--variants makes an environment per variant with uv, which is not installed: "
            f"{sys.executable} -m pip install uv"
        )
    return found


def cache_root() -> Path:
    """Where variant environments live: $BUILD2CMAKE_CACHE, else the XDG cache folder."""
    explicit = os.environ.get("BUILD2CMAKE_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "build2cmake"


def toolkit_packages(cuda: tuple[int, int], *, newest_minor: bool = False) -> list[str]:
    """The PyPI packages that make a CUDA toolkit able to compile (nvcc, its headers, NVVM, the
    runtime), or [] where PyPI has none: the 12.x nvidia-cuda-nvcc-cu12 wheels carry only ptxas
    and NVVM, not nvcc, so CUDA 12 comes from the machine (system_toolkit). `newest_minor`: the
    newest release of that major one instead of X.Y."""
    if cuda[0] < 13:
        return []
    release = f"{cuda[0]}.*" if newest_minor else f"{cuda[0]}.{cuda[1]}.*"
    names = [
        "nvidia-cuda-nvcc",
        "nvidia-cuda-crt",
        "nvidia-nvvm",
        "nvidia-cuda-runtime",
        "nvidia-cuda-cccl",
    ]
    return [f"{name}=={release}" for name in names]


def system_toolkit(cuda: tuple[int, int]) -> Path:
    """The machine's CUDA X.Y toolkit ($CUDA_HOME_X_Y, else /usr/local/cuda-X.Y)."""
    variable = f"CUDA_HOME_{cuda[0]}_{cuda[1]}"
    folder = Path(os.environ.get(variable) or f"/usr/local/cuda-{cuda[0]}.{cuda[1]}")
    if not (folder / "bin" / "nvcc").is_file():
        raise Build2CMakeError(
            f"CUDA {cuda[0]}.{cuda[1]}: PyPI has no nvcc for CUDA {cuda[0]} (its "
            "nvidia-cuda-nvcc-cu12 wheels hold only ptxas and NVVM), and there is none in "
            f"{folder}; install that toolkit there, or set {variable}=/path/to/cuda"
        )
    return folder


def requirements(variant: HubVariant, *, cutlass: int | None = None) -> list[str]:
    """The packages (PEP 508) of `variant`'s environment, before torch's own dependencies;
    `cutlass`: the CUTLASS major release its CUDA kernels depend on (schema.cutlass_major)."""
    major, minor = variant.torch
    # A tvm-ffi variant is compiled against apache-tvm-ffi of its release, and no torch.
    runtime = "apache-tvm-ffi" if variant.framework == "tvm-ffi" else "torch"
    packages = [f"{runtime}>={major}.{minor},<{major}.{minor + 1}"]
    if variant.backend == "cuda" and variant.toolkit is not None:
        if variant.toolkit[0] < 12:
            raise Build2CMakeError(
                f"{variant.spec}: CUDA before 12 is not supported by --variants; build it with "
                "--backend cuda in an environment that has that toolkit"
            )
        packages += toolkit_packages(variant.toolkit)
        if cutlass is not None:
            packages.append(f"nvidia-cutlass=={cutlass}.*")
    return packages


@contextlib.contextmanager
def _locked_file(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _uv(args: Sequence[str], log: TextIO | None) -> None:
    command = [uv_program(), *args]
    print(printable(redacted("+ " + " ".join(command))), file=log or sys.stdout, flush=True)
    # In a neutral folder: uv reads uv.toml and pyproject.toml's [tool.uv] from the folder it
    # runs in and its parents, and a clone's would add its own indexes or wheels to the cached
    # environment every later build of that variant reuses (the user's uv.toml still applies).
    result = subprocess.run(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        cwd=NEUTRAL_FOLDER,
        check=False,
    )
    # uv's words quote the index URLs: shown without their user:password@.
    for line in result.stdout.splitlines():
        print(printable(redacted(line)), file=log or sys.stdout, flush=True)
    if result.returncode != 0:
        where = f"; see {log.name}" if log is not None else ""
        raise Build2CMakeError(f"uv {args[0]} {args[1]} failed (exit {result.returncode}){where}")


def prepare_env(
    variant: HubVariant,
    sources: PackageSources,
    *,
    cutlass: int | None = None,
    python: str = sys.executable,
    root: Path | None = None,
    log: TextIO | None = None,
    before_create: Callable[[], None] | None = None,
) -> VariantEnv:
    """The environment for `variant`, made (or refreshed) with uv when needed; `before_create`
    runs first when it must be made (and may refuse it by raising), not when it is reused."""
    packages = requirements(variant, cutlass=cutlass)
    python_version = sys.version if python == sys.executable else python
    recipe = {
        "packages": packages,
        "library_headers": list(cuda_headers.LIBRARIES) if _library_headers(variant) else [],
        "sources": sources.uv_arguments(),
        "origin": sources.origin,
        "python": str(Path(python).resolve()),
        "python_version": python_version,
    }
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:10]
    path = (root or cache_root()) / "envs" / f"{variant.spec}-{key}"
    env_python = path / "bin" / "python"
    with _locked_file(path.with_name(path.name + ".lock")):
        record = path / _ENV_RECORD
        try:
            made = json.loads(record.read_text("utf-8"))
            cuda = made["cuda"] if env_python.exists() else None
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            made, cuda = None, None
        if made is None:
            if before_create is not None:
                before_create()
            cuda = _create(path, python, variant, packages, sources, log)
            # The record names the sources without their credentials (the key covers them).
            shown = {**recipe, "sources": [redacted(a) for a in recipe["sources"]], "cuda": cuda}
            record.write_text(json.dumps(shown, indent=2) + "\n", "utf-8")
        else:
            print(printable(f"reusing {path}"), file=log or sys.stdout, flush=True)
    return _described(variant, path, tuple(cuda) if cuda else None)


def _create(
    path: Path,
    python: str,
    variant: HubVariant,
    packages: list[str],
    sources: PackageSources,
    log: TextIO | None,
) -> list[int] | None:
    """Make the environment; returns the CUDA release its build needs (None: no CUDA).

    That is the variant's, or, for a CPU (ROCm) variant built against a CUDA torch, torch's
    own: torch's CMake package then looks for the CUDA toolkit it was built with.
    """
    if path.exists():
        shutil.rmtree(path)
    env_python = path / "bin" / "python"
    _uv(["venv", "--quiet", "--python", python, str(path)], log)
    install = ["pip", "install", "--python", str(env_python), *sources.uv_arguments()]
    torch_requires: list[str] = []
    if variant.framework == "tvm-ffi":
        # apache-tvm-ffi's own dependencies are small and needed; there is no torch to trim.
        _uv([*install, *packages], log)
    else:
        _uv([*install, "--no-deps", *packages], log)
        torch_requires = _torch_requirements(env_python)
        extra = _torch_build_dependencies(torch_requires)
        if extra:
            _uv([*install, *extra], log)
    if variant.backend == "cuda" or variant.framework == "tvm-ffi":
        cuda = variant.toolkit
    else:
        cuda = _torch_cuda(env_python)
    if cuda is not None and variant.backend != "cuda" and toolkit_packages(cuda):
        # A ROCm variant compiles no CUDA at all: nvcc only passes the probe torch's CMake package
        # makes, for which the newest release of torch's major one is taken, as it knows the
        # newest glibc (CUDA 13.0's math_functions.h clashes with glibc 2.42's rsqrt, in the
        # ROCm 7.2 chroot's Debian sid).
        newest = variant.backend == "rocm"
        _uv([*install, "--no-deps", *toolkit_packages(cuda, newest_minor=newest)], log)
    cuda_root = path / "lib" / f"python{_python_minor(env_python)}" / "site-packages" / "nvidia"
    if cuda_root.is_dir():
        _merge_toolkit(cuda_root, path / "cuda")
    if cuda is not None and _library_headers(variant):
        cuda_headers.install(
            cuda_headers.pins(torch_requires, cuda),
            _library_include(path, cuda),
            uv_sources=sources.uv_arguments(),
            uv=uv_program(),
            python=str(env_python),
            log=log,
        )
    return list(cuda) if cuda is not None else None


def _library_headers(variant: HubVariant) -> bool:
    """Whether `variant`'s environment gets the CUDA library headers: a CUDA build against
    torch, whose CUDA headers include them."""
    return variant.backend == "cuda" and variant.framework == "torch"


def _library_include(path: Path, cuda: tuple[int, int]) -> Path:
    """Where the CUDA library headers go: beside the runtime's in the toolkit made from PyPI
    (13.x), else a folder of their own, searched after the machine's toolkit (12.x)."""
    return path / ("cuda" if toolkit_packages(cuda) else "cuda-libraries") / "include"


def _torch_cuda(python: Path) -> tuple[int, int] | None:
    """torch.version.cuda of the environment's torch, as (major, minor)."""
    from build2cmake.builds.variant import installed_torch_toolkit

    backend, version = installed_torch_toolkit(str(python))
    if backend != "cuda" or not version:
        return None
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def _python_minor(python: Path) -> str:
    result = subprocess.run(
        [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        cwd=NEUTRAL_FOLDER,
        check=True,
    )
    return result.stdout.strip()


def _torch_requirements(python: Path) -> list[str]:
    """torch's declared dependencies (markers kept, extras' left out)."""
    code = (
        "import importlib.metadata as m\n"
        "for r in m.requires('torch') or []:\n"
        "    if 'extra ==' not in r: print(r)\n"
    )
    result = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, cwd=NEUTRAL_FOLDER, check=False
    )
    if result.returncode != 0:
        raise Build2CMakeError(f"{python}: cannot read torch's dependencies: {result.stderr}")
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


def _torch_build_dependencies(requires: list[str]) -> list[str]:
    """torch's declared dependencies minus the GPU runtime ones."""
    return [line for line in requires if not line.lower().startswith(_RUNTIME_ONLY)]


def _merge_toolkit(nvidia: Path, toolkit: Path) -> None:
    """Lay the nvidia-* wheels' bin, include, lib and nvvm folders out as one CUDA toolkit.

    Files are hard-linked (copied across file systems): nvcc finds its headers, NVVM and
    libraries relative to its own folder (nvcc.profile's $(_HERE_)/..), so it must really live
    in toolkit/bin. 12.x wheels are one folder per package (nvidia/cuda_nvcc, ...); 13.x merged
    them into nvidia/cu13.
    """
    if toolkit.exists():
        shutil.rmtree(toolkit)
    packages = sorted(p for p in nvidia.iterdir() if p.is_dir() and not p.name.startswith("__"))
    for package in packages:
        for part in ("bin", "include", "lib", "nvvm"):
            source = package / part
            if not source.is_dir():
                continue
            for item in sorted(source.rglob("*")):
                if item.is_dir() or "__pycache__" in item.parts:
                    continue
                target = toolkit / part / item.relative_to(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                if item.is_symlink():
                    os.symlink(os.readlink(item), target)
                    continue
                with contextlib.suppress(FileExistsError):
                    try:
                        os.link(item, target)
                    except OSError:
                        shutil.copy2(item, target)
    lib = toolkit / "lib"
    # The wheels ship only libcudart.so.<major>; CMake's CUDA::cudart links libcudart.so.
    for versioned in sorted(lib.glob("libcudart.so.*")):
        unversioned = lib / "libcudart.so"
        if not unversioned.exists():
            os.symlink(versioned.name, unversioned)
    if lib.is_dir() and not (toolkit / "lib64").exists():
        os.symlink("lib", toolkit / "lib64")


def _described(variant: HubVariant, path: Path, cuda: tuple[int, int] | None) -> VariantEnv:
    env = dict(os.environ)
    env["VIRTUAL_ENV"] = str(path)
    env["PATH"] = os.pathsep.join([str(path / "bin"), env.get("PATH", "")])
    defines: list[str] = []
    if cuda is not None:
        toolkit = path / "cuda" if toolkit_packages(cuda) else system_toolkit(cuda)
        nvcc = toolkit / "bin" / "nvcc"
        if not nvcc.is_file():
            raise Build2CMakeError(f"{path}: no nvcc in the environment ({nvcc})")
        env["CUDA_HOME"] = env["CUDA_PATH"] = str(toolkit)
        env["PATH"] = os.pathsep.join([str(toolkit / "bin"), env["PATH"]])
        defines.append(f"CUDAToolkit_ROOT={toolkit}")
        libraries = _library_include(path, cuda)
        if _library_headers(variant) and not toolkit_packages(cuda) and libraries.is_dir():
            # CPATH is searched after every -I, so the machine's own copies come first.
            env["CPATH"] = os.pathsep.join(filter(None, [env.get("CPATH"), str(libraries)]))
        if variant.backend == "cuda":
            defines.append(f"CMAKE_CUDA_COMPILER={nvcc}")
    return VariantEnv(path=path, python=path / "bin" / "python", env=env, defines=tuple(defines))


# Which torch release a variant gets, asked before anything is downloaded: uv resolves the
# variant's requirement against the same sources (and the user's uv configuration) as the
# install, so a release the index does not serve is one line instead of a failed install, and a
# CUDA variant whose torch release was built with another CUDA is one line instead of a 1 GB
# download and a configure that stops.

# How long uv may take to resolve (it asks the index, or its cache).
_RESOLVE_SECONDS = 120
# A package's page on an index (PyPI's JSON page of torch is ~0.4 MB) and the time to read it.
_LISTING_LIMIT = 32 << 20
_LISTING_SECONDS = 30
# Entries read from a --find-links folder.
_FOLDER_ENTRY_LIMIT = 100_000
# Release series named when a variant's torch does not exist.
_SERIES_SHOWN = 8
PYPI_SIMPLE = "https://pypi.org/simple"
_WHEEL = re.compile(r"torch-([0-9][0-9A-Za-z.+!_]*)-[^-]+-[^-]+-([^-]+)\.whl")
_LOCAL_BUILD = re.compile(r"\+(cpu|cu([0-9]+)([0-9])|rocm([0-9]+)\.([0-9]+))(?:\.|$)")
# What a CUDA build of torch requires: cuda-toolkit[...]==13.0.3 (torch >= 2.14), else the CUDA
# runtime's wheel of its release (nvidia-cuda-runtime-cu12==12.8.90, nvidia-cuda-runtime==13.0.96).
_CUDA_PIN = re.compile(
    r"^(?:cuda-toolkit|nvidia-cuda-runtime(?:-cu[0-9]+)?)==([0-9]+)\.([0-9]+)", re.MULTILINE
)
_HREF = re.compile(r"""href\s*=\s*["']([^"'#?]+)""", re.IGNORECASE)


@dataclass(frozen=True)
class TorchRelease:
    """The torch release the index serves for a variant, and what it was built for."""

    version: str  # as the index names it: "2.14.1", "2.13.0+cpu"
    backend: str | None  # "cpu", "cuda" or "rocm"; None where the index does not say
    toolkit: tuple[int, int] | None = None  # its CUDA or ROCm release
    # The index or --find-links source uv took it from (uv's index annotation).
    index: str | None = field(default=None, compare=False)


def describe_sources(sources: PackageSources) -> str:
    """The sources in words, for messages: PyPI, or the user's (and where they were configured),
    without the credentials of any URL."""
    if sources.origin and not sources.named():
        return redacted(sources.origin)  # uv's own settings
    named = [
        *([f"--index-url {sources.index_url}"] if sources.index_url else []),
        *(f"--extra-index-url {u}" for u in sources.extra_index_urls),
        *(f"--find-links {f}" for f in sources.find_links),
    ]
    if not named:
        return "PyPI"
    text = ("PyPI and " if not sources.index_url else "") + ", ".join(named)
    return redacted(text + (f" (from {sources.origin})" if sources.origin else ""))


# What uv says when it cannot reach an index (a name that does not resolve, a refused or timed
# out connection, a proxy or TLS failure).
_UNREACHABLE = re.compile(
    r"lookup address|dns error|connect error|Connection refused|timed out|Network is unreachable"
    r"|error sending request|tunnel|certificate|Could not connect|client error \(Connect\)",
    re.IGNORECASE,
)


def _series(version: tuple[int, int]) -> str:
    return f"torch>={version[0]}.{version[1]},<{version[0]}.{version[1] + 1}"


def _uv_compile(
    requirement: str,
    sources: PackageSources,
    python: str,
    *,
    deps: bool,
    log: TextIO | None = None,
) -> subprocess.CompletedProcess[str]:
    """`uv pip compile` of one requirement (from a neutral folder, as every uv run here); the
    command and what uv said go to `log`, as an install's do."""
    command = [
        uv_program(), "pip", "compile", "-", "--python", python, "--no-header", "--no-annotate",
        *(() if deps else ("--no-deps", "--emit-index-annotation")), *sources.uv_arguments(),
    ]  # fmt: skip
    if log is not None:
        print(printable(redacted(f"+ {' '.join(command)} <<< {requirement}")), file=log, flush=True)
    try:
        result = subprocess.run(
            command,
            input=requirement + "\n",
            capture_output=True,
            text=True,
            cwd=NEUTRAL_FOLDER,
            timeout=_RESOLVE_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise Build2CMakeError(
            f"uv did not resolve {requirement} from {describe_sources(sources)} within "
            f"{_RESOLVE_SECONDS} s"
        ) from None
    if log is not None:
        # uv's own words, each line escaped: they quote what the index served.
        for line in (result.stdout + result.stderr).splitlines():
            print(printable(redacted(line)), file=log, flush=True)
    return result


def resolve_torch(
    variant: HubVariant,
    sources: PackageSources,
    *,
    python: str = sys.executable,
    log: TextIO | None = None,
) -> TorchRelease:
    """The torch release uv installs for `variant` from `sources`, and its build: from the
    release's local version (+cpu, +cu126, +rocm7.1), else, for a CUDA variant, from the CUDA
    release its wheel requires. One error line, naming the releases that exist, when none does."""
    requirement = _series(variant.torch)
    result = _uv_compile(requirement, sources, python, deps=False, log=log)
    if result.returncode != 0:
        if "No solution found" in result.stderr:
            raise Build2CMakeError(
                f"no torch {variant.torch[0]}.{variant.torch[1]} release on "
                f"{describe_sources(sources)}{existing_releases(sources)}"
            )
        last = (result.stderr.strip().splitlines() or ["no output"])[-1].strip()
        last = re.sub(r"^(?:error|cause): ", "", last)
        if _UNREACHABLE.search(result.stderr):
            raise Build2CMakeError(
                f"the package index cannot be reached: {describe_sources(sources)} "
                f"({printable(redacted(last))[:200]}); name one that can with --index-url URL"
            )
        raise Build2CMakeError(
            f"uv could not resolve {requirement} from {describe_sources(sources)}: "
            f"{printable(redacted(last))[:300]}"
        )
    pinned = re.search(r"^torch==(\S+)", result.stdout, re.MULTILINE)
    if pinned is None:
        raise Build2CMakeError(f"uv resolved {requirement} to no torch: {result.stdout[:200]!r}")
    version = pinned[1]
    served = re.search(r"^torch==\S+\n[ \t]+# from (\S+)", result.stdout, re.MULTILINE)
    release = functools.partial(TorchRelease, index=served[1] if served else None)
    local = _LOCAL_BUILD.search(version)
    if local is not None:
        if local[1] == "cpu":
            return release(version, "cpu")
        if local[2] is not None:
            return release(version, "cuda", (int(local[2]), int(local[3])))
        return release(version, "rocm", (int(local[4]), int(local[5])))
    if variant.backend != "cuda":
        return release(version, None)  # any build of torch builds a cpu or rocm variant
    # PyPI's wheels carry no local version: the CUDA release shows in what the wheel requires.
    # Where that does not resolve (an index without torch's dependencies), it is not known.
    with_deps = _uv_compile(f"torch=={version}", sources, python, deps=True, log=log)
    cuda = _CUDA_PIN.search(with_deps.stdout) if with_deps.returncode == 0 else None
    if cuda is not None:
        return release(version, "cuda", (int(cuda[1]), int(cuda[2])))
    return release(version, "cpu" if with_deps.returncode == 0 else None)


def check_torch_release(
    variant: HubVariant,
    sources: PackageSources,
    *,
    python: str = sys.executable,
    log: TextIO | None = None,
) -> TorchRelease:
    """`variant`'s torch release, or one error line when the sources have none for it: no
    release of its series, or (a CUDA variant) only a build for another CUDA release, which
    would make another variant than the one named."""
    release = resolve_torch(variant, sources, python=python, log=log)
    if (
        variant.backend == "cuda"
        and release.backend == "cuda"
        and release.toolkit is not None
        and release.toolkit != variant.toolkit
    ):
        built = f"cu{release.toolkit[0]}{release.toolkit[1]}"
        raise Build2CMakeError(
            f"torch {release.version} (from {describe_sources(sources)}) is a CUDA "
            f"{release.toolkit[0]}.{release.toolkit[1]} build, which makes "
            f"torch{variant.torch[0]}.{variant.torch[1]}-{built} (kernels loads the variant "
            f"named after torch's CUDA release); a {variant.backend_tag} build of torch "
            f"{variant.torch[0]}.{variant.torch[1]} is on PyTorch's index: --index-url "
            f"https://download.pytorch.org/whl/{variant.backend_tag}"
        )
    return release


def existing_releases(sources: PackageSources, machine: str | None = None) -> str:
    """'; the torch releases there: 2.15.0, 2.14.1, ...' (the newest of each series, newest
    first) for Linux on this machine, from the index uv takes torch from and the --find-links
    sources, read as PEP 503/691 pages (bounded); or why they could not be listed."""
    arch = machine or platform.machine()
    try:
        names = _torch_files(sources)
    except (
        OSError, ValueError, RecursionError, http.client.HTTPException, Build2CMakeError
    ) as error:  # fmt: skip
        # http.client's own (a bad status line, a cut-off chunk, too many headers) are not
        # OSErrors: whatever an index answers is one line here, never an internal error.
        why = printable(redacted(str(error)))[:200]
        return f" (the releases there could not be listed: {why})"
    newest: dict[tuple[int, ...], tuple[tuple[int, ...], str]] = {}
    for name in names:
        match = _WHEEL.fullmatch(name)
        if match is None or not _platform_fits(match[2], arch):
            continue
        version = match[1]
        key = _release_key(version)
        if key is None:
            continue
        series = key[:2]
        if series not in newest or key > newest[series][0]:
            newest[series] = (key, version)
    if not newest:
        return f"; it has no torch wheel for {arch} Linux"
    shown = [newest[s][1] for s in sorted(newest, reverse=True)]
    more = len(shown) - _SERIES_SHOWN
    older = f" (and {more} older series)" if more > 0 else ""
    return f"; the torch releases there: {', '.join(shown[:_SERIES_SHOWN])}{older}"


def _release_key(version: str) -> tuple[int, ...] | None:
    """2.14.1 -> (2, 14, 1); pre-releases and development builds (2.16.0rc1) are left out."""
    public = version.split("+")[0]
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*", public):
        return None
    return tuple(int(part) for part in public.split("."))


def _platform_fits(tags: str, machine: str) -> bool:
    """Whether a wheel's platform tags (manylinux_2_28_x86_64.manylinux2014_x86_64) include
    Linux on `machine`."""
    return any(
        tag.endswith(f"_{machine}") and (tag.startswith(("manylinux", "linux_")))
        for tag in tags.split(".")
    )


def _torch_files(sources: PackageSources) -> list[str]:
    """The file names of torch on the sources, as uv sees them: the first index that has torch
    (extra indexes before the main one, uv's first-index rule) and every --find-links source."""
    names: list[str] = []
    for link in sources.find_links:
        names += _links_of(_absolute(link), package_page=False)
    for index in [*sources.extra_index_urls, sources.index_url or PYPI_SIMPLE]:
        found = _links_of(_absolute(index).rstrip("/") + "/torch/", package_page=True)
        if found:
            return names + found
    return names


def _links_of(where: str, *, package_page: bool) -> list[str]:
    """The file names a simple-index page (PEP 691 JSON or PEP 503 HTML), a find-links page or
    a local folder lists; [] for a package page the index does not have."""
    path = where[len("file://") :] if where.startswith("file://") else where
    if "://" not in path:
        folder = Path(path)
        if folder.is_dir() and not (package_page and (folder / "index.html").is_file()):
            entries = []
            for entry in os.scandir(folder):
                entries.append(entry.name)
                if len(entries) >= _FOLDER_ENTRY_LIMIT:
                    break
            return entries
        page = folder / "index.html" if folder.is_dir() else folder
        if not page.is_file():
            return []
        with open(page, "rb") as file:
            body, kind = file.read(_LISTING_LIMIT + 1), "text/html"
    else:
        request = index_settings.url_request(where)
        request.add_header("Accept", "application/vnd.pypi.simple.v1+json, text/html;q=0.1")
        try:
            with urllib.request.urlopen(request, timeout=_LISTING_SECONDS) as answer:
                body = _read_by(answer, _LISTING_LIMIT + 1, time.monotonic() + _LISTING_SECONDS)
                kind = answer.headers.get("Content-Type", "")
        except urllib.error.HTTPError as error:
            if package_page and error.code == 404:
                return []
            raise
    if len(body) > _LISTING_LIMIT:
        raise Build2CMakeError(f"{where}: more than {_LISTING_LIMIT >> 20} MiB")
    if "json" in kind:
        page = parse_json_record(body, where, "the index's project page")
        files = page.get("files") if isinstance(page, dict) else None
        if not isinstance(files, list):
            raise ValueError(f"{where}: not a PEP 691 project page")
        return [str(f.get("filename", "")) for f in files if isinstance(f, dict)]
    text = body.decode("utf-8", "replace")
    return [urllib.parse.unquote(href.rsplit("/", 1)[-1]) for href in _HREF.findall(text)]


def _read_by(answer: Any, limit: int, deadline: float) -> bytes:
    """Up to `limit` bytes of an HTTP answer, in pieces, giving up at `deadline` (the socket's
    timeout bounds each read, not a server that sends a byte just within it, forever)."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the index took over {_LISTING_SECONDS} s to answer")
        chunk = answer.read(min(1 << 16, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
