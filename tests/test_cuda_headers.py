"""The CUDA library headers of a variant's environment are read from the libraries' wheels
without the libraries (#59): by HTTP range requests where the server serves them, whole where it
does not, from a local file directly; each header checked against the wheel's RECORD, and
nothing written outside the include folder. The wheels here are stand-ins made by the test,
served by a loopback HTTP server."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import os
import platform
import random
import re
import stat
import struct
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from build2cmake.builds import cuda_headers
from build2cmake.builds.cuda_headers import Wheel, extract_headers
from build2cmake.ground.errors import Build2CMakeError

HEADERS = {"nvidia/cu13/include/cusparse.h": b"#pragma once\nint cusparse_stub;\n"}
# Incompressible bytes standing in for the library: what range requests leave unread.
LIBRARY = random.Random(0).randbytes(6 << 20)


def make_wheel(
    folder: Path,
    headers: dict[str, bytes] = HEADERS,
    *,
    record: dict[str, bytes] | None = None,
    symlink: str | None = None,
) -> Path:
    """A wheel of nvidia-cusparse's shape: a library, headers under nvidia/cu13/include and a
    RECORD of `record` (default: the headers themselves)."""
    wheel = folder / "nvidia_cusparse-12.6.3.3-py3-none-manylinux_2_17_x86_64.whl"
    lines = []
    for name, data in (record if record is not None else headers).items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{name},sha256={digest},{len(data)}\n")
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("nvidia/cu13/lib/libcusparse.so.12", LIBRARY)
        for name, data in headers.items():
            archive.writestr(name, data)
        if symlink is not None:
            info = zipfile.ZipInfo(symlink)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc/passwd")
        archive.writestr("nvidia_cusparse-12.6.3.3.dist-info/RECORD", "".join(lines))
    return wheel


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files with byte ranges (one range a request), as PyPI's file host does."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def send_head(self):  # type: ignore[no-untyped-def]
        wanted = self.headers.get("Range")
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            self.send_error(404)
            return None
        data = path.read_bytes()
        if wanted is None:
            self.send_response(200)
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            return None if self.command == "HEAD" else _Body(data)
        first, last = map(int, re.fullmatch(r"bytes=(\d+)-(\d+)", wanted).groups())  # type: ignore[union-attr]
        piece = data[first : last + 1]
        self.server.served += len(piece)  # type: ignore[attr-defined]
        self.send_response(206)
        self.send_header("Content-Length", str(len(piece)))
        self.send_header("Content-Range", f"bytes {first}-{last}/{len(data)}")
        self.end_headers()
        return _Body(piece)


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, *_: object) -> bytes:
        data, self.data = self.data, b""
        return data

    def close(self) -> None:
        pass


def serve(folder: Path, handler: type[http.server.SimpleHTTPRequestHandler]) -> Iterator[str]:
    class Handler(handler):  # type: ignore[valid-type,misc]
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(folder), **kwargs)  # type: ignore[arg-type]

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.served = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def ranges(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "served").mkdir()
    yield from serve(tmp_path / "served", RangeHandler)


@pytest.fixture
def whole(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "served").mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    yield from serve(tmp_path / "served", Quiet)


def test_headers_are_read_by_ranges_without_the_library(tmp_path: Path, ranges: str) -> None:
    wheel = make_wheel(tmp_path / "served")
    include = tmp_path / "include"
    count, read = extract_headers(Wheel("nvidia-cusparse", "12.6.3.3", f"{ranges}/{wheel.name}"),
                                  include)  # fmt: skip
    assert count == 1
    assert (include / "cusparse.h").read_bytes() == HEADERS["nvidia/cu13/include/cusparse.h"]
    assert read < len(LIBRARY) // 2, read  # the library's bytes were not fetched
    assert sorted(p.name for p in include.rglob("*")) == ["cusparse.h"]


def test_a_server_without_ranges_gives_the_whole_wheel(tmp_path: Path, whole: str) -> None:
    wheel = make_wheel(tmp_path / "served")
    include = tmp_path / "include"
    count, read = extract_headers(Wheel("nvidia-cusparse", "12.6.3.3", f"{whole}/{wheel.name}"),
                                  include)  # fmt: skip
    assert (count, read) == (1, wheel.stat().st_size)
    assert (include / "cusparse.h").is_file()


@pytest.mark.parametrize(
    "member",
    [
        "nvidia/cu13/include/../../../../escaped.h",
        "nvidia/cu13/include/sub/../../escaped.h",
        "nvidia/cu13/include/a\\..\\escaped.h",
    ],
)
def test_a_header_path_that_leads_out_is_refused(tmp_path: Path, member: str) -> None:
    headers = {**HEADERS, member: b"int planted;\n"}
    wheel = make_wheel(tmp_path, headers)
    include = tmp_path / "out" / "include"
    with pytest.raises(Build2CMakeError, match="not a plain header path"):
        extract_headers(Wheel("nvidia-cusparse", "1", str(wheel)), include)
    assert not any(p.name == "escaped.h" for p in tmp_path.rglob("*"))


def test_a_symlink_member_is_refused(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, symlink="nvidia/cu13/include/passwd.h")
    with pytest.raises(Build2CMakeError, match=r"passwd\.h is not a regular file"):
        extract_headers(Wheel("nvidia-cusparse", "1", str(wheel)), tmp_path / "include")
    assert not (tmp_path / "include" / "passwd.h").exists()


def test_a_header_that_does_not_match_the_wheels_record_is_refused(tmp_path: Path) -> None:
    record = {"nvidia/cu13/include/cusparse.h": b"something else\n"}
    wheel = make_wheel(tmp_path, record=record)
    with pytest.raises(Build2CMakeError, match="does not match the wheel's RECORD"):
        extract_headers(Wheel("nvidia-cusparse", "1", f"file://{wheel}"), tmp_path / "include")


def test_a_header_already_in_the_toolkit_is_kept(tmp_path: Path) -> None:
    include = tmp_path / "include"
    include.mkdir()
    (include / "cusparse.h").write_bytes(b"the toolkit's own\n")
    count, _ = extract_headers(Wheel("n", "1", str(make_wheel(tmp_path))), include)
    assert count == 0 and (include / "cusparse.h").read_bytes() == b"the toolkit's own\n"


@pytest.mark.parametrize("below", ["x.h", "a/b/x.h"])
def test_a_symlinked_folder_in_the_include_folder_is_not_followed(
    tmp_path: Path, below: str
) -> None:
    # Nothing is written or made through it: not the header, not a folder on its way.
    include = tmp_path / "include"
    include.mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", include / "sub")
    wheel = make_wheel(tmp_path, {f"nvidia/cu13/include/sub/{below}": b"int x;\n"})
    with pytest.raises(Build2CMakeError, match="leads out of"):
        extract_headers(Wheel("n", "1", str(wheel)), include)
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_cuda_12_and_13_libraries_are_named_by_one_requirement() -> None:
    assert cuda_headers.requirement((12, 8)) == (
        "cuda-toolkit[cublas,cusparse,cusolver,curand,cufft]==12.8.*"
    )
    assert cuda_headers.library_name("nvidia-cusparse-cu12") == "cusparse"
    assert cuda_headers.library_name("nvidia-cusparse") == "cusparse"
    assert cuda_headers.library_name("nvidia-nvjitlink") is None
    assert cuda_headers.library_name("nvidia-cusparselt-cu13") is None


def test_the_libraries_are_the_ones_torch_itself_requires() -> None:
    # torch 2.14.1 from PyPI (its METADATA's Requires-Dist): cuda-toolkit of its own release.
    torch_214 = [
        "filelock",
        "cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,"
        'nvtx]==13.0.3; platform_system == "Linux"',
        'nvidia-cusparselt-cu13==0.8.1; platform_system == "Linux"',
    ]
    assert cuda_headers.pins(torch_214, (13, 0)) == [
        'cuda-toolkit[cublas,cusparse,cusolver,curand,cufft]==13.0.3; platform_system == "Linux"'
    ]
    # A cu126 build of torch (PyTorch's index, which serves what its torch requires): the
    # libraries pinned one by one.
    torch_cu126 = [
        'nvidia-cublas-cu12==12.6.4.1; platform_system == "Linux" and platform_machine == "x86_64"',
        'nvidia-cusparse-cu12==12.5.4.2; platform_system == "Linux"',
        'nvidia_cusolver_cu12==11.7.1.2; platform_system == "Linux"',
        'nvidia-cudnn-cu12==9.5.1.17; platform_system == "Linux"',
    ]
    assert cuda_headers.pins(torch_cu126, (12, 6)) == [torch_cu126[0], *torch_cu126[1:3]]
    # A CPU torch compiling a CUDA variant requires none: the variant's release decides.
    assert cuda_headers.pins(["filelock", "sympy>=1.13.3"], (13, 2)) == [
        "cuda-toolkit[cublas,cusparse,cusolver,curand,cufft]==13.2.*"
    ]


def stand_in_uv(folder: Path, packages: list[str]) -> str:
    """A program answering `uv pip compile ... --format pylock.toml` as uv would for a
    resolution holding `packages` (each with a manylinux wheel of this machine's)."""
    arch = platform.machine()
    lock = "".join(
        f'[[packages]]\nname = "{name}"\nversion = "1.0"\n[[packages.wheels]]\n'
        f'url = "https://files.invalid/{name.replace("-", "_")}-1.0-py3-none-'
        f'manylinux_2_27_{arch}.whl"\n'
        for name in packages
    )
    (folder / "pylock.toml").write_text(lock)
    uv = folder / "uv"
    uv.write_text(f"#!/bin/sh\ncat > /dev/null\ncat '{folder / 'pylock.toml'}'\n")
    uv.chmod(0o755)
    return str(uv)


@pytest.mark.parametrize("suffix", ["", "-cu12", "-cu13"])
def test_each_library_is_resolved_whatever_its_cuda_release_suffix(
    tmp_path: Path, suffix: str
) -> None:
    # CUDA 13's wheels are nvidia-cublas (and -cu13 on some indexes), CUDA 12's nvidia-cublas-cu12.
    names = [f"nvidia-{library}{suffix}" for library in cuda_headers.LIBRARIES]
    uv = stand_in_uv(tmp_path, ["nvidia-nvjitlink", *names])
    wheels = cuda_headers.resolve(["cuda-toolkit"], [], uv, sys.executable, None)
    assert [w.name for w in wheels] == sorted(names)


def test_a_resolution_without_one_of_the_libraries_is_one_error_naming_it(tmp_path: Path) -> None:
    # Without cuFFT's headers torch's own would not compile: said here, not by the compiler.
    names = [f"nvidia-{library}-cu12" for library in cuda_headers.LIBRARIES if library != "cufft"]
    uv = stand_in_uv(tmp_path, names)
    with pytest.raises(Build2CMakeError, match=r"cuda-toolkit==12\.8\.\* resolved without cufft$"):
        cuda_headers.resolve(["cuda-toolkit==12.8.*"], [], uv, sys.executable, None)


@pytest.mark.parametrize(
    ("index", "wheel", "sent"),
    [
        ("https://u:pw@idx/simple", "https://idx/f.whl", True),
        ("https://u:pw@idx:443/simple", "https://idx/f.whl", True),
        # Basic authentication in clear text, or to another service of the host: not sent.
        ("https://u:pw@idx/simple", "http://idx/f.whl", False),
        ("https://u:pw@idx/simple", "http://idx:443/f.whl", False),
        ("https://u:pw@idx/simple", "https://idx:8443/f.whl", False),
        ("http://u:pw@idx/simple", "https://idx/f.whl", False),
    ],
)
def test_an_indexs_password_goes_only_to_its_scheme_host_and_port(
    index: str, wheel: str, sent: bool
) -> None:
    given = cuda_headers._with_credentials(Wheel("n", "1", wheel), [index])
    assert ("u:pw@" in given.location) == sent, given.location


class Quiet10(http.server.BaseHTTPRequestHandler):
    """An HTTP/1.0 handler that logs nothing."""

    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: object) -> None:
        pass


def running(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """A loopback server of `handler` while the caller runs; the URL of a wheel on it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{WHEEL_NAME}"
    finally:
        server.shutdown()
        server.server_close()


def claiming_server(size: int, tail: bytes) -> Iterator[tuple[str, list[int]]]:
    """A server of a wheel of `size` bytes (so its HEAD says), zeros but for `tail` at its end,
    served by ranges; and the bytes it has sent."""
    sent = [0]

    class Claiming(Quiet10):
        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()

        def do_GET(self) -> None:
            first, last = map(int, self.headers["Range"].split("=")[1].split("-"))
            body = bytearray(last - first + 1)
            start = size - len(tail)
            for at in range(max(first, start), last + 1):
                body[at - first] = tail[at - start]
            sent[0] += len(body)
            self.send_response(206)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    for url in running(Claiming):
        yield url, sent


WHEEL_NAME = "nvidia_cublas-1-py3-none-manylinux_2_28_x86_64.whl"
END = struct.Struct("<4s4H2LH")


def test_a_central_directory_claiming_the_whole_wheel_is_refused_unread(tmp_path: Path) -> None:
    # 128 MiB of wheel whose end record says its central directory is all of it: refused
    # before it is fetched (it was fetched, and kept, whole).
    size = 128 << 20
    tail = END.pack(b"PK\x05\x06", 0, 0, 1, 1, size - END.size, 0, 0)
    for url, sent in claiming_server(size, tail):
        with pytest.raises(Build2CMakeError, match=r"nvidia-cublas 1 .*central directory"):
            extract_headers(Wheel("nvidia-cublas", "1", url), tmp_path / "include")
        assert sent[0] <= 1 << 20, sent[0]


def test_a_zip64_central_directory_of_a_terabyte_is_one_error(tmp_path: Path) -> None:
    # A zip64 end record claiming 1 TiB of central directory (MemoryError, shown as an
    # internal error, before).
    size = 1 << 40
    record = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, 1, 1, size - 98, 0)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, size - 98, 1)
    end = END.pack(b"PK\x05\x06", 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    for url, sent in claiming_server(size, record + locator + end):
        with pytest.raises(Build2CMakeError, match=r"nvidia-cublas 1 .*central directory"):
            extract_headers(Wheel("nvidia-cublas", "1", url), tmp_path / "include")
        assert sent[0] <= 1 << 20, sent[0]


def test_the_bytes_read_for_one_wheel_are_bounded(
    tmp_path: Path, ranges: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = make_wheel(
        tmp_path / "served",
        {f"nvidia/cu13/include/h{i}.h": LIBRARY[i << 20 :][: 1 << 20] for i in range(4)},
    )
    monkeypatch.setattr(cuda_headers, "_FETCH_LIMIT", 2 << 20, raising=False)
    with pytest.raises(Build2CMakeError, match="over 2 MiB"):
        extract_headers(Wheel("nvidia-cusparse", "1", f"{ranges}/{wheel.name}"), tmp_path / "inc")


def dripping_server(declared: int, pieces: int, pause: float) -> Iterator[str]:
    """A server answering with a Content-Length of `declared` and `pieces` bytes, one every
    `pause` seconds, then closing."""

    class Dripping(Quiet10):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(declared))
            self.end_headers()
            for _ in range(pieces):
                try:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(pause)

    yield from running(Dripping)


def test_a_server_sending_a_byte_just_within_the_timeout_is_given_up_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each read waits at most _HTTP_SECONDS; the whole answer at most _REQUEST_SECONDS.
    monkeypatch.setattr(cuda_headers, "_HTTP_SECONDS", 1)
    monkeypatch.setattr(cuda_headers, "_REQUEST_SECONDS", 1, raising=False)
    for url in dripping_server(1000, 40, 0.25):
        started = time.monotonic()
        with pytest.raises(OSError, match="within 1 s"):
            cuda_headers._download(url, io.BytesIO())
        assert time.monotonic() - started < 4


def test_an_answer_shorter_than_its_content_length_is_refused() -> None:
    for url in dripping_server(1000, 16, 0):
        with pytest.raises(OSError, match="16 bytes where its Content-Length says 1000"):
            cuda_headers._download(url, io.BytesIO())
