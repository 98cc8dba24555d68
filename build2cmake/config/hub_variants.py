"""The torch x toolkit variants a Hub kernel ships, and which of them a project builds.

A variant is named two ways: the short form users type (`torch2.13-cu130`, `torch2.12-cpu`,
`torch2.13-rocm71`) and the folder `kernels` loads (`torch213-cxx11-cu130-x86_64-linux`).

The set published kernels are expected to carry (what `--all` builds) is upstream's build
variant list: `nix-builder/build-variants.json` in the huggingface/kernels repository, which its
docs (`docs/source/kernel-requirements.md`, "Build variants") make the requirement for Hub
kernels. The installed `kernels` Python package (0.17) carries no copy of that list: it only
resolves among the variants a repository has (kernels/variants.py, kernels/backends.py). A copy
of upstream's file, with the commit it was taken from, is the package's data file
`hub_build_variants.json`: the one place to update when upstream's list moves. Any other torch
release is built by naming it (`--variants torch2.15-cpu`); variant_env asks the package index
whether it exists.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import platform
import re
from dataclasses import dataclass
from importlib import resources

from build2cmake.config.model import Project
from build2cmake.ground.errors import Build2CMakeError

# The package's copy of upstream's matrix (see the module's docstring).
MATRIX_FILE = "hub_build_variants.json"
# The backends of upstream's matrix that this build2cmake builds (not xpu, metal, ...).
BUILT_BACKENDS = ("cpu", "cuda", "rocm")


@dataclass(frozen=True)
class UpstreamMatrix:
    """Upstream's build variant list as the package carries it."""

    source: dict[str, str]  # repository, path, commit, committed (date), checked (date)
    variants: dict[str, dict[str, tuple[str, ...]]]  # "x86_64-linux" -> backend -> folders

    def describe(self) -> str:
        """Where the list comes from, in one line."""
        s = self.source
        return f"{s['repository']} {s['path']} at {s['commit'][:12]} ({s['committed']})"


@functools.cache
def upstream_matrix() -> UpstreamMatrix:
    """The matrix of the package's data file (read once; a broken file is one error line)."""
    where = resources.files("build2cmake.config") / MATRIX_FILE
    try:
        text = where.read_text("utf-8")
    except OSError as error:
        raise Build2CMakeError(f"{where}: cannot read ({error}); reinstall build2cmake") from None
    return read_matrix(text, str(where))


def read_matrix(text: str, where: str) -> UpstreamMatrix:
    """A matrix from the text of a file shaped like the package's data file."""
    try:
        data = json.loads(text)
        source = {str(k): str(v) for k, v in data["source"].items()}
        missing = [k for k in ("repository", "path", "commit", "committed") if k not in source]
        if missing:
            raise KeyError(f"source.{missing[0]}")
        variants = {
            str(system): {str(b): tuple(str(n) for n in names) for b, names in backends.items()}
            for system, backends in data["build-variants"].items()
        }
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
        raise Build2CMakeError(
            f"{where}: not a build variant matrix ({type(error).__name__}: {error})"
        ) from None
    return UpstreamMatrix(source, variants)


# Upstream builds [tvm-ffi] kernels once per apache-tvm-ffi release x toolkit, whatever the torch
# (nix-builder/versions.nix: the build sets that carry a tvmFfiVersion, all "0.1"; their
# variant name is nix-builder/lib/variants/tvm-ffi.nix's). xpu is left out, as above.
REQUIRED_TVM_FFI = ((0, 1),)
TVM_FFI_TOOLKITS: dict[str, tuple[tuple[int, int], ...]] = {
    "cpu": ((0, 0),),
    "cuda": ((12, 6), (13, 0), (13, 2)),
}

# Used with fullmatch, digits spelled [0-9]: `$` would accept a trailing newline and `\d` any
# Unicode digit, which int() then reads (Arabic-Indic digits for torch's version).
_SHORT = re.compile(
    r"(torch|tvm-ffi)([0-9]+)\.([0-9]+)-(cpu|cu([0-9]+)([0-9])|rocm([0-9]+)([0-9]))"
)
_FOLDER = re.compile(
    r"(?:(torch)([0-9])([0-9]+)-cxx11|(tvm-ffi)([0-9])([0-9]+))"
    r"-(cpu|cu([0-9]+)([0-9])|rocm([0-9]+)([0-9]))-([a-z0-9_]+)-linux"
)


@dataclass(frozen=True, order=True)
class HubVariant:
    """One torch release x backend (x toolkit release) combination; for a [tvm-ffi] kernel,
    one apache-tvm-ffi release x backend (x toolkit release)."""

    torch: tuple[int, int]  # the framework's major.minor: torch's, or apache-tvm-ffi's
    backend: str  # "cpu", "cuda" or "rocm"
    toolkit: tuple[int, int] | None = None  # CUDA or ROCm major.minor; None for cpu
    framework: str = "torch"  # or "tvm-ffi"
    # The torch stable ABI the project builds this backend against ([torch.stable-abi]): the
    # build is named after it, not after the torch that compiled it (see `for_project`).
    stable_abi: tuple[int, int] | None = None

    @property
    def backend_tag(self) -> str:
        """`cpu`, `cu130`, `rocm71`: the backend part of both names."""
        if self.toolkit is None:
            return "cpu"
        prefix = "cu" if self.backend == "cuda" else "rocm"
        return f"{prefix}{self.toolkit[0]}{self.toolkit[1]}"

    @property
    def spec(self) -> str:
        """The short name users type: torch2.13-cu130 (tvm-ffi0.1-cu130)."""
        return f"{self.framework}{self.torch[0]}.{self.torch[1]}-{self.backend_tag}"

    def folder(self, machine: str | None = None) -> str:
        """The build/<variant> folder name kernels loads on Linux (torch >= 2.8 is cxx11 only;
        tvm-ffi variants carry no C++ ABI tag)."""
        if self.framework == "tvm-ffi":
            framework = f"tvm-ffi{self.torch[0]}{self.torch[1]}"
        elif self.stable_abi is not None:
            framework = f"torch-stable-abi{self.stable_abi[0]}{self.stable_abi[1]}"
        else:
            framework = f"torch{self.torch[0]}{self.torch[1]}-cxx11"
        return f"{framework}-{self.backend_tag}-{_machine(machine)}-linux"


def _machine(machine: str | None) -> str:
    return machine or platform.machine()


def parse_variant(text: str, machine: str | None = None) -> HubVariant:
    """A variant from `torch2.13-cu130` or `torch213-cxx11-cu130-x86_64-linux` (and the
    tvm-ffi spellings `tvm-ffi0.1-cu130`, `tvm-ffi01-cu130-x86_64-linux`)."""
    short = _SHORT.fullmatch(text)
    folder = _FOLDER.fullmatch(text)
    if short:
        framework, major, minor = short[1], short[2], short[3]
        groups = short.groups()[3:]
    elif folder:
        if folder[12] != _machine(machine):
            raise Build2CMakeError(
                f"variant {text!r} is for {folder[12]}; this machine builds "
                f"{_machine(machine)} variants"
            )
        framework, major, minor = folder.group(1, 2, 3) if folder[1] else folder.group(4, 5, 6)
        groups = folder.groups()[6:11]
    else:
        raise Build2CMakeError(
            f"variant {text!r}: use torch<major>.<minor>-<cpu|cuXY|rocmXY>, e.g. torch2.13-cu130, "
            "torch2.13-cpu, torch2.12-rocm71, tvm-ffi0.1-cpu (or a folder name such as "
            f"torch213-cxx11-cu130-{_machine(machine)}-linux)"
        )
    release = (int(major), int(minor))
    tag, cuda_major, cuda_minor, rocm_major, rocm_minor = groups
    if tag == "cpu":
        return HubVariant(release, "cpu", framework=framework)
    if cuda_major is not None:
        return HubVariant(release, "cuda", (int(cuda_major), int(cuda_minor)), framework)
    return HubVariant(release, "rocm", (int(rocm_major), int(rocm_minor)), framework)


def parse_variants(texts: str, machine: str | None = None) -> list[HubVariant]:
    """A comma-separated list of variants, duplicates removed, in the order given."""
    variants: list[HubVariant] = []
    for text in (t.strip() for t in texts.split(",")):
        if text:
            variant = parse_variant(text, machine)
            if variant not in variants:
                variants.append(variant)
    if not variants:
        raise Build2CMakeError("--variants: give at least one, e.g. torch2.13-cpu,torch2.13-cu130")
    return variants


def required_variants(
    machine: str | None = None, framework: str = "torch", matrix: UpstreamMatrix | None = None
) -> list[HubVariant]:
    """Upstream's required variant set for this machine's architecture (the backends this
    build2cmake builds), for torch kernels or (framework "tvm-ffi") Apache TVM FFI kernels;
    from `matrix`, by default the package's."""
    matrix = matrix or upstream_matrix()
    machine = _machine(machine)
    system = matrix.variants.get(f"{machine}-linux")
    if system is None:
        known = sorted(s.removesuffix("-linux") for s in matrix.variants if s.endswith("-linux"))
        raise Build2CMakeError(
            f"no Hub variant list for {machine} (upstream's has: {', '.join(known)}; "
            f"{matrix.describe()})"
        )
    backends = {b: names for b, names in system.items() if b in BUILT_BACKENDS}
    if framework == "tvm-ffi":
        return sorted(
            HubVariant(release, backend, None if backend == "cpu" else toolkit, framework)
            for release in REQUIRED_TVM_FFI
            for backend, toolkits in TVM_FFI_TOOLKITS.items()
            if backend in backends
            for toolkit in toolkits
        )
    return sorted(parse_variant(name, machine) for names in backends.values() for name in names)


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _within(version: tuple[int, int], minver: str | None, maxver: str | None) -> bool:
    """Whether major.minor `version` lies within the bounds, compared at the precision written
    ("2.12" admits 2.12.x; "2" admits 2.x), as upstream compares them."""
    if minver is not None:
        bound = _release(minver)[:2]
        if version[: len(bound)] < bound:
            return False
    if maxver is not None:
        bound = _release(maxver)[:2]
        if version[: len(bound)] > bound:
            return False
    return True


def project_variants(
    project: Project, machine: str | None = None, matrix: UpstreamMatrix | None = None
) -> list[HubVariant]:
    """What `--all` builds for `project`: the required set, limited to its backends, its
    [torch] minver/maxver, [general.cuda] minver/maxver, and (for CUDA) dropping a toolkit that
    every CUDA kernel's cuda-minver excludes (a kernel below its cuda-minver is left out of a
    variant, as upstream does, so a variant with no kernel left is not built). A [tvm-ffi]
    kernel gets tvm-ffi variants (no torch, so no torch bounds)."""
    if project.universal:
        return []
    torch_min = project.torch.minver if project.torch is not None else None
    torch_max = project.torch.maxver if project.torch is not None else None
    chosen = []
    for variant in required_variants(machine, project.framework, matrix):
        if variant.backend not in project.backends:
            continue
        if not _within(variant.torch, torch_min, torch_max):
            continue
        if variant.backend == "cuda" and variant.toolkit is not None:
            if not _within(variant.toolkit, project.cuda_minver, project.cuda_maxver):
                continue
            cuda_kernels = project.kernels_for("cuda")
            if cuda_kernels and all(
                k.cuda_minver is not None and not _within(variant.toolkit, k.cuda_minver, None)
                for k in cuda_kernels
            ):
                continue
        chosen.append(variant)
    return for_project(project, chosen, every=True)


def for_project(
    project: Project, variants: list[HubVariant], *, every: bool = False
) -> list[HubVariant]:
    """`variants` as `project` builds them: a backend that [torch.stable-abi] names builds
    against that stable ABI, so its variants are named after the ABI
    (torch-stable-abi210-cu130-x86_64-linux, as kernel-builder names them and `kernels` loads
    them), one per toolkit: of several torch releases the first listed builds it (with `every`,
    the set `--all` builds, the oldest at or above the ABI: no newer header can slip in), and a
    torch older than the ABI cannot (dropped with `every`, an error for a variant asked for)."""
    chosen: list[HubVariant] = []
    folders: set[str] = set()
    for variant in variants:
        abi = (
            project.torch.stable_abi_for(variant.backend)
            if project.torch is not None and variant.framework == "torch"
            else None
        )
        if abi is not None:
            major, minor = (int(part) for part in abi.split(".")[:2])
            if variant.torch < (major, minor):
                if every:
                    continue
                raise Build2CMakeError(
                    f"--variants {variant.spec}: build.toml's [torch.stable-abi] builds "
                    f"{variant.backend} against torch {abi}'s stable ABI, which torch "
                    f"{variant.torch[0]}.{variant.torch[1]} does not have; name a torch "
                    f"{abi} or newer (`build2cmake list-variants` prints them)"
                )
            variant = dataclasses.replace(variant, stable_abi=(major, minor))
        folder = variant.folder()
        if folder not in folders:
            folders.add(folder)
            chosen.append(variant)
    return chosen
