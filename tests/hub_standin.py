"""A local stand-in for the Hugging Face Hub's HTTP API, for the upload tests.

It is NOT the Hub: it answers the few endpoints huggingface_hub calls for an upload (create a
repository, list refs and files, create a branch, preupload, commit) and for reading a
repository at a branch or commit (`lock`: the revision's commit, the file tree, each file's
bytes), from an in-memory store, and records every request, with each commit's files and their
bytes, for the tests to check. Every branch state has a commit id (the SHA-1 of its files, so the
same files give the same id); a revision is a branch name or such an id. Point huggingface_hub
at it with HF_ENDPOINT=<StandInHub.url>.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

_KINDS = "(models|datasets|spaces|kernels)"


@dataclass
class Commit:
    """One commit the stand-in received."""

    repo: str
    revision: str
    create_pr: bool
    message: str
    added: dict[str, bytes] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)


class StandInHub:
    """The stand-in server: start() on a free local port, stop() when done."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.created: list[dict[str, Any]] = []
        self.branches_created: list[tuple[str, str]] = []
        self.commits: list[Commit] = []
        # repo -> branch -> path -> bytes
        self.files: dict[str, dict[str, dict[str, bytes]]] = {}
        self.pr_count = 0
        self.validated_yaml: list[str] = []
        # commit id -> the files of the branch state it names (every state a branch had)
        self.snapshots: dict[str, dict[str, bytes]] = {}
        # Answers the tests plant: (method, path) -> (status, headers, body) served as they are.
        self.planted: dict[tuple[str, str], tuple[int, dict[str, str], bytes]] = {}
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The endpoint to give huggingface_hub."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> StandInHub:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()

    def seed(self, repo: str, branch: str, files: dict[str, bytes]) -> str:
        """Make `repo` exist with `files` on `branch` (and an empty main); the branch's commit."""
        branches = self.files.setdefault(repo, {"main": {}})
        branches.setdefault(branch, {}).update(files)
        return self.head(repo, branch)

    def head(self, repo: str, branch: str) -> str:
        """The commit id of `branch`'s files now (recorded, so the id stays readable)."""
        files = self.files[repo][branch]
        sha = hashlib.sha1(usedforsecurity=False)
        sha.update(repo.encode() + b"\0")
        for path, data in sorted(files.items()):
            sha.update(path.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
        commit = sha.hexdigest()
        self.snapshots[commit] = dict(files)
        return commit

    def _revision(self, repo: str, revision: str) -> dict[str, bytes] | None:
        """The files at `revision` of `repo`: a branch, else a commit id of this stand-in."""
        branches = self.files.get(repo)
        if branches is None:
            return None
        if revision in branches:
            return branches[revision]
        return self.snapshots.get(revision)

    def _commit_of(self, repo: str, revision: str) -> str:
        branches = self.files[repo]
        return self.head(repo, revision) if revision in branches else revision

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: object, method: str = "GET") -> None:
                if isinstance(body, Raw):
                    data, headers = body.data, body.headers
                else:
                    data = json.dumps(body).encode()
                    headers = {"Content-Type": "application/json"}
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if method != "HEAD":
                    self.wfile.write(data)

            def _body(self) -> bytes:
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def do_GET(self) -> None:
                self._dispatch("GET", b"")

            def do_POST(self) -> None:
                self._dispatch("POST", self._body())

            def do_HEAD(self) -> None:
                self._dispatch("HEAD", b"")

            def _dispatch(self, method: str, body: bytes) -> None:
                url = urlparse(self.path)
                path = unquote(url.path)
                query = parse_qs(url.query)
                with hub.lock:
                    hub.requests.append((method, path))
                    planted = hub.planted.get((method, path))
                    if planted is not None:
                        status, headers, data = planted
                        answer: object = Raw(data, headers)
                    else:
                        status, answer = hub._answer(method, path, body, query)
                self._send(status, answer, method)

        return Handler

    def _answer(
        self, method: str, path: str, body: bytes, query: dict[str, list[str]]
    ) -> tuple[int, object]:
        if method == "POST" and path == "/api/repos/create":
            request = json.loads(body)
            self.created.append(request)
            repo = (
                f"{request['organization']}/{request['name']}"
                if request.get("organization")
                else request["name"]
            )
            self.files.setdefault(repo, {"main": {}})
            kind = request.get("type", "model")
            prefix = "" if kind == "model" else f"{kind}s/"
            return 200, {"url": f"{self.url}/{prefix}{repo}", "name": repo}
        if method == "POST" and path == "/api/validate-yaml":
            # The card's YAML header, which the Hub checks before a README.md commit.
            self.validated_yaml.append(json.loads(body).get("content", ""))
            return 200, {"errors": [], "warnings": []}
        found = re.fullmatch(rf"/api/{_KINDS}/([^/]+/[^/]+)/refs", path)
        if found and method == "GET":
            branches = self.files.get(found.group(2))
            if branches is None:
                return 404, {"error": "Repository not found"}
            return 200, {
                "branches": [
                    {
                        "name": b,
                        "ref": f"refs/heads/{b}",
                        "targetCommit": self.head(found.group(2), b),
                    }
                    for b in sorted(branches)
                ],
                "converts": [],
                "tags": [],
            }
        found = re.fullmatch(rf"/api/{_KINDS}/([^/]+/[^/]+)/branch/(.+)", path)
        if found and method == "POST":
            repo, branch = found.group(2), found.group(3)
            self.branches_created.append((repo, branch))
            self.files.setdefault(repo, {"main": {}}).setdefault(branch, {})
            return 200, {}
        found = re.fullmatch(rf"/api/{_KINDS}/([^/]+/[^/]+)/tree/([^/]+)(/.*)?", path)
        if found and method == "GET":
            files = self._revision(found.group(2), found.group(3))
            if files is None:
                return 404, {"error": "Revision not found"}
            return 200, _tree(files, (found.group(4) or "/")[1:], query)
        found = re.fullmatch(rf"/api/{_KINDS}/([^/]+/[^/]+)/revision/(.+)", path)
        if found and method == "GET":
            repo, revision = found.group(2), found.group(3)
            files = self._revision(repo, revision)
            if files is None:
                return 404, {"error": "Revision not found"}
            return 200, {
                "id": repo,
                "sha": self._commit_of(repo, revision),
                "siblings": [{"rfilename": p} for p in sorted(files)],
            }
        found = re.fullmatch(rf"/(?:{_KINDS}/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if found and method in ("GET", "HEAD"):
            repo, revision, name = found.group(2), found.group(3), found.group(4)
            files = self._revision(repo, revision)
            if files is None or name not in files:
                return 404, {"error": "Entry not found"}
            data = files[name]
            return 200, Raw(
                data,
                {
                    "Content-Type": "application/octet-stream",
                    "X-Repo-Commit": self._commit_of(repo, revision),
                    "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                },
            )
        found = re.fullmatch(rf"/api/{_KINDS}/([^/]+/[^/]+)/preupload/(.+)", path)
        if found and method == "POST":
            files = json.loads(body)["files"]
            return 200, {
                "files": [
                    {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                    for f in files
                ]
            }
        found = re.fullmatch(rf"/api/{_KINDS}/([^/]+/[^/]+)/commit/(.+)", path)
        if found and method == "POST":
            create_pr = query.get("create_pr", ["0"])[-1] in ("1", "true", "True")
            return self._commit(found.group(2), found.group(3), body, create_pr)
        return 404, {"error": f"the stand-in Hub does not answer {method} {path}"}

    def _commit(self, repo: str, revision: str, body: bytes, create_pr: bool) -> tuple[int, object]:
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        header = next(line["value"] for line in lines if line["key"] == "header")
        commit = Commit(repo, revision, create_pr, header.get("summary", ""))
        for line in lines:
            value = line["value"]
            if line["key"] == "file":
                commit.added[value["path"]] = base64.b64decode(value["content"])
            elif line["key"] in ("deletedFile", "deletedFolder"):
                commit.deleted.append(value["path"])
        self.commits.append(commit)
        answer: dict[str, object] = {
            "commitUrl": f"{self.url}/{repo}/commit/{len(self.commits):040x}",
            "commitOid": f"{len(self.commits):040x}",
        }
        if create_pr:
            self.pr_count += 1
            answer["pullRequestUrl"] = f"{self.url}/{repo}/discussions/{self.pr_count}"
        elif not revision.startswith("refs/pr/"):
            branch = self.files.setdefault(repo, {"main": {}}).setdefault(revision, {})
            branch.update(commit.added)
            for path in commit.deleted:
                branch.pop(path, None)
        return 200, answer


@dataclass
class Raw:
    """An answer served as these bytes with these headers (a file, or a planted answer)."""

    data: bytes
    headers: dict[str, str] = field(default_factory=dict)


def _tree(files: dict[str, bytes], under: str, query: dict[str, list[str]]) -> list[object]:
    """The tree listing of `files` under folder `under` ("" for the top): every file below it
    with ?recursive=true (as huggingface_hub asks for a whole tree), else its direct entries."""
    recursive = query.get("recursive", ["false"])[-1].lower() in ("1", "true")
    prefix = f"{under.rstrip('/')}/" if under else ""
    entries: dict[str, object] = {}
    for name, data in sorted(files.items()):
        if not name.startswith(prefix):
            continue
        rest = name[len(prefix) :]
        if recursive or "/" not in rest:
            entries[name] = {"type": "file", "path": name, "oid": "0" * 40, "size": len(data)}
        else:
            folder = prefix + rest.split("/", 1)[0]
            entries.setdefault(folder, {"type": "directory", "path": folder, "oid": "0" * 40})
    return list(entries.values())


def hub_cli(
    cwd: Path, *args: str | Path, hub: StandInHub | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """The real command line in a fresh interpreter, run in `cwd`, talking to the stand-in Hub
    `hub` (none: a closed local port), never to the real one: no HF_* variable of the caller's
    reaches it, and its token and cache are the test's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(
        HF_ENDPOINT=hub.url if hub is not None else "http://127.0.0.1:9",
        HF_TOKEN="hf_stand_in_token",
        HF_HOME=str(cwd / ".hf-home"),
        HF_HUB_DISABLE_TELEMETRY="1",
    )
    return subprocess.run(
        [sys.executable, "-m", "build2cmake", *map(str, args)],
        capture_output=True, text=True, cwd=cwd, env=env, check=False, timeout=timeout,
    )  # fmt: skip
