"""Reading compressed offload bundles (--offload-compress), built by hand after LLVM's documented
format, so these run without a ROCm >= 6.2 compiler (tests/test_rocm6.py reads real ones)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from build2cmake.ground.errors import Build2CMakeError
from build2cmake.toolchains import offload

MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"


def _code_object(kernels: list[str]) -> bytes:
    """Stand-in for an amdgcn ELF code object: only its `<name>.kd` symbol strings are read."""
    return b"\x7fELF-code-object\x00" + b"".join(k.encode() + b".kd\x00" for k in kernels)


def _bundle(entries: list[tuple[str, bytes]]) -> bytes:
    """An uncompressed offload bundle: magic, count, (offset, size, triple) per entry, images."""
    header_size = len(MAGIC) + 8 + sum(24 + len(triple) for triple, _ in entries)
    header = MAGIC + struct.pack("<Q", len(entries))
    images = b""
    for triple, image in entries:
        header += struct.pack("<QQQ", header_size + len(images), len(image), len(triple))
        header += triple.encode()
        images += image
    return header + images


def _ccob(raw: bytes, version: int, method: int, compress: Callable[[bytes], bytes]) -> bytes:
    """A compressed bundle (CCOB) of the given header version around `raw`."""
    data = compress(raw)
    hash_ = struct.pack("<Q", 0x1234_5678_9ABC_DEF0)  # not checked by the reader
    common = b"CCOB" + struct.pack("<HH", version, method)
    if version == 1:
        return common + struct.pack("<I", len(raw)) + hash_ + data
    if version == 2:
        return common + struct.pack("<II", 24 + len(data), len(raw)) + hash_ + data
    return common + struct.pack("<QQ", 32 + len(data), len(raw)) + hash_ + data


def _elf_with_section(path: Path, name: str, content: bytes) -> Path:
    """A minimal 64-bit little-endian ELF file holding one named section (and .shstrtab)."""
    shstrtab = b"\x00" + name.encode() + b"\x00.shstrtab\x00"
    content_offset = 64
    strtab_offset = content_offset + len(content)
    shoff = (strtab_offset + len(shstrtab) + 7) // 8 * 8
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 0xE0, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 3, 2)

    def section(name_offset: int, kind: int, offset: int, size: int) -> bytes:
        return struct.pack("<IIQQQQIIQQ", name_offset, kind, 0, 0, offset, size, 0, 0, 1, 0)

    body = header + content + shstrtab
    body += bytes(shoff - len(body))
    body += bytes(64)  # the null section
    body += section(1, 1, content_offset, len(content))
    body += section(2 + len(name), 3, strtab_offset, len(shstrtab))
    path.write_bytes(body)
    return path


def _gemm_like_bundle(kernel: str) -> bytes:
    return _bundle(
        [
            ("host-x86_64-unknown-linux-gnu-", b""),
            ("hipv4-amdgcn-amd-amdhsa--gfx90a", _code_object([kernel])),
            ("hipv4-amdgcn-amd-amdhsa--gfx942:xnack-", _code_object([kernel, "helper"])),
        ]
    )


def _zstd_compress() -> Callable[[bytes], bytes]:
    module = offload._zstd_module()
    if module is None:
        pytest.skip("no zstd module here (python -m pip install zstandard, or Python >= 3.14)")
    if module.__name__ == "zstandard":
        compressor = module.ZstdCompressor()
        return lambda raw: bytes(compressor.compress(raw))
    return lambda raw: bytes(module.compress(raw))


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("method", ["zlib", "zstd"])
def test_compressed_bundles_are_read_like_plain_ones(
    tmp_path: Path, version: int, method: str
) -> None:
    compress = zlib.compress if method == "zlib" else _zstd_compress()
    number = 0 if method == "zlib" else 1
    first = _ccob(_gemm_like_bundle("gemm_kernel"), version, number, compress)
    second = _ccob(_gemm_like_bundle("scale_kernel"), version, number, compress)
    # clang pads between the bundles of several translation units.
    section = first + bytes(4096 - len(first) % 4096) + second
    library = _elf_with_section(tmp_path / "lib.so", ".hip_fatbin", section)
    bundles = offload.hip_bundles(library)
    assert [b.targets for b in bundles] == [("gfx90a", "gfx942:xnack-")] * 2
    assert bundles[0].kernels == {"gemm_kernel", "helper"}
    assert bundles[1].kernels == {"scale_kernel", "helper"}
    assert offload.rocm_targets(library) == ["gfx90a", "gfx942:xnack-"]
    assert all(b.compressed for b in bundles)
    assert bundles[0].code_objects[1].bundle_id == "hipv4-amdgcn-amd-amdhsa--gfx942:xnack-"


def test_plain_and_compressed_bundles_mix_and_ccob_inside_a_code_object_is_not_a_bundle(
    tmp_path: Path,
) -> None:
    # A code object whose bytes contain "CCOB" must not be taken for a compressed bundle.
    plain = _bundle([("hipv4-amdgcn-amd-amdhsa--gfx940", _code_object(["k1"]) + b"xxCCOBxx")])
    packed = _ccob(
        _bundle([("hipv4-amdgcn-amd-amdhsa--gfx1100", _code_object(["k2"]))]), 3, 0, zlib.compress
    )
    library = _elf_with_section(tmp_path / "lib.so", ".hip_fatbin", plain + packed)
    assert offload.rocm_targets(library) == ["gfx1100", "gfx940"]
    assert [b.compressed for b in offload.hip_bundles(library)] == [False, True]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[:-20], "exceeds the section"),  # truncated
        (lambda b: b[:4] + struct.pack("<H", 9) + b[6:], "compressed bundle version 9"),
        (lambda b: b[:6] + struct.pack("<H", 7) + b[8:], "compression method 7"),
        (lambda b: b[:16] + struct.pack("<Q", 1 << 20) + b[24:], "its header says 1048576"),
        (lambda b: b[:32] + b"garbage" + b[39:], "corrupt zlib"),
    ],
)
def test_damaged_compressed_bundles_are_one_build2cmake_error(
    tmp_path: Path, damage: Callable[[bytes], bytes], message: str
) -> None:
    good = _ccob(_gemm_like_bundle("gemm_kernel"), 3, 0, zlib.compress)
    library = _elf_with_section(tmp_path / "lib.so", ".hip_fatbin", damage(good))
    with pytest.raises(Build2CMakeError, match=message) as raised:
        offload.hip_bundles(library)
    assert str(library) in str(raised.value)


def test_a_compressed_bundle_holding_no_bundle_is_an_error(tmp_path: Path) -> None:
    library = _elf_with_section(
        tmp_path / "lib.so", ".hip_fatbin", _ccob(b"not a bundle", 2, 0, zlib.compress)
    )
    with pytest.raises(offload.OffloadReadError, match="does not hold an offload bundle"):
        offload.rocm_targets(library)
