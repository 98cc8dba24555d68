"""`build2cmake lock` and kernels.lock, against a local STAND-IN for the Hugging Face Hub
(tests/hub_standin.py; the real Hub is never contacted).

The lock is kernels-data's NixKernelLocks: each kernel-depends entry with the commit it resolves
to and the SRI hash of the repository at that commit, as nix-builder's fetchFromHuggingFace
computes it (the NAR hash of the downloaded snapshot). The NAR hash is checked against Nix's
own `nix-hash` (a value it printed, and the program itself when it is installed), the file
against the `kernels` package's own parser of that format.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from build2cmake.config.nar import NarHasher, nar_sri
from tests.conftest import FIXTURES
from tests.hub_standin import StandInHub, hub_cli

RELU = "stand-in-org/relu"
# kernels-data's own test value of an SRI hash.
SRI = "sha256-1CM0MGEOCqqnYV989jcUANEbiB727JftjXTdQVUHPwk="
ACTIVATION = "stand-in-org/activation"


@pytest.fixture
def hub() -> Iterator[StandInHub]:
    server = StandInHub().start()
    yield server
    server.stop()


def _relu_files(version: int) -> dict[str, bytes]:
    variant = "build/torch213-cxx11-cpu-x86_64-linux"
    return {
        ".gitattributes": b"*.so filter=lfs diff=lfs merge=lfs -text\n",
        "README.md": f"# relu v{version}\n".encode(),
        f"{variant}/relu/__init__.py": f"VERSION = {version}\n".encode(),
        f"{variant}/_relu.abi3.so": bytes(
            random.Random(version).randrange(256) for _ in range(999)
        ),
        f"{variant}/metadata.json": b'{"name": "relu"}\n',
    }


def _activation_files() -> dict[str, bytes]:
    """What the lock hashes: a `.cache` folder below the top is a file of the kernel's."""
    return {
        "build/torch-cpu/activation/__init__.py": b"",
        "a.b/c": b"x",
        "a/b": b"yz",
        "a/.cache/kept": b"k",
    }


# The download's own folder, which nix-builder's fetcher removes before it hashes: a repository
# that holds one (an upload of a folder that was itself a download) hashes without it.
_TOP_CACHE = {".cache/huggingface/download/a/b.metadata": b"stale\n"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The noarch fixture (built without compiling) depending on two stand-in Hub kernels: one
    by version (general), one by revision (cuda only)."""
    root = tmp_path / "noarch"
    shutil.copytree(FIXTURES / "noarch", root)
    _set_depends(root, f'{{ repo-id = "{RELU}", version = 1 }}')
    return root


def _set_depends(
    root: Path, general: str, cuda: str = f'{{ repo-id = "{ACTIVATION}", revision = "main" }}'
) -> None:
    text = (FIXTURES / "noarch" / "build.toml").read_text()
    text = text.replace(
        "python-depends = []\n",
        f"python-depends = []\nkernel-depends = [{general}]\n\n"
        f"[general.cuda]\nkernel-depends = [{cuda}]\n",
    )
    (root / "build.toml").write_text(text)


def _seed(hub: StandInHub) -> tuple[str, str]:
    """The two dependencies on the stand-in: relu with v1 and v2 branches, activation on main.
    Their commits (relu v1, activation main)."""
    relu_v1 = hub.seed(RELU, "v1", _relu_files(1))
    hub.seed(RELU, "v2", _relu_files(2))
    activation = hub.seed(ACTIVATION, "main", {**_activation_files(), **_TOP_CACHE})
    return relu_v1, activation


_cli = functools.partial(hub_cli, timeout=120)


def _one_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr and "\x1b" not in result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


# -- the NAR hash ------------------------------------------------------------------------------


def _nix_sri(folder: Path) -> str:
    digest = subprocess.run(
        ["nix-hash", "--type", "sha256", str(folder)], capture_output=True, text=True, check=True
    ).stdout.strip()
    return "sha256-" + base64.b64encode(binascii.unhexlify(digest)).decode()


def _tree() -> dict[str, bytes]:
    variant = "build/torch213-cxx11-cpu-x86_64-linux"
    return {
        ".gitattributes": b"*.so filter=lfs diff=lfs merge=lfs -text\n",
        "README.md": b"# relu\n",
        f"{variant}/relu/__init__.py": b"",
        f"{variant}/_relu.abi3.so": bytes(range(256)) * 3,
        f"{variant}/metadata.json": b'{"name": "relu"}\n',
        "a.b/c": b"x",
    }


def test_nar_hash_is_what_nix_hash_prints_for_the_folder() -> None:
    # `nix-hash --type sha256` (Nix 2.8.0) of this tree, as SRI: a folder "a.b" sorts after
    # the files of "a..." names and the empty file, file sizes that are and are not multiples
    # of 8; the sort is by name bytes, folder by folder ("a.b/c" before "build/...").
    assert nar_sri(_tree()) == "sha256-I5FkNH22a3l87imytJblu8Kgksqd+AVqIbx4uSiycG0="
    # An empty folder: ( type directory ).
    assert nar_sri({}) == "sha256-pQpattmS9VmO3ZIQUFn66az8GSmB4IvYhTTCFn6SUmo="


@pytest.mark.skipif(shutil.which("nix-hash") is None, reason="Nix's nix-hash is not installed")
def test_nar_hash_matches_nix_hash_on_fresh_random_trees(tmp_path: Path) -> None:
    rng = random.Random()
    for round_ in range(5):
        files: dict[str, bytes] = {}
        for _ in range(rng.randrange(1, 30)):
            depth = rng.randrange(1, 4)
            parts = [
                rng.choice(["a", "a.b", "b-c", "z", "ü", "A", "_"]) + str(rng.randrange(3))
                for _ in range(depth)
            ]
            path = "/".join(parts)
            if any(
                p == path or p.startswith(path + "/") or path.startswith(p + "/") for p in files
            ):
                continue
            files[path] = rng.randbytes(rng.randrange(0, 70))
        folder = tmp_path / str(round_)
        for path, data in files.items():
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_bytes(data)
        os.chmod(folder, 0o755)
        assert nar_sri(files) == _nix_sri(folder)


def test_nar_hasher_refuses_files_out_of_order_or_of_the_wrong_size() -> None:
    hasher = NarHasher()
    hasher.begin_file(("b",), 1)
    hasher.update(b"x")
    with pytest.raises(ValueError, match="comes after"):
        hasher.begin_file(("a",), 0)
    hasher = NarHasher()
    hasher.begin_file(("a",), 2)
    hasher.update(b"x")
    with pytest.raises(ValueError, match="missing"):
        hasher.sri()
    with pytest.raises(ValueError, match="more bytes"):
        NarHasher().update(b"x")


# -- lock ------------------------------------------------------------------------------------


def test_lock_writes_kernels_datas_format_with_commits_and_snapshot_hashes(
    project: Path, hub: StandInHub
) -> None:
    relu_v1, activation = _seed(hub)
    result = _cli(project, "lock", hub=hub)
    assert result.returncode == 0, result.stdout + result.stderr
    text = (project / "kernels.lock").read_text()
    assert json.loads(text) == [
        {
            "dependency": {"repo-id": ACTIVATION, "revision": "main"},
            "lock": {"commit": activation, "hash": nar_sri(_activation_files())},
        },
        {
            "dependency": {"repo-id": RELU, "version": 1},
            "lock": {"commit": relu_v1, "hash": nar_sri(_relu_files(1))},
        },
    ]
    # Version 1 is branch v1's commit, not v2's; the stand-in served each file it hashed.
    assert relu_v1 != hub.head(RELU, "v2")
    assert ("GET", f"/kernels/{RELU}/resolve/{relu_v1}/README.md") in hub.requests
    assert f"{RELU} v1: {relu_v1} {nar_sri(_relu_files(1))}" in result.stdout


def test_lock_file_is_what_kernels_own_parser_of_the_format_writes(
    project: Path, hub: StandInHub
) -> None:
    rust = pytest.importorskip("kernels._rust")
    _seed(hub)
    assert _cli(project, "lock", hub=hub).returncode == 0
    text = (project / "kernels.lock").read_text()
    locks = rust.NixKernelLocks.from_json(text)
    assert len(locks) == 2
    # Byte for byte what kernels-data writes for the same locks (pretty serde_json), plus the
    # final newline of a text file.
    assert text == locks.to_json() + "\n"
    relu = next(d for d in locks if d.repo_id == RELU)
    assert locks[relu].hash == nar_sri(_relu_files(1))


@pytest.mark.skipif(shutil.which("nix-hash") is None, reason="Nix's nix-hash is not installed")
def test_lock_hash_is_nix_hash_of_the_downloaded_snapshot(
    project: Path, hub: StandInHub, tmp_path: Path
) -> None:
    _seed(hub)
    assert _cli(project, "lock", hub=hub).returncode == 0
    snapshot = tmp_path / "snapshot"
    for path, data in _relu_files(1).items():
        (snapshot / path).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / path).write_bytes(data)
    locks = json.loads((project / "kernels.lock").read_text())
    relu = next(e for e in locks if e["dependency"]["repo-id"] == RELU)
    assert relu["lock"]["hash"] == _nix_sri(snapshot)


def test_lock_again_leaves_an_unchanged_lock_alone(project: Path, hub: StandInHub) -> None:
    _seed(hub)
    assert _cli(project, "lock", hub=hub).returncode == 0
    before = (project / "kernels.lock").stat()
    again = _cli(project, "lock", hub=hub)
    assert again.returncode == 0 and "unchanged:" in again.stdout
    assert (project / "kernels.lock").stat().st_ino == before.st_ino


def test_lock_again_after_a_branch_moved_writes_its_new_commit(
    project: Path, hub: StandInHub
) -> None:
    """A new commit on relu's v1 branch: the lock is rewritten, although it is the same size."""
    _seed(hub)
    assert _cli(project, "lock", hub=hub).returncode == 0
    before = (project / "kernels.lock").read_text()
    moved = hub.seed(RELU, "v1", _relu_files(3))
    again = _cli(project, "lock", hub=hub)
    assert again.returncode == 0, again.stdout + again.stderr
    text = (project / "kernels.lock").read_text()
    assert len(text) == len(before) and moved in text and moved not in before
    assert nar_sri(_relu_files(3)) in text


def test_lock_names_the_versions_a_repository_has(project: Path, hub: StandInHub) -> None:
    _seed(hub)
    _set_depends(project, f'{{ repo-id = "{RELU}", version = 7 }}')
    _one_error(_cli(project, "lock", hub=hub), RELU, "no branch v7", "v1, v2")
    assert not (project / "kernels.lock").exists()


# -- build and upload check the lock -----------------------------------------------------------


@pytest.mark.parametrize(
    ("general", "cuda", "says"),
    [
        (f'{{ repo-id = "{RELU}", version = 2 }}', None, f"added {RELU} v2; removed {RELU} v1"),
        (
            f'{{ repo-id = "{RELU}", version = 1 }}, '
            '{ repo-id = "stand-in-org/new", version = 1 }',
            None,
            "added stand-in-org/new v1",
        ),
        ("", None, f"removed {RELU} v1"),
        (f'{{ repo-id = "{RELU}", version = 1 }}', "", f"removed {ACTIVATION} @ main"),
    ],
    ids=["changed-version", "added", "removed", "removed-from-a-backend"],
)
def test_build_and_upload_refuse_a_lock_that_no_longer_matches_build_toml(
    project: Path, hub: StandInHub, general: str, cuda: str | None, says: str
) -> None:
    _seed(hub)
    assert _cli(project, "lock", hub=hub).returncode == 0
    if cuda is None:
        _set_depends(project, general)
    else:
        _set_depends(project, general, cuda)
    build = _cli(project, "build", "--backend", "cpu")
    _one_error(build, "kernels.lock", says, "run `build2cmake lock`")
    assert not (project / "build" / "torch-cpu").exists()  # refused before anything was built
    upload = _cli(project, "upload", "--repo-id", "stand-in-org/noarch-kernel", "--dry-run")
    _one_error(upload, "kernels.lock", says, "run `build2cmake lock`")


def test_build_uses_a_matching_lock_and_notes_a_missing_one(project: Path, hub: StandInHub) -> None:
    unlocked = _cli(project, "build", "--backend", "cpu")
    assert unlocked.returncode == 0, unlocked.stderr
    assert "kernels.lock: none; build.toml's kernel-depends are not pinned" in unlocked.stderr
    _seed(hub)
    assert _cli(project, "lock", hub=hub).returncode == 0
    locked = _cli(project, "build", "--backend", "cpu")
    assert locked.returncode == 0, locked.stderr
    assert "kernels.lock" not in locked.stderr
    dry = _cli(project, "upload", "--repo-id", "stand-in-org/noarch-kernel", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "kernels.lock" not in dry.stderr


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "not valid JSON"),
        ("{}", "expected a list"),
        ('[{"dependency": {"repo-id": "a/b", "version": 1}}]', "exactly `dependency` and `lock`"),
        (
            '[{"dependency": {"repo-id": "a/b", "version": 1, "revision": "x"}, "lock": {}}]',
            "one of `version` or `revision`",
        ),
        (
            '[{"dependency": {"repo-id": "a/b", "version": 1}, '
            f'"lock": {{"commit": "f609e51", "hash": "{SRI}"}}}}]',
            "40 lowercase hex",
        ),
        (
            '[{"dependency": {"repo-id": "a/b", "version": 1}, '
            '"lock": {"commit": "' + "a" * 40 + '", "hash": "sha256-abc"}}]',
            "sha256-<base64",
        ),
        (
            '[{"dependency": {"repo-id": "../b\\u001b[31m", "version": 1}, '
            '"lock": {"commit": "' + "a" * 40 + '", "hash": "x"}}]',
            "not a Hub repository id",
        ),
        (
            "["
            + ", ".join(
                [
                    '{"dependency": {"repo-id": "a/b", "version": 1}, "lock": {"commit": "'
                    + "a" * 40
                    + '", "hash": "sha256-1CM0MGEOCqqnYV989jcUANEbiB727JftjXTdQVUHPwk="}}'
                ]
                * 2
            )
            + "]",
            "duplicate dependency a/b v1",
        ),
    ],
    ids=[
        "not-json",
        "object",
        "no-lock",
        "version-and-revision",
        "short-commit",
        "bad-hash",
        "hostile-repo-id",
        "duplicate",
    ],
)
def test_a_malformed_kernels_lock_is_one_error_naming_the_file(
    project: Path, content: str, says: str
) -> None:
    (project / "kernels.lock").write_text(content)
    _one_error(_cli(project, "build", "--backend", "cpu"), "error: kernels.lock: ", says)
    _one_error(_cli(project, "build", project, "--backend", "cpu"), f"{project}/kernels.lock: ")


def test_lock_keeps_a_kernels_lock_of_another_format_unless_forced(
    project: Path, hub: StandInHub
) -> None:
    # What `kernels lock` (the loader's command, for pyproject.toml) writes: another format.
    theirs = '[{"repo_id": "a/b", "sha": "' + "a" * 40 + '", "variants": {}}]'
    (project / "kernels.lock").write_text(theirs)
    _seed(hub)
    _one_error(_cli(project, "lock", hub=hub), "kernels.lock", "--force")
    assert (project / "kernels.lock").read_text() == theirs
    forced = _cli(project, "lock", "--force", hub=hub)
    assert forced.returncode == 0, forced.stderr
    assert (
        json.loads((project / "kernels.lock").read_text())[0]["dependency"]["repo-id"] == ACTIVATION
    )


def test_lock_replaces_a_symlink_at_its_name_without_following_it(
    project: Path, hub: StandInHub, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text("[]")
    (project / "kernels.lock").symlink_to(outside)
    _seed(hub)
    _one_error(_cli(project, "lock", hub=hub), "symlink")
    assert _cli(project, "lock", "--force", hub=hub).returncode == 0
    assert not (project / "kernels.lock").is_symlink()
    assert outside.read_text() == "[]"


# -- what the Hub answers is not trusted -------------------------------------------------------


def test_lock_refuses_a_commit_from_the_hub_that_is_not_one(project: Path, hub: StandInHub) -> None:
    _seed(hub)
    refs = {
        "branches": [{"name": "v1", "ref": "refs/heads/v1", "targetCommit": "../../x\x1b[2J"}],
        "converts": [],
        "tags": [],
    }
    hub.planted[("GET", f"/api/kernels/{RELU}/refs")] = (
        200,
        {"Content-Type": "application/json"},
        json.dumps(refs).encode(),
    )
    error = _one_error(_cli(project, "lock", hub=hub), f"{RELU} v1", "not 40 lowercase hex")
    assert "\\x1b" in error
    assert not (project / "kernels.lock").exists()


@pytest.mark.parametrize("path", ["../escape", "build/../../x", "a//b", "evil\x1b[31m/x", "/abs"])
def test_lock_refuses_a_file_listing_that_is_not_plain_relative_paths(
    project: Path, hub: StandInHub, tmp_path: Path, path: str
) -> None:
    relu_v1, _ = _seed(hub)
    listing = [{"type": "file", "path": path, "oid": "0" * 40, "size": 1}]
    hub.planted[("GET", f"/api/kernels/{RELU}/tree/{relu_v1}")] = (
        200,
        {"Content-Type": "application/json"},
        json.dumps(listing).encode(),
    )
    result = _cli(project, "lock", hub=hub)
    _one_error(result, RELU, "not a relative path of plain names")
    assert not (project / "kernels.lock").exists()
    assert not (tmp_path / "escape").exists() and not (tmp_path / "x").exists()


def test_lock_refuses_a_download_that_is_not_the_listed_size(
    project: Path, hub: StandInHub
) -> None:
    relu_v1, _ = _seed(hub)
    listing = [{"type": "file", "path": "README.md", "oid": "0" * 40, "size": 3}]
    hub.planted[("GET", f"/api/kernels/{RELU}/tree/{relu_v1}")] = (
        200,
        {"Content-Type": "application/json"},
        json.dumps(listing).encode(),
    )
    _one_error(_cli(project, "lock", hub=hub), RELU, "README.md", "not the 3-byte file")


def test_lock_without_a_reachable_hub_is_one_error(project: Path) -> None:
    _one_error(_cli(project, "lock"), f"{ACTIVATION} @ main", "Connection refused")
