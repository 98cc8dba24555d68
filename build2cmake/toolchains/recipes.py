"""The toolchains build2cmake can make (recipes), and the sources their ROCm comes from.

A recipe says what goes into one toolchain: a Debian root filesystem holding one ROCm release
(HIP compiler, runtime, device libraries, the ROCm libraries kernels include), the Python tools
a generated project builds with (in a venv at /opt/b2c-venv) and the variables its commands
need. Its stamp (`.b2c-stamp` in the toolchain's folder) is the recipe written out: a toolchain
whose stamp differs was made from another recipe, and `install` makes it again. The stamp's
text, the folder names (`rocm-chroot-<suite>`) and the version record (`.b2c-rocm-version`) are
those the chroots of scripts/rocm-chroot.sh (before 2026-11-28) were made with, so the ones on a
machine are reused as they are.

A source is where the ROCm packages come from, one kind of package archive (`Source`). Debian's
suites (`DebianArchive`: sid, trixie, experimental) are the one implemented; they are what this
machine reaches. Two more fit the same shape, for a user who reaches them:

- AMD's apt repository (`repo.radeon.com/rocm/apt/<release>`, one per ROCm release 6.0-7.2):
  a base system of the suite AMD builds for (Ubuntu noble or jammy) plus AMD's repository as a
  second archive, packages `rocm-hip-sdk` and `rocwmma-dev` (complete, unlike Debian's), the
  ROCm prefix `/opt/rocm-X.Y.Z`, and the version from `/opt/rocm/.info/version`.
- AMD's release tarballs (TheRock's `therock-dist-linux-<family>-<version>.tar.gz`): a Debian
  base system with a C++ toolchain, the tarball unpacked into `/opt/rocm-X.Y.Z` by a customize
  step, and the version from its `.info/version`.

Both would be a `Source` whose `bootstrap` returns their archives, packages and version command;
everything after (the venv, the stamp, the store, the runs) is shared.
"""

from __future__ import annotations

import os
import re
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from build2cmake.ground.errors import Build2CMakeError

# Where a toolchain's venv lives: the script's path, kept so that existing toolchains are reused.
VENV = "/opt/b2c-venv"
DEFAULT_DEBIAN_MIRROR = "http://deb.debian.org/debian"
MIRROR_VARIABLE = "BUILD2CMAKE_DEBIAN_MIRROR"
# Recipe names users type: rocm-<major>.<minor>; a recipe's packages are plain Debian names.
_NAME = re.compile(r"[a-z][a-z0-9.-]{0,40}")
_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.*-]{0,80}")
_PIP_PACKAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,60}==[0-9][0-9A-Za-z.+-]{0,30}")


@dataclass(frozen=True)
class Bootstrap:
    """What mmdebstrap is told to make one toolchain's root filesystem."""

    suite: str  # the suite the base system comes from (sid)
    mirrors: tuple[str, ...]  # mmdebstrap's mirror arguments: URLs or sources.list lines
    packages: tuple[str, ...]  # installed on top of the base system
    preferences: str  # APT preferences (which packages come from a second archive); "" none
    dpkg_options: tuple[str, ...]  # e.g. force-overwrite
    # A shell command run in the finished root filesystem (chroot) that prints the version of
    # its ROCm, e.g. dpkg-query's version of libamdhip64-dev.
    version_command: str


class Source(Protocol):
    """Where a toolchain's ROCm packages come from: one kind of package archive."""

    @property
    def label(self) -> str:
        """In words, for `toolchain list`: "Debian sid + experimental"."""
        ...

    def unreachable(self, timeout: float = 10.0) -> str | None:
        """Why the archive cannot be used from here (one line), or None when it answers."""
        ...

    def bootstrap(self, packages: Sequence[str], pinned: Sequence[str]) -> Bootstrap:
        """The root filesystem holding `packages`, the `pinned` ones (apt patterns) taken from
        the source's second archive."""
        ...


@dataclass(frozen=True)
class DebianArchive:
    """A Debian suite, and optionally a second one (experimental) that pinned packages come
    from, on the mirror $BUILD2CMAKE_DEBIAN_MIRROR (default deb.debian.org)."""

    suite: str
    second: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: os.environ, compare=False, repr=False)

    @property
    def mirror(self) -> str:
        """The mirror's URL."""
        return (self.env.get(MIRROR_VARIABLE) or DEFAULT_DEBIAN_MIRROR).rstrip("/")

    @property
    def label(self) -> str:
        return f"Debian {self.suite}" + (f" + {self.second}" if self.second else "")

    def unreachable(self, timeout: float = 10.0) -> str | None:
        url = f"{self.mirror}/dists/{self.suite}/Release"
        if not re.fullmatch(r"(https?|file)://[^\s'\"\\]+", self.mirror):
            return f"{MIRROR_VARIABLE}={self.mirror!r} is not an http(s):// or file:// URL"
        try:
            request = urllib.request.Request(url, method="HEAD")
            with urllib.request.urlopen(request, timeout=timeout):
                return None
        except (OSError, ValueError) as error:
            return (
                f"the Debian mirror {self.mirror} does not answer ({url}: {error}); set "
                f"{MIRROR_VARIABLE} to a mirror you can reach"
            )

    def bootstrap(self, packages: Sequence[str], pinned: Sequence[str]) -> Bootstrap:
        preferences = ""
        mirrors: tuple[str, ...] = (self.mirror,)
        if pinned:
            if self.second is None:
                raise Build2CMakeError(f"{self.label}: no second suite to pin packages to")
            # Priority 990: these come from the second suite; every other package of it keeps
            # its default priority (1 for experimental) and is never installed.
            preferences = (
                f"Package: {' '.join(pinned)}\nPin: release a={self.second}\nPin-Priority: 990\n"
            )
            mirrors = (
                f"deb {self.mirror} {self.suite} main",
                f"deb {self.mirror} {self.second} main",
            )
        return Bootstrap(
            suite=self.suite,
            mirrors=mirrors,
            packages=tuple(packages),
            preferences=preferences,
            dpkg_options=(),
            version_command="dpkg-query -W -f='${Version}' libamdhip64-dev",
        )


@dataclass(frozen=True)
class Recipe:
    """One toolchain build2cmake can make."""

    name: str  # what users type: rocm-7.2
    release: tuple[int, int] | None  # the ROCm major.minor it must hold (None: a test recipe)
    suite: str  # its name in the stamp and the folder (scripts/rocm-chroot.sh's: sid, rocm72)
    source: Source
    packages: tuple[str, ...]
    pinned: tuple[str, ...] = ()  # apt patterns taken from the source's second archive
    dpkg_options: tuple[str, ...] = ()
    pip_packages: tuple[str, ...] = ()  # installed into the venv at VENV
    env: tuple[tuple[str, str], ...] = ()  # variables of every command run inside
    summary: str = ""  # what it holds, in words
    # Files every made toolchain of this recipe has (relative to its root): checked by
    # `toolchain list` and before a build runs there.
    tools: tuple[str, ...] = ()
    variant: str = "apt"  # mmdebstrap's --variant

    def __post_init__(self) -> None:
        # Recipe text reaches mmdebstrap's hooks (run by a shell): plain names only.
        assert _NAME.fullmatch(self.name) and _NAME.fullmatch(self.suite), self.name
        for package in (*self.packages, *self.pinned):
            assert _PACKAGE.fullmatch(package), package
        for package in self.pip_packages:
            assert _PIP_PACKAGE.fullmatch(package), package
        for option in self.dpkg_options:
            assert re.fullmatch(r"[a-z-]{1,40}", option), option

    @property
    def folder(self) -> str:
        """Its folder in the store."""
        return f"rocm-chroot-{self.suite}"

    @property
    def has_torch(self) -> bool:
        """Whether the suite's own torch is installed (the venv sees it)."""
        return "python3-torch" in self.packages

    def bootstrap(self) -> Bootstrap:
        """What mmdebstrap makes for this recipe."""
        made = self.source.bootstrap(self.packages, self.pinned)
        return Bootstrap(
            suite=made.suite,
            mirrors=made.mirrors,
            packages=made.packages,
            preferences=made.preferences,
            dpkg_options=(*made.dpkg_options, *self.dpkg_options),
            version_command=made.version_command,
        )

    def stamp(self) -> str:
        """The recipe written out, as `.b2c-stamp` holds it."""
        dpkg = " ".join(f"--dpkgopt={o}" for o in self.dpkg_options)
        text = (
            f"suite={self.suite}\napt={' '.join(self.packages)}\n"
            f"pip={' '.join(self.pip_packages)}\ndpkg={dpkg}\n"
        )
        return text + self.bootstrap().preferences


# What every ROCm toolchain holds. hipcc pulls in its clang-N, llvm-N (llvm-objdump),
# clang-tools-N (clang-offload-bundler) and rocm-device-libs-N. librocthrust-dev (with
# librocprim-dev) and libhipcub-dev are the headers a ROCm build of torch ships with: torch's
# headeronly/util/complex.h includes <thrust/complex.h> under a HIP compiler, so any HIP source
# including torch needs them. hipBLASLt and rocWMMA (headers only; Debian has it in experimental
# alone, and incomplete) are libraries kernels link or include; hipSPARSELt is only in
# experimental, built against ROCm 7's runtime, so only rocm-7.2 has it; rocSHMEM is in no suite.
_HIP = ("hipcc", "libamdhip64-dev", "libamd-comgr-dev", "libhsa-runtime-dev")
_ROCM_LIBRARIES = (
    "librocthrust-dev", "librocprim-dev", "libhipcub-dev", "libhipblaslt-dev", "librocwmma-dev",
)  # fmt: skip
_WITH_TORCH = (
    *_HIP, "python3-torch", "libtorch-dev", *_ROCM_LIBRARIES, "python3-dev", "python3-venv",
    "g++", "ccache", "ca-certificates",
)  # fmt: skip
# Debian trixie has neither hipBLASLt nor rocWMMA (the list above, which named them, could not be
# installed from trixie since they were added to it).
_TRIXIE = tuple(p for p in _WITH_TORCH if p not in ("libhipblaslt-dev", "librocwmma-dev"))
# Pinned: what generated projects build with (scikit-build-core, cmake, ninja), what build2cmake
# imports, and uv (build --variants puts each variant's torch into a uv environment).
_PIP = (
    "scikit-build-core==0.11.6", "cmake==3.31.6", "ninja==1.11.1.4", "tomlkit==0.13.2",
    "jinja2==3.1.6", "pytest==8.3.5", "uv==0.13.9",
)  # fmt: skip
_TOOLS = ("usr/bin/hipcc", "opt/b2c-venv/bin/cmake", "opt/b2c-venv/bin/uv")
_ROCM72_PACKAGES = (
    *_HIP, *_ROCM_LIBRARIES, "libhipsparselt-dev", "python3-dev", "python3-venv", "g++", "g++-15",
    "ccache", "ca-certificates",
)  # fmt: skip
# experimental's ROCm 7.2 stack (priority 990); every other package of experimental stays at
# its default priority 1 and is never installed.
_ROCM72_PINNED = (
    "hipcc", "libamdhip64*", "libhiprtc*", "libamd-comgr*", "libhsa-runtime*", "rocm-*",
    "librocthrust*", "librocprim*", "libhipcub*", "libhipblaslt*", "libhipsparselt*",
    "librocwmma*", "libroctx64*",
)  # fmt: skip

RECIPES: tuple[Recipe, ...] = (
    Recipe(
        name="rocm-5.7",
        release=(5, 7),
        suite="trixie",
        source=DebianArchive("trixie"),
        packages=_TRIXIE,
        pip_packages=_PIP,
        summary="Debian trixie: ROCm 5.7.1, clang-17, CPU python3-torch; no hipBLASLt, rocWMMA",
        tools=_TOOLS,
    ),
    Recipe(
        name="rocm-6.4",
        release=(6, 4),
        suite="sid",
        source=DebianArchive("sid", "experimental"),
        packages=_WITH_TORCH,
        pinned=("librocwmma-dev",),
        pip_packages=_PIP,
        summary="Debian sid: ROCm 6.4.3, hipcc 7, clang-21, CPU python3-torch; rocWMMA from "
        "experimental",
        tools=_TOOLS,
    ),
    Recipe(
        name="rocm-7.2",
        release=(7, 2),
        suite="rocm72",
        source=DebianArchive("sid", "experimental"),
        # No Debian torch: `build --variants` installs each variant's torch with uv. g++-15:
        # where PyPI's torch (a CUDA build) stands in for a ROCm one, torch's CMake package has
        # nvcc 13.0 compile CMake's CUDA probe, and nvcc 13.0 refuses sid's g++ 16 headers.
        packages=_ROCM72_PACKAGES,
        pinned=_ROCM72_PINNED,
        # experimental's libhipsparselt-dev and libhipblaslt-dev both ship /usr/include/origami
        # (hipBLASLt's origami headers, the same upstream): the second overwrites the first.
        dpkg_options=("force-overwrite",),
        pip_packages=_PIP,
        env=(("CUDAHOSTCXX", "/usr/bin/g++-15"),),
        summary="Debian sid + experimental: ROCm 7.2.4, hipcc, clang-22, rocThrust, hipBLASLt, "
        "hipSPARSELt, rocWMMA; no torch (uv installs each variant's)",
        tools=_TOOLS,
    ),
)


def recipe(name: str, recipes: Sequence[Recipe] = RECIPES) -> Recipe:
    """The recipe called `name` (rocm-7.2), or one error naming the known ones."""
    for candidate in recipes:
        if candidate.name == name:
            return candidate
    raise Build2CMakeError(
        f"no toolchain {name!r}: build2cmake makes {', '.join(r.name for r in recipes)}"
    )


def recipe_of_release(
    release: tuple[int, int], recipes: Sequence[Recipe] = RECIPES
) -> Recipe | None:
    """The recipe holding ROCm `release` (major, minor), if there is one."""
    return next((r for r in recipes if r.release == release), None)


def install_hint(release: tuple[int, int] | None = None) -> str:
    """The command that makes a toolchain of `release` (default: the newest recipe), or why
    there is none."""
    chosen = newest() if release is None else recipe_of_release(release)
    if chosen is not None:
        return f"build2cmake toolchain install {chosen.name}"
    assert release is not None
    return (
        f"no build2cmake toolchain holds ROCm {release[0]}.{release[1]} (toolchains: "
        f"{', '.join(r.name for r in RECIPES)})"
    )


def newest(recipes: Sequence[Recipe] = RECIPES) -> Recipe:
    """The recipe of the newest ROCm release."""
    return max((r for r in recipes if r.release is not None), key=lambda r: r.release or (0, 0))
