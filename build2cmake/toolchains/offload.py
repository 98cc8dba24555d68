"""Read the GPU code objects a built HIP extension carries (clang offload bundles).

clang embeds one offload bundle per HIP translation unit in the `.hip_fatbin` section of the
linked library. A bundle starts with the magic `__CLANG_OFFLOAD_BUNDLE__`, then a little-endian
u64 entry count and, per entry, u64 offset (from the bundle start), u64 size, u64 triple length
and the triple, e.g. `hipv4-amdgcn-amd-amdhsa--gfx90a`. The amdgcn entries are ELF code objects
whose kernels appear as `<name>.kd` symbols.

With `--offload-compress` (ROCm >= 6.2) each bundle is stored compressed instead (LLVM's
ClangOffloadBundler documentation): the magic `CCOB`, u16 version, u16 method (0 zlib, 1 zstd),
then for version 1 a u32 uncompressed size, for version 2 a u32 total size (header included) and
a u32 uncompressed size, for version 3 the same two as u64; then a u64 hash, then the compressed
bundle. zlib ships with Python; zstd comes from `compression.zstd` (Python >= 3.14) or the
`zstandard` package.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from build2cmake.ground.errors import Build2CMakeError

_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
_COMPRESSED_MAGIC = b"CCOB"
_KERNEL_DESCRIPTOR = re.compile(rb"([A-Za-z_][A-Za-z0-9_.$]*)\.kd\x00")


class OffloadReadError(Build2CMakeError):
    """The file is not an ELF library with readable offload bundles."""


@dataclass(frozen=True)
class CodeObject:
    """One GPU code object: the target it was compiled for and the kernels in it."""

    target: str  # e.g. "gfx90a" or "gfx90a:xnack-"
    kernels: tuple[str, ...]
    image: bytes = field(default=b"", repr=False, compare=False)  # the ELF code object
    bundle_id: str = ""  # the entry's full id, e.g. "hipv4-amdgcn-amd-amdhsa--gfx942"


@dataclass(frozen=True)
class OffloadBundle:
    """The device code of one translation unit."""

    code_objects: tuple[CodeObject, ...]
    compressed: bool = False  # stored as a CCOB (--offload-compress)

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
    """Every offload bundle in the `.hip_fatbin` section of a linked library (empty if none).

    Compressed bundles (`--offload-compress`) are decompressed and read like the others.
    """
    section = elf_section(path, ".hip_fatbin")
    if section is None:
        return []
    bundles: list[OffloadBundle] = []
    cursor = 0
    while True:
        plain = section.find(_MAGIC, cursor)
        packed = section.find(_COMPRESSED_MAGIC, cursor)
        if plain == -1 and packed == -1:
            return bundles
        try:
            if packed != -1 and (plain == -1 or packed < plain):
                raw, cursor = _decompress(section, packed)
                if not raw.startswith(_MAGIC):
                    raise OffloadReadError("a compressed bundle does not hold an offload bundle")
                bundle, _ = _read_bundle(raw, 0)
                bundle = OffloadBundle(bundle.code_objects, compressed=True)
            else:
                # Skip past the whole bundle, so bytes inside its code objects are not
                # mistaken for the next bundle's magic.
                bundle, cursor = _read_bundle(section, plain)
        except (struct.error, ValueError) as error:  # truncated or inconsistent headers
            raise OffloadReadError(
                f"{path}: unreadable offload bundle in .hip_fatbin: {error}"
            ) from None
        except OffloadReadError as error:
            raise OffloadReadError(f"{path}: .hip_fatbin: {error}") from None
        bundles.append(bundle)


def _decompress(section: bytes, start: int) -> tuple[bytes, int]:
    """The bundle a compressed (CCOB) bundle at `start` holds, and the offset just past it."""
    version, method = struct.unpack_from("<HH", section, start + 4)
    if version == 1:
        (size,) = struct.unpack_from("<I", section, start + 8)
        total, data_start = None, start + 20
    elif version == 2:
        total, size = struct.unpack_from("<II", section, start + 8)
        data_start = start + 24
    elif version == 3:
        total, size = struct.unpack_from("<QQ", section, start + 8)
        data_start = start + 32
    else:
        raise OffloadReadError(f"compressed bundle version {version} (known: 1, 2, 3)")
    end = len(section) if total is None else start + total
    if end > len(section) or end < data_start:
        raise OffloadReadError(f"compressed bundle size {total} exceeds the section")
    payload = section[data_start:end]
    if method == 0:
        inflater = zlib.decompressobj()
        try:
            raw = inflater.decompress(payload, size + 1)
        except zlib.error as error:
            raise OffloadReadError(f"corrupt zlib-compressed bundle: {error}") from None
        used = len(payload) - len(inflater.unused_data) - len(inflater.unconsumed_tail)
    elif method == 1:
        raw, used = _zstd_decompress(payload, size)
    else:
        raise OffloadReadError(f"compression method {method} (known: 0 zlib, 1 zstd)")
    if len(raw) != size:
        raise OffloadReadError(f"compressed bundle holds {len(raw)} bytes, its header says {size}")
    # Version 1 has no total size: the compressed stream's own end is the bundle's end.
    return raw, end if total is not None else data_start + used


def _zstd_module() -> ModuleType | None:
    try:
        from compression import zstd  # type: ignore[import-not-found, unused-ignore]

        return zstd  # type: ignore[no-any-return, unused-ignore]
    except ImportError:
        pass
    try:
        import zstandard  # type: ignore[import-not-found, unused-ignore]

        return zstandard  # type: ignore[no-any-return, unused-ignore]
    except ImportError:
        return None


def _zstd_decompress(payload: bytes, size: int) -> tuple[bytes, int]:
    """One zstd frame from the start of payload: its content and how many bytes it took."""
    module = _zstd_module()
    if module is None:
        raise OffloadReadError(
            "the bundle is zstd-compressed (--offload-compress) and this Python cannot "
            "decompress zstd: python -m pip install zstandard (or use Python >= 3.14)"
        )
    try:
        if module.__name__ == "zstandard":
            reader = module.ZstdDecompressor().decompressobj()
            raw = reader.decompress(payload)
            return raw, len(payload) - len(reader.unused_data)
        reader = module.ZstdDecompressor()
        raw = reader.decompress(payload, max_length=size + 1)
        return raw, len(payload) - len(reader.unused_data)
    except Exception as error:  # each zstd module has its own error type
        raise OffloadReadError(f"corrupt zstd-compressed bundle: {error}") from None


def _read_bundle(data: bytes, start: int) -> tuple[OffloadBundle, int]:
    """The bundle at `start` and the offset just past its last entry."""
    (count,) = struct.unpack_from("<Q", data, start + len(_MAGIC))
    cursor = start + len(_MAGIC) + 8
    end = cursor
    code_objects = []
    for _ in range(count):
        offset, size, triple_len = struct.unpack_from("<QQQ", data, cursor)
        cursor += 24
        triple = data[cursor : cursor + triple_len].decode("ascii", "replace")
        cursor += triple_len
        if start + offset + size > len(data):
            raise OffloadReadError(f"bundle entry {triple!r} runs past the end of its data")
        end = max(end, cursor, start + offset + size)
        if "amdgcn" not in triple:
            continue  # the (empty) host entry
        image = data[start + offset : start + offset + size]
        kernels = sorted({m.group(1).decode() for m in _KERNEL_DESCRIPTOR.finditer(image)})
        code_objects.append(CodeObject(triple.split("--", 1)[-1], tuple(kernels), image, triple))
    return OffloadBundle(tuple(code_objects)), max(end, cursor)


def rocm_targets(path: Path) -> list[str]:
    """The GPU targets any code object in the library was compiled for, sorted."""
    return sorted({t for bundle in hip_bundles(path) for t in bundle.targets})
