"""Read the GPU code objects a built HIP extension carries (clang offload bundles).

clang embeds one offload bundle per HIP translation unit in the `.hip_fatbin` section of the
linked library. A bundle starts with the magic `__CLANG_OFFLOAD_BUNDLE__`, then a little-endian
u64 entry count and, per entry, u64 offset (from the bundle start), u64 size, u64 triple length
and the triple, e.g. `hipv4-amdgcn-amd-amdhsa--gfx90a`. The amdgcn entries are ELF code objects
whose kernels appear as `<name>.kd` symbols.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
_COMPRESSED_MAGIC = b"CCOB"
_KERNEL_DESCRIPTOR = re.compile(rb"([A-Za-z_][A-Za-z0-9_.$]*)\.kd\x00")


class OffloadReadError(Exception):
    """The file is not an ELF library with readable offload bundles."""


@dataclass(frozen=True)
class CodeObject:
    """One GPU code object: the target it was compiled for and the kernels in it."""

    target: str  # e.g. "gfx90a" or "gfx90a:xnack-"
    kernels: tuple[str, ...]


@dataclass(frozen=True)
class OffloadBundle:
    """The device code of one translation unit."""

    code_objects: tuple[CodeObject, ...]

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(c.target for c in self.code_objects)

    @property
    def kernels(self) -> frozenset[str]:
        return frozenset(k for c in self.code_objects for k in c.kernels)


def elf_section(path: Path, name: str) -> bytes | None:
    """The bytes of section `name` of a 64-bit little-endian ELF file, or None if absent."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise OffloadReadError(f"{path}: not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(index: int) -> tuple[int, int, int]:
        base = shoff + index * shentsize
        (name_offset,) = struct.unpack_from("<I", data, base)
        offset, size = struct.unpack_from("<QQ", data, base + 0x18)
        return name_offset, offset, size

    _, strtab_offset, strtab_size = header(shstrndx)
    strtab = data[strtab_offset : strtab_offset + strtab_size]
    for index in range(shnum):
        name_offset, offset, size = header(index)
        end = strtab.find(b"\x00", name_offset)
        if strtab[name_offset:end].decode("ascii", "replace") == name:
            return data[offset : offset + size]
    return None


def hip_bundles(path: Path) -> list[OffloadBundle]:
    """Every offload bundle in the `.hip_fatbin` section of a linked library (empty if none)."""
    section = elf_section(path, ".hip_fatbin")
    if section is None:
        return []
    if _COMPRESSED_MAGIC in section and _MAGIC not in section:
        raise OffloadReadError(
            f"{path}: compressed offload bundles (--offload-compress) are not read by build2cmake"
        )
    bundles = []
    start = section.find(_MAGIC)
    while start != -1:
        bundles.append(_read_bundle(section, start))
        start = section.find(_MAGIC, start + len(_MAGIC))
    return bundles


def _read_bundle(section: bytes, start: int) -> OffloadBundle:
    (count,) = struct.unpack_from("<Q", section, start + len(_MAGIC))
    cursor = start + len(_MAGIC) + 8
    code_objects = []
    for _ in range(count):
        offset, size, triple_len = struct.unpack_from("<QQQ", section, cursor)
        cursor += 24
        triple = section[cursor : cursor + triple_len].decode("ascii", "replace")
        cursor += triple_len
        if "amdgcn" not in triple:
            continue  # the (empty) host entry
        image = section[start + offset : start + offset + size]
        kernels = sorted({m.group(1).decode() for m in _KERNEL_DESCRIPTOR.finditer(image)})
        code_objects.append(CodeObject(triple.split("--", 1)[-1], tuple(kernels)))
    return OffloadBundle(tuple(code_objects))


def rocm_targets(path: Path) -> list[str]:
    """The GPU targets any code object in the library was compiled for, sorted."""
    return sorted({t for bundle in hip_bundles(path) for t in bundle.targets})
