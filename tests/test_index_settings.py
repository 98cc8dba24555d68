"""`build --variants` asks the package index the user configured for pip or uv when the command
line names none (#60): PIP_INDEX_URL, pip's configuration files, uv's own settings; a
project's pip.conf never steers it, a credential in an index URL is never shown, and an index
that cannot be reached is one line naming it and --index-url.

The index is a loopback HTTP server started by the test, holding a stand-in torch (a wheel of
metadata only) of a release no real index has, so that where it resolved from is certain.
"""

from __future__ import annotations

import base64
import http.server
import os
import shutil
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from build2cmake.builds.index_settings import configured, redacted, url_request
from build2cmake.builds.variant_env import PackageSources, check_torch_release, configured_sources
from build2cmake.config.hub_variants import parse_variant
from build2cmake.ground.errors import Build2CMakeError
from tests.conftest import FIXTURES
from tests.test_torch_releases import have_uv, stand_in_wheel

pytestmark = pytest.mark.skipif(not have_uv(), reason="no uv (pip install uv)")

# A release no real index serves: found only on the loopback index.
RELEASE = "2.31.0+cpu"
VARIANT = "torch2.31-cpu"


class Index:
    """A loopback HTTP server serving a simple index (PEP 503) with one stand-in torch, and the
    paths it was asked for."""

    def __init__(self, root: Path) -> None:
        files = root / "files"
        files.mkdir(parents=True)
        wheel = stand_in_wheel(files, "torch", RELEASE)
        page = root / "simple" / "torch"
        page.mkdir(parents=True)
        (page / "index.html").write_text(f'<a href="../../files/{wheel.name}">{wheel.name}</a>\n')
        self.asked: list[str] = []
        self.authorization: list[str | None] = []
        asked, authorization = self.asked, self.authorization

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: object, **kwargs: object) -> None:
                super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

            def log_message(self, format: str, *args: object) -> None:
                asked.append(self.path)
                authorization.append(self.headers.get("Authorization"))

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, userinfo: str = "") -> str:
        return f"http://{userinfo}127.0.0.1:{self.server.server_address[1]}/simple"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    served = Index(tmp_path / "index")
    yield served
    served.close()


def clean_environment(tmp_path: Path) -> dict[str, str]:
    """This process's environment without pip's or uv's settings, with a home, XDG config and
    build2cmake cache of the test's own (the machine's /etc/pip.conf may still add indexes)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env["HOME"] = str(tmp_path / "home")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "home" / ".config")
    env["BUILD2CMAKE_CACHE"] = str(tmp_path / "cache")
    env["UV_CACHE_DIR"] = str(tmp_path / "uv-cache")
    return env


def build(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "build2cmake", "build", "build.toml", "--variants", VARIANT],
        capture_output=True, text=True, cwd=root, env=env, check=False, timeout=600,
    )  # fmt: skip


def project(tmp_path: Path) -> Path:
    root = tmp_path / "scale_add"
    shutil.copytree(FIXTURES / "scale_add", root)
    return root


def resolved_from(root: Path) -> str:
    log = (root / "build" / f"cmake-{VARIANT}.log").read_text()
    (line,) = [x for x in log.splitlines() if x.startswith(f"torch {RELEASE} from ")]
    return line


def test_pips_index_url_variable_is_asked_and_its_password_never_shown(
    tmp_path: Path, index: Index
) -> None:
    root = project(tmp_path)
    env = {**clean_environment(tmp_path), "PIP_INDEX_URL": index.url("me:s3cret@")}
    result = build(root, env)
    shown = index.url("***@")
    assert f"package sources: --index-url {shown}" in result.stdout, result.stdout
    assert "(from pip's settings: PIP_INDEX_URL" in result.stdout
    # The stand-in torch resolved from the loopback index (and was installed from it); the
    # compile then fails, as a stand-in of metadata only has no CMake package.
    assert resolved_from(root).startswith(f"torch {RELEASE} from --index-url {shown}")
    assert "/simple/torch/" in index.asked
    assert any(path.startswith("/files/torch-2.31.0") for path in index.asked)
    everything = (
        result.stdout
        + result.stderr
        + "".join(p.read_text(errors="replace") for p in (root / "build").glob("*.log"))
    )
    everything += "".join(p.read_text() for p in (tmp_path / "cache").rglob("*.json"))
    assert "s3cret" not in everything


def test_pips_user_config_file_is_asked_and_a_projects_pip_conf_is_not(
    tmp_path: Path, index: Index
) -> None:
    root = project(tmp_path)
    env = clean_environment(tmp_path)
    user_config = Path(env["XDG_CONFIG_HOME"]) / "pip" / "pip.conf"
    user_config.parent.mkdir(parents=True)
    user_config.write_text(f"[global]\nindex-url = {index.url()}\n")
    # The clone's own pip.conf, named relatively (the build runs in the project folder):
    # pip would read it from there; a variant build must not.
    (root / "pip.conf").write_text("[global]\nindex-url = http://127.0.0.1:9/planted\n")
    env["PIP_CONFIG_FILE"] = "pip.conf"
    result = build(root, env)
    assert f"package sources: --index-url {index.url()}" in result.stdout, result.stdout
    assert "global.index-url" in result.stdout
    assert "planted" not in result.stdout + result.stderr
    assert resolved_from(root).startswith(f"torch {RELEASE} from --index-url {index.url()}")


def test_an_unreachable_configured_index_is_one_line_naming_it_and_index_url(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    # Port 9 of the loopback address: nothing listens there.
    env = {**clean_environment(tmp_path), "PIP_INDEX_URL": "http://me:s3cret@127.0.0.1:9/simple"}
    result = build(root, env)
    assert result.returncode == 1
    (failed,) = [line for line in result.stdout.splitlines() if ": FAILED: " in line]
    assert failed.startswith(
        f"[1/1] {VARIANT}: FAILED: the package index cannot be reached: --index-url "
        "http://***@127.0.0.1:9/simple (from pip's settings: PIP_INDEX_URL"
    ), failed
    assert "; name one that can with --index-url URL (" in failed
    assert "s3cret" not in result.stdout + result.stderr
    # Nothing was made for it.
    assert not (tmp_path / "cache" / "envs").exists() or not any(
        p.is_dir() for p in (tmp_path / "cache" / "envs").iterdir()
    )


def test_the_command_line_comes_first_then_uvs_settings_then_pips(tmp_path: Path) -> None:
    env = clean_environment(tmp_path)
    pip_env = {**env, "PIP_INDEX_URL": "https://pip.example/simple"}
    given = PackageSources(index_url="https://given.example/simple")
    assert configured_sources(given) is given
    # uv's own variable: uv reads it itself; pip's is not passed beside it.
    uv = configured({**pip_env, "UV_DEFAULT_INDEX": "https://u:p@uv.example/simple"})
    assert uv.by_uv and uv.origin == "uv's settings: UV_DEFAULT_INDEX=https://***@uv.example/simple"
    # A uv.toml of the user's with an index key counts as uv's settings too.
    uv_toml = Path(env["XDG_CONFIG_HOME"]) / "uv" / "uv.toml"
    uv_toml.parent.mkdir(parents=True)
    uv_toml.write_text('index-url = "https://uv.example/simple"\n')
    assert configured(pip_env).by_uv
    uv_toml.unlink()
    pip = configured(pip_env)
    assert not pip.by_uv and pip.index_url == "https://pip.example/simple"
    assert pip.origin.startswith("pip's settings: PIP_INDEX_URL")


def file_index(folder: Path, version: str) -> str:
    """A local simple index holding one stand-in torch."""
    (folder / "files").mkdir(parents=True)
    wheel = stand_in_wheel(folder / "files", "torch", version)
    page = folder / "simple" / "torch"
    page.mkdir(parents=True)
    (page / "index.html").write_text(f'<a href="../../files/{wheel.name}">{wheel.name}</a>\n')
    return f"file://{folder / 'simple'}"


def test_pips_indexes_are_compared_as_pip_compares_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pip takes the best release of every index; uv's own rule would stop at the first index
    # that has torch at all (the extra one, with 2.30 only), and find no 2.31.
    for name, value in clean_environment(tmp_path).items():
        monkeypatch.setenv(name, value)
    for name in [n for n in os.environ if n.startswith(("PIP_", "UV_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_INDEX_URL", file_index(tmp_path / "main", RELEASE))
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", file_index(tmp_path / "extra", "2.30.0+cpu"))
    sources = configured_sources(PackageSources())
    assert sources.best_match and sources.origin.startswith(
        "pip's settings: PIP_INDEX_URL, PIP_EXTRA_INDEX_URL"
    )
    release = check_torch_release(parse_variant(VARIANT), sources)
    # uv names the index it took torch from: the main one, not the extra one asked first.
    assert (release.version, release.index) == (RELEASE, os.environ["PIP_INDEX_URL"])


def test_an_index_with_a_password_is_listed_with_it_and_shown_without(index: Index) -> None:
    # The releases named when a series does not exist are read from the index itself: with
    # the URL's user and password as HTTP basic authentication, as uv sends them.
    sources = PackageSources(index_url=index.url("me:s3cret@"), origin="pip's settings: test")
    with pytest.raises(Build2CMakeError) as error:
        check_torch_release(parse_variant("torch2.30-cpu"), sources)
    assert str(error.value) == (
        f"no torch 2.30 release on --index-url {index.url('***@')} (from pip's settings: test); "
        f"the torch releases there: {RELEASE}"
    )
    token = base64.b64encode(b"me:s3cret").decode()
    assert f"Basic {token}" in index.authorization


def test_a_credential_in_any_url_is_redacted() -> None:
    text = "see https://me:pw@host/simple and http://token@h:8/x, not mail a@b"
    assert redacted(text) == "see https://***@host/simple and http://***@h:8/x, not mail a@b"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # An unencoded @ in the password: everything up to the host's @ is hidden.
        ("https://alice:p@ss@idx/simple", "https://***@idx/simple"),
        ("--index-url https://a:b@c@d@idx:8?x=@y", "--index-url https://***@idx:8?x=@y"),
        # Quotes in the user or password, as a command line shows them.
        ("'https://a\"b:p'w@idx/simple'", "'https://***@idx/simple'"),
        ("https://u:pw@h1 https://v:pw2@h2/s", "https://***@h1 https://***@h2/s"),
    ],
)
def test_the_whole_user_and_password_are_redacted_whatever_they_hold(text: str, shown: str) -> None:
    assert redacted(text) == shown


def test_an_index_password_does_not_follow_a_redirect_to_another_host() -> None:
    # pip and uv drop basic authentication on a redirect to another host; a loopback index on
    # 127.0.0.1 redirects to a server on 127.0.0.2.
    seen: list[tuple[str, str | None]] = []

    class Other(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(("other", self.headers.get("Authorization")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    other = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Other)

    class Redirecting(Other):
        def do_GET(self) -> None:
            seen.append(("index", self.headers.get("Authorization")))
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.2:{other.server_address[1]}/x")
            self.send_header("Content-Length", "0")
            self.end_headers()

    index = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    for server in (other, index):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://me:s3cret@127.0.0.1:{index.server_address[1]}/simple/torch/"
        with urllib.request.urlopen(url_request(url), timeout=10) as answer:
            answer.read()
    finally:
        for server in (other, index):
            server.shutdown()
            server.server_close()
    token = base64.b64encode(b"me:s3cret").decode()
    assert seen == [("index", f"Basic {token}"), ("other", None)]


def test_an_index_page_nested_past_pythons_parser_is_one_error_naming_it() -> None:
    """A hostile index's PEP 691 page of deep nesting (RecursionError in json) is refused with
    one error naming the page, not an internal error."""
    from build2cmake.builds.variant_env import _links_of

    class Deep(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"[" * 200_000 + b"]" * 200_000
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Deep)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page = f"http://127.0.0.1:{server.server_address[1]}/simple/torch/"
        with pytest.raises(Build2CMakeError, match="project page is not valid JSON") as error:
            _links_of(page, package_page=True)
        assert page in str(error.value)
    finally:
        server.shutdown()
        server.server_close()
