"""`build2cmake upload`, against a local STAND-IN for the Hugging Face Hub (tests/hub_standin.py).

The real Hub is not reachable from the tests (and must never be written to by them):
huggingface_hub is pointed at the stand-in with HF_ENDPOINT, which records what it is sent:
repository creation, branch creation, preupload, and each commit with every file's path and
bytes. The project is a real build (the noarch fixture: `build2cmake build` lays out
build/torch-cpu/ without compiling).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.hub_standin import StandInHub, hub_cli

REPO_ID = "stand-in-org/noarch-kernel"


@pytest.fixture
def hub() -> Iterator[StandInHub]:
    server = StandInHub().start()
    yield server
    server.stop()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The noarch fixture with a Hub repo id, a card, benchmarks, and build/torch-cpu/ built."""
    root = tmp_path / "noarch"
    shutil.copytree(FIXTURES / "noarch", root)
    toml = root / "build.toml"
    hub_table = f'\n[general.hub]\nrepo-id = "{REPO_ID}"\n\n[torch-noarch]\n'
    toml.write_text(toml.read_text().replace("\n[torch-noarch]\n", hub_table))
    (root / "CARD.md").write_text("# noarch-kernel\n\nA kernel card.\n")
    (root / "benchmarks").mkdir()
    (root / "benchmarks" / "benchmark_speed.py").write_text("print('fast')\n")
    (root / "benchmarks" / "helpers.py").write_text("# not a benchmark*.py: stays local\n")
    package = root / "torch-ext" / "noarch_kernel"
    (package / "two words.py").write_text("X = 1\n")
    built = _cli(root, "build", root / "build.toml", "--backend", "cpu")
    assert built.returncode == 0, built.stdout + built.stderr
    return root


_cli = hub_cli


def _variant_files(root: Path) -> dict[str, bytes]:
    variant = root / "build" / "torch-cpu"
    return {
        f"build/torch-cpu/{p.relative_to(variant).as_posix()}": p.read_bytes()
        for p in sorted(variant.rglob("*"))
        if p.is_file()
    }


def test_upload_creates_repo_and_branch_and_commits_variants_card_benchmarks(
    project: Path, hub: StandInHub
) -> None:
    result = _cli(project, "upload", "--output-json", "summary.json", hub=hub)
    assert result.returncode == 0, result.stdout + result.stderr
    assert hub.created == [
        {
            "name": "noarch-kernel",
            "organization": "stand-in-org",
            "visibility": "public",
            "type": "kernel",
        }
    ]
    assert hub.branches_created == [(REPO_ID, "v1")]
    by_revision = {c.revision: c for c in hub.commits}
    assert set(by_revision) == {"main", "v1"}
    assert by_revision["main"].added == {"README.md": (project / "build" / "CARD.md").read_bytes()}
    expected = _variant_files(project)
    expected["benchmarks/benchmark_speed.py"] = b"print('fast')\n"
    assert by_revision["v1"].added == expected
    assert "build/torch-cpu/two words.py" in expected
    assert by_revision["v1"].deleted == [] and not by_revision["v1"].create_pr
    summary = json.loads((project / "summary.json").read_text())
    assert summary == {
        "status": "uploaded",
        "repo_id": REPO_ID,
        "branch": "v1",
        "url": f"{hub.url}/kernels/{REPO_ID}/tree/v1",
        "pull_requests": [],
    }
    # The preupload asked about every file it then committed.
    assert ("POST", f"/api/kernels/{REPO_ID}/preupload/v1") in hub.requests


def test_upload_deletes_files_of_uploaded_variants_the_build_no_longer_makes(
    project: Path, hub: StandInHub
) -> None:
    hub.seed(
        REPO_ID,
        "v1",
        {
            "build/torch-cpu/removed_module.py": b"gone from the build",
            "build/torch-cpu/__init__.py": b"older",
            "build/torch-cuda/__init__.py": b"another machine's variant",
            "benchmarks/benchmark_old.py": b"a benchmark the project dropped",
            "benchmarks/data.csv": b"not a benchmark script",
        },
    )
    result = _cli(project, "upload", "--private", hub=hub)
    assert result.returncode == 0, result.stdout + result.stderr
    assert hub.branches_created == []
    (v1,) = [c for c in hub.commits if c.revision == "v1"]
    assert v1.deleted == ["benchmarks/benchmark_old.py", "build/torch-cpu/removed_module.py"]
    assert hub.files[REPO_ID]["v1"]["build/torch-cuda/__init__.py"] == b"another machine's variant"
    assert (
        hub.files[REPO_ID]["v1"]["build/torch-cpu/__init__.py"]
        == (project / "build" / "torch-cpu" / "__init__.py").read_bytes()
    )
    assert hub.created[0]["visibility"] == "private"


def test_upload_create_pr_opens_pull_requests_without_creating_the_repo(
    project: Path, hub: StandInHub
) -> None:
    hub.seed(REPO_ID, "v1", {})
    result = _cli(project, "upload", "--create-pr", "--output-json", "pr.json", hub=hub)
    assert result.returncode == 0, result.stdout + result.stderr
    assert hub.created == [] and ("POST", "/api/repos/create") not in hub.requests
    assert sorted((c.revision, c.create_pr) for c in hub.commits) == [("main", True), ("v1", True)]
    summary = json.loads((project / "pr.json").read_text())
    assert summary["status"] == "pull_request_created" and summary["url"] is None
    assert sorted(pr["branch"] for pr in summary["pull_requests"]) == ["main", "v1"]
    assert all("/discussions/" in pr["url"] for pr in summary["pull_requests"])
    # Nothing landed on the branches themselves.
    assert hub.files[REPO_ID]["v1"] == {}


def test_upload_to_another_branch(project: Path, hub: StandInHub) -> None:
    result = _cli(project, "upload", "--branch", "exp/one", hub=hub)
    assert result.returncode == 0, result.stdout + result.stderr
    assert hub.created[0]["type"] == "kernel"
    assert hub.branches_created == [(REPO_ID, "exp/one")]
    assert {c.revision for c in hub.commits} == {"main", "exp/one"}
    assert all(
        path.startswith(("/api/kernels/", "/api/repos/", "/api/validate-yaml"))
        for _, path in hub.requests
    ), hub.requests


@pytest.mark.parametrize("kind", ["model", "dataset"])
def test_upload_refuses_a_repository_kind_other_than_kernel(
    project: Path, hub: StandInHub, kind: str
) -> None:
    """Model-type kernel repositories are gone from the Hub (2026-09-13): the refusal says so,
    before anything is sent."""
    result = _cli(project, "upload", "--repo-type", kind, hub=hub)
    assert result.returncode == 2 and hub.requests == []
    assert result.stderr.count("\n") == 1, result.stderr
    if kind == "model":
        assert "since 2026-09-13" in result.stderr
        assert "use --repo-type kernel" in result.stderr
    else:
        assert "use kernel" in result.stderr


def test_upload_sends_a_card_written_by_an_older_build2cmake_with_a_note(
    project: Path, hub: StandInHub
) -> None:
    """build/README.md (where build2cmake wrote the card before 2026-11-28) still goes to main as
    README.md when there is no build/CARD.md, with one note saying to rebuild."""
    card = (project / "build" / "CARD.md").read_bytes()
    (project / "build" / "CARD.md").rename(project / "build" / "README.md")
    result = _cli(project, "upload", hub=hub)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "note: build/README.md is sent as the card" in result.stderr
    by_revision = {c.revision: c for c in hub.commits}
    assert by_revision["main"].added == {"README.md": card}


def test_upload_dry_run_lists_every_operation_and_contacts_nothing(
    project: Path, hub: StandInHub
) -> None:
    package = project / "torch-ext" / "noarch_kernel"
    (package / "esc\x1b[31m.py").write_text("Y = 2\n")
    rebuilt = _cli(project, "build", project / "build.toml", "--backend", "cpu")
    assert rebuilt.returncode == 0, rebuilt.stderr
    result = _cli(project, "upload", "--dry-run", hub=hub)
    assert result.returncode == 0, result.stdout + result.stderr
    assert hub.requests == []
    # Sources are shown as the command was given them (build.toml in the current folder).
    assert result.stdout.splitlines() == [
        f"create-repo kernel {REPO_ID} public",
        "create-branch v1 (if missing)",
        "add main README.md <- build/CARD.md",
        "add v1 benchmarks/benchmark_speed.py <- benchmarks/benchmark_speed.py",
        "add v1 build/torch-cpu/__init__.py <- build/torch-cpu/__init__.py",
        "add v1 build/torch-cpu/_ops.py <- build/torch-cpu/_ops.py",
        "add v1 'build/torch-cpu/esc\\x1b[31m.py' <- 'build/torch-cpu/esc\\x1b[31m.py'",
        "add v1 build/torch-cpu/metadata.json <- build/torch-cpu/metadata.json",
        "add v1 'build/torch-cpu/two words.py' <- 'build/torch-cpu/two words.py'",
        "delete v1 <files of the uploaded variants that the Hub has and this build does not make>",
        "dry run: nothing uploaded",
    ]


def test_upload_refuses_a_stale_build_before_contacting_the_hub(
    project: Path, hub: StandInHub
) -> None:
    init = project / "torch-ext" / "noarch_kernel" / "__init__.py"
    init.write_text(init.read_text() + "\n# edited after the build\n")
    stamp = (project / "build" / "torch-cpu" / "metadata.json").stat().st_mtime + 10
    os.utime(init, (stamp, stamp))
    result = _cli(project, "upload", hub=hub)
    assert result.returncode == 2
    assert "refusing to upload a stale build" in result.stderr
    assert "changed after it was built" in result.stderr
    assert hub.requests == []


def test_upload_names_the_hub_error(project: Path, hub: StandInHub) -> None:
    # --create-pr against a repository that does not exist: the stand-in answers 404.
    result = _cli(project, "upload", "--create-pr", hub=hub)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("build2cmake: error: ")
    assert REPO_ID in result.stderr and "Traceback" not in result.stderr


def test_upload_refuses_a_repo_id_or_branch_that_is_not_one(project: Path, hub: StandInHub) -> None:
    # A trailing newline passes a `$`-anchored pattern; these are refused before any request.
    for args in (("--repo-id", f"{REPO_ID}\n"), ("--branch", "v1\n"), ("--branch", "a/../b")):
        result = _cli(project, "upload", *args, hub=hub)
        assert result.returncode == 2, args
        assert result.stderr.startswith("build2cmake: error: "), result.stderr
    assert hub.requests == []
