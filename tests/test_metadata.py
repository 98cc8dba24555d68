"""metadata.json as kernel-builder writes it: digest, provenance, kernel-depends, per-backend
python-depends; checked against the digest code and metadata parser the `kernels` package ships
(kernels-data's Rust, the same code kernel-builder runs), and by loading with kernels."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import build2cmake
from build2cmake.builds import provenance
from build2cmake.builds.builder import metadata_for
from build2cmake.builds.digest import variant_digest
from build2cmake.config import load_project
from tests.conftest import FIXTURES, run_cli

rust = pytest.importorskip("kernels._rust")


def test_digest_matches_kernels_data_test_vector() -> None:
    # kernels-data's digest.rs test: b"hello world" as _extension.so.
    assert variant_digest({"_extension.so": b"hello world"}) == {
        "algorithm": "sha256",
        "files": {"_extension.so": "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek="},
    }


def test_digest_covers_what_kernels_hash_variant_covers(tmp_path: Path) -> None:
    files = {
        "_ext.abi3.so": os.urandom(4096),
        "__init__.py": b"from ._ops import ops\n",
        "sub/deeper/module.py": b"x = 1\n",
        "sub/metadata.json": b'{"nested": true}',
        "sub/metadata.json.sigstore": b"nested signature",
        "metadata.json": b"{}",
        "metadata.json.sigstore": b"signature",
        "payload.pyc": b"bytecode",
        "sub/__pycache__/module.cpython-311.pyc": b"bytecode",
        "sub/__pycache__/notes.txt": b"not bytecode, still skipped",
        "données/é.py": b"# non-ASCII names\n",
        "z.pyc.py": b"# .pyc only as a suffix counts\n",
    }
    for relative, data in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    ours = variant_digest(files)
    upstream = rust.Digest.hash_variant(rust.DigestAlgorithm.SHA256, tmp_path)
    assert ours["files"] == upstream.files
    assert "sub/metadata.json" in upstream.files and "metadata.json" not in upstream.files


def _project(tmp_path: Path, general_extra: str) -> Path:
    root = tmp_path / "kernel"
    (root / "torch-ext" / "deps_kernel").mkdir(parents=True)
    (root / "torch-ext" / "deps_kernel" / "__init__.py").write_text("X = 1\n")
    (root / "build.toml").write_text(
        '[general]\nname = "deps-kernel"\nversion = 2\nedition = 5\nlicense = "MIT"\n'
        'backends = ["cpu", "cuda", "xpu"]\npython-depends = ["einops"]\n'
        f"{general_extra}\n[torch-noarch]\n"
    )
    return root


def test_backend_python_and_kernel_depends_land_in_their_variant_only(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        'kernel-depends = [{ repo-id = "kernels-community/relu", version = 1 }]\n'
        '[general.cuda]\npython-depends = ["nvidia-cutlass-dsl"]\n'
        'kernel-depends = [{ repo-id = "kernels-community/gelu", revision = "abc123" }]\n'
        '[general.xpu]\npython-depends = ["onednn"]\n',
    )
    project = load_project(root / "build.toml")
    cpu = metadata_for(project, "_deps_kernel_cpu", "cpu", [])
    cuda = metadata_for(project, "_deps_kernel_cuda", "cuda", ["8.0"])
    xpu = metadata_for(project, "_deps_kernel_xpu", "xpu", [])
    assert cpu["python-depends"] == ["einops"]
    assert cuda["python-depends"] == ["einops", "nvidia-cutlass-dsl"]
    assert xpu["python-depends"] == ["einops", "onednn"]
    relu = {"repo-id": "kernels-community/relu", "version": 1}
    assert cpu["kernel-depends"] == [relu]
    assert cuda["kernel-depends"] == [
        relu,
        {"repo-id": "kernels-community/gelu", "revision": "abc123"},
    ]
    # kernels' parser (serde, strict about the types) reads every one back.
    for metadata in (cpu, cuda, xpu):
        parsed = rust.Metadata.from_bytes(json.dumps(metadata).encode())
        depends = metadata["kernel-depends"]
        assert isinstance(depends, list)
        assert [d.repo_id for d in parsed.kernel_depends] == [d["repo-id"] for d in depends]
        assert list(parsed.python_depends) == metadata["python-depends"]


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t")
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, env=env, check=True
    ).stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = _project(tmp_path, "")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "kernel")
    return root


def test_provenance_records_commit_and_dirty_flag(checkout: Path) -> None:
    head = _git(checkout, "rev-parse", "HEAD")
    record = provenance.provenance(checkout)
    assert record["kernel"] == {"commit": head, "dirty": False}
    # Untracked files (a build's output) do not make a tree dirty; a changed tracked file does.
    (checkout / "untracked.txt").write_text("x")
    assert provenance.kernel_git_status(checkout) == {"commit": head, "dirty": False}
    (checkout / "torch-ext" / "deps_kernel" / "__init__.py").write_text("X = 2\n")
    assert provenance.kernel_git_status(checkout) == {"commit": head, "dirty": True}
    parsed = rust.Metadata.from_bytes(
        json.dumps(
            {
                **metadata_for(load_project(checkout / "build.toml"), "_x", "cpu", []),
                "provenance": provenance.provenance(checkout),
            }
        ).encode()
    )
    assert parsed.provenance is not None and parsed.provenance.kernel is not None
    assert parsed.provenance.kernel.commit == head and parsed.provenance.dirty
    assert parsed.provenance.kernel_builder.version.startswith("build2cmake ")


def test_provenance_runs_nothing_the_checkout_configures(checkout: Path) -> None:
    marker = checkout.parent / "ran"
    hook = checkout.parent / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    hook.chmod(0o755)
    # fsmonitor and hooks are overridden; a filter driver means git is not run at all.
    _git(checkout, "config", "core.fsmonitor", str(hook))
    _git(checkout, "config", "core.hooksPath", str(checkout.parent))
    (checkout.parent / "post-index-change").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (checkout.parent / "post-index-change").chmod(0o755)
    (checkout / "torch-ext" / "deps_kernel" / "__init__.py").write_text("X = 3\n")
    assert provenance.kernel_git_status(checkout) is not None
    _git(checkout, "config", "filter.evil.clean", str(hook))
    (checkout / ".gitattributes").write_text("* filter=evil\n")
    record = provenance.provenance(checkout)
    assert "kernel" not in record and "kernel-builder" in record
    assert not marker.exists(), "git ran a command the checkout configured"


def test_provenance_without_git_checkout_has_no_kernel(tmp_path: Path) -> None:
    root = _project(tmp_path, "")
    record = provenance.provenance(root)
    assert record["kernel-builder"] == {"version": f"build2cmake {build2cmake.__version__}"}
    assert "kernel" not in record


def test_built_metadata_is_read_and_loaded_by_kernels(tmp_path: Path) -> None:
    root = tmp_path / "noarch"
    shutil.copytree(FIXTURES / "noarch", root)
    result = run_cli("build", root / "build.toml", "--backend", "cpu")
    assert result.returncode == 0, result.stdout + result.stderr
    variant = root / "build" / "torch-cpu"
    data = (variant / "metadata.json").read_bytes()
    parsed = rust.Metadata.from_bytes(data)
    assert parsed.digest is not None and parsed.provenance is not None
    parsed.digest.validate(rust.Digest.hash_variant(rust.DigestAlgorithm.SHA256, variant))
    assert set(json.loads(data)["digest"]["files"]) == {"__init__.py", "_ops.py"}
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pathlib import Path; from kernels import get_local_kernel; "
            f"m = get_local_kernel(Path({str(root)!r}), backend='cpu'); print(m.__name__)",
        ],
        capture_output=True,
        text=True,
        cwd="/",
        check=False,
    )
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
