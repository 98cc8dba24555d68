"""Sources that several kernels of one backend list, compiled once per extension (#59).

Each kernel is its own object library; a source two of them list would be compiled into both
and linked twice (`multiple definition of ...`). As kernel-builder does (its kernels add their
settings to the source's own properties on one target), such a source is compiled once, for
everything the kernels listing it ask for: the union of their capabilities (CUDA) or archs
(ROCm), their include folders and dependencies, and their flags one kernel after the other.

Here the sources are grouped, once, at generate time: each kernel keeps the sources only it
lists (and every header it lists: headers are not compiled), and each set of kernels that share
sources gets one unit, declared in the generated CMake right after the last of its kernels. What
each kernel asks for is only known at configure (TORCH_CUDA_ARCH_LIST, what the compiler
supports), so the CMake module of the backend makes the union there; a kernel left out of the
build leaves the unit too. Where the kernels' flags contradict each other (one macro given two
values), the unit carries a warning naming the source and both kernels, which the configure
prints when both are built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from build2cmake.config.model import Kernel, Project

# Not compiled (build2cmake_kernel_library's list), so a header listed by several kernels is
# harmless: config.schema.HEADER_SUFFIXES.
from build2cmake.config.schema import HEADER_SUFFIXES

# Sources compiled as the backend's GPU language, whose macros come from cuda-flags/hip-flags;
# other compiled sources are C++, whose macros come from cxx-flags.
_GPU_SUFFIXES = frozenset((".cu", ".hip"))
_MACRO = re.compile(r"-([DU])([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?", re.DOTALL)


@dataclass(frozen=True)
class SharedUnit:
    """Sources compiled once for several kernels of one backend."""

    target: str
    kernels: tuple[Kernel, ...]
    sources: tuple[PurePosixPath, ...]
    # One line each: a macro the kernels give different values for one of these sources.
    conflicts: tuple[str, ...]


@dataclass(frozen=True)
class BackendLayout:
    """How one backend's kernel sources are split between the kernels and the shared units."""

    own: dict[str, tuple[PurePosixPath, ...]]
    units: tuple[SharedUnit, ...]

    def own_sources(self, kernel: Kernel) -> tuple[PurePosixPath, ...]:
        """The sources `kernel` compiles itself: those no other kernel lists, and its headers."""
        return self.own[kernel.name]

    def units_after(self, kernel: Kernel) -> tuple[SharedUnit, ...]:
        """The shared units whose kernels are all declared once `kernel` is."""
        return tuple(unit for unit in self.units if unit.kernels[-1].name == kernel.name)


def _flags_for(kernel: Kernel, source: PurePosixPath) -> tuple[str, ...]:
    """The flags of `kernel` that reach `source`'s compile and can define macros."""
    if source.suffix in _GPU_SUFFIXES:
        return kernel.cuda_flags if kernel.backend == "cuda" else kernel.hip_flags
    return kernel.cxx_flags


def _macros(flags: tuple[str, ...]) -> dict[str, str | None]:
    """Each macro the flags define (its value, "1" when none is given) or undefine (None); the
    last flag of a name wins, as in the compilers."""
    macros: dict[str, str | None] = {}
    for flag in flags:
        match = _MACRO.fullmatch(flag)
        if match:
            kind, name, value = match.groups()
            macros[name] = None if kind == "U" else ("1" if value is None else value)
    return macros


def _shown(name: str, value: str | None) -> str:
    return f"-U{name}" if value is None else f"-D{name}={value}"


def _conflicts(kernels: tuple[Kernel, ...], source: PurePosixPath) -> list[str]:
    """A line for each kernel giving a macro another value than the one in force for `source`
    after the kernels before it. The unit's flags are their union, each flag once where it first
    appears (build2cmake_union_kernels, as CMake keeps a target's repeated options), so a flag
    an earlier kernel gave changes nothing where it comes again."""
    lines = []
    seen: dict[str, tuple[Kernel, str | None]] = {}
    given: set[str] = set()
    for kernel in kernels:
        flags = _flags_for(kernel, source)
        changed = _macros(tuple(f for f in flags if f not in given))
        given.update(flags)
        for name, value in _macros(flags).items():
            before = seen.get(name)
            if name in changed:
                seen[name] = (kernel, changed[name])
            if before is None or before[1] == value:
                continue
            first, first_value = before
            winner = seen[name][0]
            wins = (
                f"the last, {kernel.name}'s, wins"
                if winner is kernel
                else f"{winner.name}'s wins: a flag given again is kept once, where it first "
                "appears"
            )
            lines.append(
                f"{source}, listed by kernels {first.name} and {kernel.name}, is compiled "
                f"once with both kernels' flags, and they contradict each other: "
                f"{first.name} has {_shown(name, first_value)}, {kernel.name} "
                f"{_shown(name, value)} ({wins})"
            )
    return lines


def backend_layout(project: Project, backend: str) -> BackendLayout:
    """Split the sources of `backend`'s kernels: each compiled source listed by several kernels
    goes to the unit of exactly those kernels (in build.toml's order)."""
    kernels = project.kernels_for(backend)
    listed_by: dict[PurePosixPath, list[Kernel]] = {}
    for kernel in kernels:
        for source in dict.fromkeys(kernel.sources):
            if source.suffix not in HEADER_SUFFIXES:
                listed_by.setdefault(source, []).append(kernel)
    groups: dict[tuple[str, ...], list[PurePosixPath]] = {}
    for source, owners in listed_by.items():
        if len(owners) > 1:
            groups.setdefault(tuple(k.name for k in owners), []).append(source)
    shared = {source for sources in groups.values() for source in sources}
    by_name = {kernel.name: kernel for kernel in kernels}
    units = []
    for index, (names, sources) in enumerate(groups.items(), start=1):
        members = tuple(by_name[name] for name in names)
        conflicts = [line for source in sources for line in _conflicts(members, source)]
        units.append(
            SharedUnit(
                target=f"build2cmake_shared_{backend}_{index}",
                kernels=members,
                sources=tuple(sources),
                conflicts=tuple(conflicts),
            )
        )
    own = {kernel.name: tuple(s for s in kernel.sources if s not in shared) for kernel in kernels}
    return BackendLayout(own=own, units=tuple(units))
