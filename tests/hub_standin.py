"""A local stand-in for the Hugging Face Hub's HTTP API, for the upload tests.

It is NOT the Hub: it answers the few endpoints huggingface_hub calls for an upload (create a
repository, list refs and files, create a branch, preupload, commit) from an in-memory store,
and records every request, with each commit's files and their bytes, for the tests to check.
Point huggingface_hub at it with HF_ENDPOINT=<StandInHub.url>.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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

    def seed(self, repo: str, branch: str, files: dict[str, bytes]) -> None:
        """Make `repo` exist with `files` on `branch` (and an empty main)."""
        branches = self.files.setdefault(repo, {"main": {}})
        branches.setdefault(branch, {}).update(files)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
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
                    status, answer = hub._answer(method, path, body, query)
                self._send(status, answer)

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
                    {"name": b, "ref": f"refs/heads/{b}", "targetCommit": "0" * 40}
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
            files = self.files.get(found.group(2), {}).get(found.group(3))
            if files is None:
                return 404, {"error": "Revision not found"}
            return 200, [
                {"type": "file", "path": p, "oid": "0" * 40, "size": len(d)}
                for p, d in sorted(files.items())
            ]
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
