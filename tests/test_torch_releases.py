"""Which torch release a variant gets is asked of the package index (through uv) before anything
is downloaded: a release the index does not serve, or a CUDA variant whose torch release was built
with another CUDA, is one line naming what exists.

The index here is a local PEP 503 folder of small stand-in wheels (metadata only), so the tests
need no network: torch 2.13.0+cpu (its build in its local version), torch 2.14.1 (no local
version; its CUDA 13.0 shows in what it requires, as PyPI's wheels) and the cuda-toolkit it
requires.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from build2cmake.builds.variant_env import (
    PackageSources,
    TorchRelease,
    check_torch_release,
    existing_releases,
    uv_program,
)
from build2cmake.config.hub_variants import parse_variant
from build2cmake.ground.errors import Build2CMakeError
from tests.conftest import FIXTURES


def have_uv() -> bool:
    try:
        uv_program()
    except Build2CMakeError:
        return False
    return True


pytestmark = pytest.mark.skipif(not have_uv(), reason="no uv (pip install uv)")


def stand_in_wheel(folder: Path, name: str, version: str, *requires: str) -> Path:
    """A wheel holding only its metadata, for this machine's Linux."""
    tag = f"py3-none-manylinux_2_28_{platform.machine()}"
    dist = name.replace("-", "_")
    wheel = folder / f"{dist}-{version}-{tag}.whl"
    info = f"{dist}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"{info}/METADATA", metadata)
        archive.writestr(
            f"{info}/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n",
        )
        archive.writestr(f"{info}/RECORD", "")
    return wheel


@pytest.fixture
def index(tmp_path: Path) -> PackageSources:
    """A local simple index (PEP 503 pages) with torch 2.13.0+cpu, 2.14.1 and cuda-toolkit."""
    files = tmp_path / "files"
    files.mkdir()
    wheels = {
        "torch": [
            stand_in_wheel(files, "torch", "2.13.0+cpu"),
            stand_in_wheel(
                files, "torch", "2.14.1",
                'cuda-toolkit[cudart]==13.0.3; platform_system == "Linux"',
            ),
        ],
        "cuda-toolkit": [stand_in_wheel(files, "cuda-toolkit", "13.0.3")],
    }  # fmt: skip
    simple = tmp_path / "simple"
    for project, built in wheels.items():
        page = simple / project
        page.mkdir(parents=True)
        links = "".join(f'<a href="../../files/{w.name}">{w.name}</a>\n' for w in built)
        (page / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    return PackageSources(index_url=f"file://{simple}")


def test_a_release_of_the_series_is_found_with_its_build(index: PackageSources) -> None:
    cpu = check_torch_release(parse_variant("torch2.13-cpu"), index)
    assert cpu == TorchRelease("2.13.0+cpu", "cpu")
    # PyPI-style: no local version, the CUDA release read from what the wheel requires.
    cuda = check_torch_release(parse_variant("torch2.14-cu130"), index)
    assert cuda == TorchRelease("2.14.1", "cuda", (13, 0))
    # A CPU torch compiles a CUDA variant named after nvcc: allowed.
    assert check_torch_release(parse_variant("torch2.13-cu132"), index).backend == "cpu"


def test_a_series_the_index_does_not_serve_is_one_line_naming_what_it_does(
    index: PackageSources,
) -> None:
    with pytest.raises(Build2CMakeError) as error:
        check_torch_release(parse_variant("torch2.99-cpu"), index)
    assert str(error.value) == (
        f"no torch 2.99 release on --index-url {index.index_url}; the torch releases there: "
        "2.14.1, 2.13.0+cpu"
    )


def test_a_cuda_variant_whose_torch_release_has_another_cuda_is_one_line(
    index: PackageSources,
) -> None:
    with pytest.raises(Build2CMakeError) as error:
        check_torch_release(parse_variant("torch2.14-cu126"), index)
    assert str(error.value) == (
        f"torch 2.14.1 (from --index-url {index.index_url}) is a CUDA 13.0 build, which makes "
        "torch2.14-cu130 (kernels loads the variant named after torch's CUDA release); a cu126 "
        "build of torch 2.14 is on PyTorch's index: --index-url "
        "https://download.pytorch.org/whl/cu126"
    )


def test_find_links_folders_are_listed_beside_the_index(
    index: PackageSources, tmp_path: Path
) -> None:
    links = tmp_path / "links"
    links.mkdir()
    stand_in_wheel(links, "torch", "2.15.0+cpu")
    # Another machine's wheel and a pre-release are not releases for this one.
    (links / "torch-2.16.0-cp311-cp311-win_amd64.whl").write_bytes(b"")
    (links / f"torch-2.17.0rc1-cp311-cp311-manylinux_2_28_{platform.machine()}.whl").write_bytes(
        b""
    )
    sources = PackageSources(index.index_url, find_links=(str(links),))
    assert (
        existing_releases(sources) == "; the torch releases there: 2.15.0+cpu, 2.14.1, 2.13.0+cpu"
    )
    assert check_torch_release(parse_variant("torch2.15-cpu"), sources).version == "2.15.0+cpu"


def test_build_refuses_a_release_that_does_not_exist_before_making_an_environment(
    index: PackageSources, tmp_path: Path
) -> None:
    root = tmp_path / "scale_add"
    shutil.copytree(FIXTURES / "scale_add", root)
    cache = tmp_path / "cache"
    result = subprocess.run(
        [sys.executable, "-m", "build2cmake", "build", str(root / "build.toml"),
         "--variants", "torch2.99-cpu,torch2.14-cu126", "--index-url", str(index.index_url)],
        capture_output=True, text=True, env={**os.environ, "BUILD2CMAKE_CACHE": str(cache)},
        check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(
        r"\[1/2\] torch2\.99-cpu: FAILED: no torch 2\.99 release on --index-url \S+; the torch "
        r"releases there: 2\.14\.1, 2\.13\.0\+cpu \(\d+ s\)",
        result.stdout,
    ), result.stdout
    assert "[2/2] torch2.14-cu126: FAILED: torch 2.14.1 (from --index-url" in result.stdout
    assert result.stdout.rstrip().endswith("0 of 2 variants built")
    # Nothing was installed: no environment, no uv pip install in the logs.
    assert not (cache / "envs").exists() or not any(p.is_dir() for p in (cache / "envs").iterdir())
    for variant in ("torch2.99-cpu", "torch2.14-cu126"):
        assert "uv pip install" not in (root / "build" / f"cmake-{variant}.log").read_text()


def test_an_index_that_does_not_answer_is_said_as_such_not_as_a_missing_release() -> None:
    # Port 9 of the loopback address: nothing listens there, the connection is refused.
    sources = PackageSources(index_url="http://127.0.0.1:9/simple")
    with pytest.raises(Build2CMakeError) as error:
        check_torch_release(parse_variant("torch2.13-cpu"), sources)
    assert str(error.value).startswith(
        "the package index cannot be reached: --index-url http://127.0.0.1:9/simple ("
    )
    assert str(error.value).endswith("; name one that can with --index-url URL")
    assert "Connection refused" in str(error.value)


def test_an_index_without_torch_says_so(tmp_path: Path) -> None:
    (tmp_path / "simple").mkdir()
    sources = PackageSources(index_url=f"file://{tmp_path / 'simple'}")
    with pytest.raises(Build2CMakeError) as error:
        check_torch_release(parse_variant("torch2.13-cpu"), sources)
    assert str(error.value) == (
        f"no torch 2.13 release on --index-url {sources.index_url}; it has no torch wheel for "
        f"{platform.machine()} Linux"
    )


def test_a_hostile_file_name_on_the_index_never_reaches_the_message(
    index: PackageSources, tmp_path: Path
) -> None:
    assert index.index_url
    page = Path(index.index_url.removeprefix("file://")) / "torch" / "index.html"
    evil = f"torch-2.20.0+x%1b%5b2J%0a-cp311-cp311-manylinux_2_28_{platform.machine()}.whl"
    page.write_text(page.read_text().replace("</body>", f'<a href="{evil}">x</a></body>'))
    listed = existing_releases(index)
    assert listed == "; the torch releases there: 2.14.1, 2.13.0+cpu"
    assert "\x1b" not in listed and "\n" not in listed


@pytest.mark.parametrize(
    "reply",
    [
        b"garbage\r\n\r\n",  # no HTTP status line
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc",  # a cut-off chunk
        b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 120 + b"\r\n",  # too many headers
    ],
)
def test_an_index_answering_broken_http_is_one_line_not_an_internal_error(reply: bytes) -> None:
    """http.client's own errors are no OSErrors: each is the line that the releases could not
    be listed (a loopback server that answers once, then closes)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def answer() -> None:
        connection, _ = server.accept()
        connection.recv(65536)
        connection.sendall(reply)
        connection.close()

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        port = server.getsockname()[1]
        said = existing_releases(PackageSources(index_url=f"http://127.0.0.1:{port}/simple"))
    finally:
        thread.join(timeout=10)
        server.close()
    assert said.startswith(" (the releases there could not be listed: "), said
