"""Which package indexes a variant build asks when the command line names none: the ones the
user already configured for uv or for pip.

Precedence, first that says anything wins, as a whole:
1. `--index-url`, `--extra-index-url`, `--find-links` on the command line (not read here);
2. uv's own settings: `UV_DEFAULT_INDEX`, `UV_INDEX_URL`, `UV_INDEX`, `UV_EXTRA_INDEX_URL`,
   `UV_FIND_LINKS`, or an index key in the user's or the system's uv.toml (or `UV_CONFIG_FILE`).
   uv reads them itself (it runs in a neutral folder, so a project's uv.toml is not among them);
   nothing is passed;
3. pip's: `PIP_INDEX_URL`, `PIP_EXTRA_INDEX_URL`, `PIP_FIND_LINKS`, then pip's configuration
   files, as pip itself merges them (`pip config list`, run from a neutral folder: its user,
   site and system files, and `PIP_CONFIG_FILE` when that is an absolute path; a relative one
   would name a file of whatever folder the build runs in, the cloned project). pip merges every
   index's releases, so they are passed to uv with `--index-strategy unsafe-best-match`, pip's
   rule. Only the index settings are carried; pip's constraints, certificates and trusted hosts
   are not.

A URL is shown with its `user:password@` part replaced by `***@` (`redacted`).
"""

from __future__ import annotations

import ast
import base64
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions

from build2cmake.builds.variant import NEUTRAL_FOLDER

UV_VARIABLES = (
    "UV_DEFAULT_INDEX",
    "UV_INDEX_URL",
    "UV_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS",
)
_UV_KEYS = ("index-url", "extra-index-url", "index", "default-index", "find-links")
_CONFIG_LIMIT = 1 << 20
_PIP_SECONDS = 30
# From `://` to the last `@` before the path: a password may hold an unencoded `@` or a quote.
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/?#\r\n]*@")


def redacted(text: str) -> str:
    """`text` with the user:password@ part of every URL in it replaced by ***@."""
    return _USERINFO.sub(r"\1***@", text)


def url_request(url: str, method: str = "GET") -> urllib.request.Request:
    """A request for `url`; a user:password@ in it (an index of the user's that needs them)
    sent as HTTP basic authentication, as uv and pip send it, to that URL only: a redirect
    (to another host, or from https to http) goes without it."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return urllib.request.Request(url, method=method)
    netloc = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    request = urllib.request.Request(urllib.parse.urlunsplit(parts._replace(netloc=netloc)),
                                     method=method)  # fmt: skip
    user = urllib.parse.unquote(parts.username)
    password = urllib.parse.unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    request.add_unredirected_header("Authorization", f"Basic {token}")
    return request


@dataclass(frozen=True)
class Configured:
    """The index settings found, and where (for messages)."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    origin: str = ""
    by_uv: bool = False  # uv's own settings: uv reads them, nothing is passed


def configured(
    environ: Mapping[str, str] | None = None, python: str = sys.executable
) -> Configured:
    """uv's index settings if it has any, else pip's, else nothing (PyPI)."""
    env = os.environ if environ is None else environ
    uv = _uv_settings(env)
    if uv is not None:
        return uv
    return _pip_settings(env, python)


def _uv_settings(env: Mapping[str, str]) -> Configured | None:
    named = [v for v in UV_VARIABLES if env.get(v, "").strip()]
    if named:
        index = env.get("UV_DEFAULT_INDEX") or env.get("UV_INDEX_URL")
        shown = ", ".join(f"{v}={redacted(env[v].strip())}" for v in named)
        return Configured(index_url=index, origin=f"uv's settings: {shown}", by_uv=True)
    for path in _uv_files(env):
        data = _read_toml(path)
        pip_table = data.get("pip")
        tables: list[dict[str, Any]] = [data, pip_table if isinstance(pip_table, dict) else {}]
        keys = sorted({k for t in tables for k in t if k in _UV_KEYS})
        if keys:
            return Configured(origin=f"uv's settings: {', '.join(keys)} in {path}", by_uv=True)
    return None


def _uv_files(env: Mapping[str, str]) -> list[Path]:
    """The uv.toml files uv reads outside a project (UV_CONFIG_FILE alone when set)."""
    if env.get("UV_NO_CONFIG", "").strip() not in ("", "0", "false"):
        return []
    if env.get("UV_CONFIG_FILE"):
        path = Path(env["UV_CONFIG_FILE"])
        return [path] if path.is_absolute() else []
    home = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    system = (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep)
    candidates = [Path(home) / "uv" / "uv.toml"]
    candidates += [Path(d) / "uv" / "uv.toml" for d in system if d]
    candidates.append(Path("/etc/uv/uv.toml"))
    return [p for p in candidates if p.is_absolute() and p.is_file()]


def _read_toml(path: Path) -> dict[str, Any]:
    """A uv.toml, bounded; {} when it cannot be read (uv itself reports a bad one)."""
    try:
        with open(path, "rb") as file:
            raw = file.read(_CONFIG_LIMIT + 1)
        if len(raw) > _CONFIG_LIMIT:
            return {}
        if sys.version_info >= (3, 11):
            import tomllib

            return tomllib.loads(raw.decode("utf-8"))
        return dict(tomlkit.parse(raw.decode("utf-8")).unwrap())
    except (OSError, ValueError, RecursionError, tomlkit.exceptions.TOMLKitError):
        return {}


def _pip_settings(env: Mapping[str, str], python: str) -> Configured:
    """pip's index settings, merged by pip itself (`pip config list`), the environment's over
    the `install` section's over the `global` section's."""
    child = dict(env)
    config_file = child.get("PIP_CONFIG_FILE")
    if config_file and config_file != os.devnull and not os.path.isabs(config_file):
        del child["PIP_CONFIG_FILE"]
    try:
        result = subprocess.run(
            [python, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            cwd=NEUTRAL_FOLDER,
            env=child,
            timeout=_PIP_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return Configured()
    values: dict[str, str] = {}
    for line in result.stdout.splitlines():
        name, sep, value = line.partition("=")
        if not sep:
            continue
        try:
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            continue
        if isinstance(parsed, str):
            values[name.strip()] = parsed
    used: list[str] = []

    def setting(key: str) -> str | None:
        variable = f"PIP_{key.upper().replace('-', '_')}"
        sections = ((":env:", variable), ("install", f"install.{key}"), ("global", f"global.{key}"))
        for section, shown in sections:
            value = values.get(f"{section}.{key}", "").strip()
            if value:
                used.append(shown)
                return value
        return None

    index = setting("index-url")
    extras = tuple((setting("extra-index-url") or "").split())
    # A relative folder would be found from the folder the build runs in: the project's.
    links = tuple(
        link for link in (setting("find-links") or "").split()
        if "://" in link or os.path.isabs(link)
    )  # fmt: skip
    if not (index or extras or links):
        return Configured()
    return Configured(index, extras, links, origin=f"pip's settings: {', '.join(used)}")
