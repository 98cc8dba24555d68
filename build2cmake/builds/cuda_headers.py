"""The headers of the CUDA libraries torch's own CUDA headers include, for a variant's toolkit.

`ATen/cuda/CUDAContext.h` (through `CUDAContextLight.h`) includes cusparse.h, cublas_v2.h,
cublasLt.h and cusolverDn.h; other headers of torch include curand's and cuFFT's. A toolkit made
of nvcc, the runtime and CCCL from PyPI has none of them, so a kernel including CUDAContext.h
would not compile. The libraries themselves are not needed (torch loads them at run time), and
their wheels are large (cuBLAS alone is over 400 MB), so only the members under `include/` are
read from each wheel: over HTTP by range requests (a zip's central directory names where each
member is), from a local file directly.

Which wheels: those torch itself requires (`cuda-toolkit[cublas,...]==13.0.3`, whose extras pin
each library to the CUDA release, or `nvidia-cusparse-cu12==...` pins), else the variant's
release's `cuda-toolkit[...]==X.Y.*`, resolved by uv against the variant's package sources, so
CUDA 12 (`nvidia-cusparse-cu12`) and CUDA 13 (`nvidia-cusparse`) take the same path. Each
header is checked against the wheel's RECORD and written only inside the target folder. What a
server hands us is bounded: a central directory of at most 8 MiB, 256 MiB fetched by ranges
for one wheel, 15 minutes for one answer, and an answer shorter than its Content-Length is
refused.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import os
import platform
import re
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any, TextIO

from build2cmake.builds.index_settings import redacted, url_request
from build2cmake.builds.variant import NEUTRAL_FOLDER
from build2cmake.ground.errors import Build2CMakeError, printable
from build2cmake.ground.safefs import ProjectFolder

# The libraries whose headers torch's CUDA headers include (cuda-toolkit's extra names).
LIBRARIES = ("cublas", "cusparse", "cusolver", "curand", "cufft")
# Bounds on what a wheel may hand us: headers are small (cuRAND's 17 are 2 MB).
_MEMBER_LIMIT = 16 << 20
_TOTAL_LIMIT = 128 << 20
_MEMBERS_LIMIT = 5_000
_RECORD_LIMIT = 8 << 20
_LOCK_LIMIT = 4 << 20
# A central directory is read whole into memory: a real one is tens of KiB.
_DIRECTORY_LIMIT = 8 << 20
# The most fetched by ranges for one wheel (its directory, RECORD and headers: a few MiB).
_FETCH_LIMIT = 256 << 20
# Each read from the network waits at most _HTTP_SECONDS, each answer _REQUEST_SECONDS in all
# (a server sending a byte just within the first would never end otherwise).
_HTTP_SECONDS = 60
_REQUEST_SECONDS = 900
# A range request reads at least this much, so neighbouring members come in one answer; the
# last few blocks read are kept.
_BLOCK = 1 << 18
_BLOCKS_KEPT = 8
_INCLUDE_MEMBER = re.compile(r"nvidia/[^/]+/include/(.+)")
_SAFE_PART = re.compile(r"[A-Za-z0-9_.+-]+")


def requirement(cuda: tuple[int, int]) -> str:
    """The requirement that pins each library to CUDA release `cuda`."""
    return f"cuda-toolkit[{','.join(LIBRARIES)}]=={cuda[0]}.{cuda[1]}.*"


_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9._-]+)\s*(\[[^\]]*\])?(.*)")


def pins(torch_requires: Sequence[str], cuda: tuple[int, int]) -> list[str]:
    """What picks the libraries' wheels: torch's own requirements of them
    (`cuda-toolkit[...]==13.0.3` from torch 2.14, `nvidia-cusparse-cu12==12.5.4.2` before),
    which an index serving that torch serves too; else (a CPU torch compiling a CUDA variant)
    the cuda-toolkit of release `cuda`."""
    found = []
    for line in torch_requires:
        match = _REQUIREMENT.fullmatch(line)
        if match is None:
            continue
        name = re.sub(r"[-_.]+", "-", match[1]).lower()
        if name == "cuda-toolkit":
            found.append(f"cuda-toolkit[{','.join(LIBRARIES)}]{match[3]}")
        elif library_name(name) is not None:
            found.append(line.strip())
    return found or [requirement(cuda)]


@dataclass(frozen=True)
class Wheel:
    """One library wheel: its package, version and where it is (a URL or a local path)."""

    name: str
    version: str
    location: str


def library_name(package: str) -> str | None:
    """'cusparse' for nvidia-cusparse and nvidia-cusparse-cu12; None for another package."""
    match = re.fullmatch(r"nvidia-([a-z]+)(?:-cu[0-9]+)?", package)
    return match[1] if match and match[1] in LIBRARIES else None


def resolve(
    wanted: list[str], uv_sources: list[str], uv: str, python: str, log: TextIO | None
) -> list[Wheel]:
    """The library wheels `wanted` (pins) names for this machine, as uv resolves them from the
    sources (its pylock.toml names each wheel's URL)."""
    arch = platform.machine()
    # The libraries of release X.Y from the first source that has them: an extra index holding
    # another CUDA release's cuda-toolkit (a mirror of what one torch needs) must not hide PyPI's
    # (uv's own rule stops at the first index that has the package at all).
    strategy = (
        [] if "--index-strategy" in uv_sources else ["--index-strategy", "unsafe-first-match"]
    )
    command = [
        uv, "pip", "compile", "-", "--format", "pylock.toml", "--no-header",
        "--python", python, "--python-platform", f"{arch}-manylinux_2_28", *uv_sources,
        *strategy,
    ]  # fmt: skip
    if log is not None:
        shown = redacted(f"+ {' '.join(command)} <<< {' '.join(wanted)}")
        print(printable(shown), file=log, flush=True)
    try:
        result = subprocess.run(
            command,
            input="".join(w + "\n" for w in wanted),
            capture_output=True,
            text=True,
            cwd=NEUTRAL_FOLDER,
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise Build2CMakeError(f"uv did not resolve {' '.join(wanted)} within 120 s") from None
    if result.returncode != 0 or len(result.stdout) > _LOCK_LIMIT:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1].strip()
        raise Build2CMakeError(
            f"uv could not resolve {printable(' '.join(wanted))} (the CUDA library headers "
            f"torch's CUDA headers include): {printable(redacted(last))[:300]}"
        )
    wheels = []
    for package in _parse_toml(result.stdout).get("packages", []):
        name = package.get("name") if isinstance(package, dict) else None
        if not isinstance(name, str) or library_name(name) is None:
            continue
        location = _wheel_for(package.get("wheels"), arch)
        if location is None:
            raise Build2CMakeError(f"{name} {package.get('version')}: no wheel for {arch} Linux")
        wheels.append(Wheel(name, str(package.get("version")), location))
    missing = set(LIBRARIES) - {library_name(w.name) for w in wheels}
    if missing:
        asked = printable(" ".join(wanted))
        raise Build2CMakeError(f"{asked} resolved without {', '.join(sorted(missing))}")
    return sorted(wheels, key=lambda w: w.name)


def _parse_toml(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib.loads(text)
    import tomlkit

    return dict(tomlkit.parse(text).unwrap())


def _wheel_for(wheels: object, arch: str) -> str | None:
    """The URL (or path) of the manylinux wheel for `arch` in a pylock package's wheel list."""
    if not isinstance(wheels, list):
        return None
    for wheel in wheels:
        if not isinstance(wheel, dict):
            continue
        where = wheel.get("url") or wheel.get("path")
        if not isinstance(where, str):
            continue
        name = urllib.parse.unquote(where.rsplit("/", 1)[-1])
        tags = name.removesuffix(".whl").split("-")[-1].split(".")
        if any(t.startswith(("manylinux", "linux_")) and t.endswith(f"_{arch}") for t in tags):
            return where
    return None


class _RangeFile(io.RawIOBase):
    """A remote file read by HTTP range requests, a block at a time (zipfile seeks in it)."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.position = 0
        self.fetched = 0
        self._blocks: OrderedDict[int, bytes] = OrderedDict()
        with self._open(None) as answer:
            length = answer.headers.get("Content-Length")
            ranges = answer.headers.get("Accept-Ranges", "")
        if length is None or not length.isdigit() or ranges.strip() != "bytes":
            raise _NoRanges(f"{redacted(url)}: the server does not serve byte ranges")
        self.size = int(length)

    def _open(self, first_last: tuple[int, int] | None) -> Any:
        method = "HEAD" if first_last is None else "GET"
        request = url_request(self.url, method)
        if first_last is not None:
            request.add_header("Range", f"bytes={first_last[0]}-{first_last[1]}")
        return urllib.request.urlopen(request, timeout=_HTTP_SECONDS)

    def _block(self, index: int) -> bytes:
        if index in self._blocks:
            self._blocks.move_to_end(index)
            return self._blocks[index]
        first = index * _BLOCK
        last = min(self.size, first + _BLOCK) - 1
        if self.fetched + last - first + 1 > _FETCH_LIMIT:
            raise OSError(f"over {_FETCH_LIMIT >> 20} MiB read from it")
        with self._open((first, last)) as answer:
            if answer.status != 206:
                raise OSError(f"asked for a range, answered {answer.status}")
            piece = io.BytesIO()
            _read_answer(answer, piece, last - first + 1)
        data = piece.getvalue()
        if len(data) != last - first + 1:
            raise OSError(f"a range answer of {len(data)} bytes")
        self.fetched += len(data)
        self._blocks[index] = data
        if len(self._blocks) > _BLOCKS_KEPT:
            self._blocks.popitem(last=False)
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self.position, os.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        count = 0
        while count < len(view) and self.position < self.size:
            block = self._block(self.position // _BLOCK)
            start = self.position % _BLOCK
            piece = block[start : start + len(view) - count]
            view[count : count + len(piece)] = piece
            count += len(piece)
            self.position += len(piece)
        return count


class _NoRanges(OSError):
    """The server answers without byte ranges."""


# The most read from a server that serves no ranges (the whole wheel; cuBLAS's is 0.6 GB).
_WHOLE_LIMIT = 4 << 30


@contextlib.contextmanager
def _opened(location: str) -> Iterator[tuple[IO[bytes], Callable[[], int]]]:
    """The wheel as a seekable file, and how many bytes were read from the network for it: a
    local one opened, a remote one read by ranges, or whole where the server serves none."""
    if location.startswith("file://"):
        location = urllib.request.url2pathname(urllib.parse.urlsplit(location).path)
    if "://" not in location:
        with open(location, "rb") as file:
            yield file, lambda: 0
        return
    if not location.startswith(("https://", "http://")):
        raise Build2CMakeError(f"{printable(redacted(location))}: not an http(s) or file URL")
    try:
        remote = _RangeFile(location)
    except _NoRanges:
        with tempfile.TemporaryFile() as whole:
            size = _download(location, whole)
            yield whole, lambda: size
        return
    with io.BufferedReader(remote, buffer_size=1 << 16) as buffered:
        yield buffered, lambda: remote.fetched


def _download(url: str, into: IO[bytes]) -> int:
    """The whole file at `url` written into `into` (bounded); its size."""
    with urllib.request.urlopen(url_request(url), timeout=_HTTP_SECONDS) as answer:
        size = _read_answer(answer, into, _WHOLE_LIMIT)
    into.seek(0)
    return size


def _read_answer(answer: Any, into: IO[bytes], limit: int) -> int:
    """The body of HTTP `answer` written into `into`; its size. More than `limit` bytes, more
    than _REQUEST_SECONDS in all, or fewer bytes than its Content-Length says is an error."""
    deadline = time.monotonic() + _REQUEST_SECONDS
    size = 0
    # read1 returns what one read from the socket brings, so the deadline is checked at least
    # every _HTTP_SECONDS.
    while chunk := answer.read1(1 << 16):
        size += len(chunk)
        if size > limit:
            raise OSError(f"an answer over {limit >> 20} MiB")
        if time.monotonic() > deadline:
            raise OSError(f"no whole answer within {_REQUEST_SECONDS} s")
        into.write(chunk)
    declared = answer.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) != size:
        raise OSError(f"an answer of {size} bytes where its Content-Length says {declared}")
    return size


_END = struct.Struct("<4s4H2LH")
_END64 = struct.Struct("<4sQ2H2L4Q")
_LOCATOR_SIZE = 20


def _check_directory(file: IO[bytes]) -> None:
    """Refuse a zip whose end record (or zip64 end record) claims a central directory over
    _DIRECTORY_LIMIT bytes or over _MEMBERS_LIMIT members, before zipfile reads it into
    memory whole; a zip without an end record is left to zipfile to refuse."""
    size = file.seek(0, os.SEEK_END)
    tail_size = min(size, _END.size + 0xFFFF)
    file.seek(size - tail_size)
    tail = file.read(tail_size)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + _END.size > len(tail):
        return
    _, _, _, _, members, directory, _, _ = _END.unpack_from(tail, at)
    end = size - tail_size + at
    zip64 = end - _LOCATOR_SIZE - _END64.size
    if (members == 0xFFFF or directory == 0xFFFFFFFF) and zip64 >= 0:
        file.seek(zip64)
        record = file.read(_END64.size + _LOCATOR_SIZE)
        if record[:4] == b"PK\x06\x06" and record[_END64.size :][:4] == b"PK\x06\x07":
            fields = _END64.unpack_from(record)
            members, directory = fields[7], fields[8]
    if directory > _DIRECTORY_LIMIT or members > _MEMBERS_LIMIT:
        raise OSError(
            f"its central directory claims {directory} bytes and {members} members (at most "
            f"{_DIRECTORY_LIMIT >> 20} MiB and {_MEMBERS_LIMIT} are read)"
        )


def _record_hashes(archive: zipfile.ZipFile) -> dict[str, str]:
    """path -> sha256 (urlsafe base64, unpadded) from the wheel's RECORD."""
    records = [n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/RECORD", n)]
    if len(records) != 1:
        raise Build2CMakeError("the wheel has no single RECORD")
    with archive.open(records[0]) as file:
        text = file.read(_RECORD_LIMIT + 1)
    if len(text) > _RECORD_LIMIT:
        raise Build2CMakeError("the wheel's RECORD is over 8 MiB")
    hashes = {}
    for line in text.decode("utf-8", "replace").splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) == 3 and parts[1].startswith("sha256="):
            hashes[parts[0]] = parts[1].removeprefix("sha256=")
    return hashes


def _target_name(member: str) -> PurePosixPath | None:
    """The path under include/ a member is written to, or None when it is not a header of the
    wheel's include folder or names anything but plain parts."""
    match = _INCLUDE_MEMBER.fullmatch(member)
    if match is None:
        return None
    parts = match[1].split("/")
    if any(not _SAFE_PART.fullmatch(p) or p in (".", "..") for p in parts):
        raise Build2CMakeError(f"{printable(member)}: not a plain header path")
    return PurePosixPath(*parts)


def extract_headers(wheel: Wheel, include: Path) -> tuple[int, int]:
    """Write the wheel's include/ members into `include` (a file already there is kept);
    returns (headers written, bytes read from the wheel's location)."""
    where = f"{wheel.name} {wheel.version} ({printable(redacted(wheel.location))})"
    try:
        with _opened(wheel.location) as (file, fetched):
            _check_directory(file)
            archive = zipfile.ZipFile(file)
            written = _extract(archive, include, where)
            read = fetched()
    except (
        OSError,
        zipfile.BadZipFile,
        EOFError,
        ValueError,
        NotImplementedError,
        RuntimeError,
    ) as error:
        why = printable(redacted(str(error)))
        raise Build2CMakeError(f"{where}: cannot read its headers: {why}") from None
    return written, read


def _extract(archive: zipfile.ZipFile, include: Path, where: str) -> int:
    members = archive.infolist()
    if len(members) > _MEMBERS_LIMIT:
        raise Build2CMakeError(f"{where}: over {_MEMBERS_LIMIT} members")
    hashes = _record_hashes(archive)
    include.mkdir(parents=True, exist_ok=True)
    with ProjectFolder(include) as folder:
        return _write_headers(archive, members, hashes, folder, where)


def _write_headers(
    archive: zipfile.ZipFile,
    members: list[zipfile.ZipInfo],
    hashes: dict[str, str],
    folder: ProjectFolder,
    where: str,
) -> int:
    include = folder.path
    written = total = 0
    for member in members:
        target = _target_name(member.filename)
        if target is None or member.is_dir():
            continue
        if (member.external_attr >> 16) & 0o170000 not in (0, 0o100000):
            raise Build2CMakeError(f"{where}: {printable(member.filename)} is not a regular file")
        with archive.open(member) as source:
            data = source.read(_MEMBER_LIMIT + 1)
        total += len(data)
        if len(data) > _MEMBER_LIMIT or total > _TOTAL_LIMIT:
            raise Build2CMakeError(f"{where}: its headers are over the size limit")
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        if hashes.get(member.filename) != digest:
            raise Build2CMakeError(
                f"{where}: {printable(member.filename)} does not match the wheel's RECORD"
            )
        # Through real folders of `include` only: a symlink on the way is refused before any
        # folder is made through it. A file already there is the toolkit's own copy.
        try:
            written += folder.write_new(target, data)
        except Build2CMakeError as error:
            raise Build2CMakeError(
                f"{where}: {printable(member.filename)} leads out of {include} ({error})"
            ) from None
    return written


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(parts: urllib.parse.SplitResult) -> tuple[str, str, int] | None:
    """Scheme, host and port (the scheme's default when the URL names none); None when the
    URL names no host or a port that is not one."""
    try:
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return None
    return None if not parts.hostname or port is None else (parts.scheme, parts.hostname, port)


def _with_credentials(wheel: Wheel, uv_sources: list[str]) -> Wheel:
    """`wheel` with the user:password@ of the index at its scheme, host and port, where uv's
    pylock left it out (uv does not write credentials into a lock): never to an http wheel of
    an https index (basic authentication in clear text) or to another port of its host."""
    parts = urllib.parse.urlsplit(wheel.location)
    origin = _origin(parts)
    if parts.scheme not in _DEFAULT_PORTS or parts.username is not None or origin is None:
        return wheel
    for source in uv_sources:
        index = urllib.parse.urlsplit(source)
        if index.username is not None and _origin(index) == origin:
            location = urllib.parse.urlunsplit(parts._replace(netloc=index.netloc))
            return Wheel(wheel.name, wheel.version, location)
    return wheel


def install(
    wanted: list[str],
    include: Path,
    *,
    uv_sources: list[str],
    uv: str,
    python: str,
    log: TextIO | None,
) -> None:
    """Put the headers of the CUDA libraries torch's CUDA headers include, of the wheels
    `wanted` (pins) names, into `include`, saying on `log` which wheels they came from and how
    much was read."""
    include.mkdir(parents=True, exist_ok=True)
    for wheel in resolve(wanted, uv_sources, uv, python, log):
        wheel = _with_credentials(wheel, uv_sources)
        count, read = extract_headers(wheel, include)
        fetched = f"{read >> 10} KiB read from" if read else "from"
        source = redacted(wheel.location)
        line = f"{count} headers of {wheel.name} {wheel.version} ({fetched} {source})"
        print(printable(line), file=log or sys.stdout, flush=True)
