"""Shared pieces of the security tests: a sentinel tree beside the project that no attack may
change, a project copy to attack, and the ways the tests of more than one promise run
build2cmake, CMake and the pip metadata provider."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parent.parent
PROVIDER_FOLDER = "cmake/build2cmake-metadata"
UNIVERSAL = '[general]\nname = "uni"\nuniversal = true\nversion = 1\n'


def state(root: Path) -> dict[str, tuple[str, int, bytes | str]]:
    """Every entry under `root` (symlinks not followed): kind, mode and content or link target."""
    entries: dict[str, tuple[str, int, bytes | str]] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            info = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(info.st_mode):
                entries[rel] = ("link", 0, os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                entries[rel] = ("dir", stat.S_IMODE(info.st_mode), b"")
            elif stat.S_ISREG(info.st_mode):
                entries[rel] = ("file", stat.S_IMODE(info.st_mode), path.read_bytes())
            else:  # a FIFO or device: never read (it would block)
                entries[rel] = ("other", stat.S_IFMT(info.st_mode), b"")
    return entries


@dataclass
class Scene:
    """A project to attack (`project`) and a sentinel tree next to it (`sentinel`)."""

    project: Path
    sentinel: Path
    before: dict[str, tuple[str, int, bytes | str]]

    @property
    def build_toml(self) -> Path:
        return self.project / "build.toml"

    def assert_sentinel_untouched(self) -> None:
        """The sentinel tree is byte-identical to how the test made it."""
        assert state(self.sentinel) == self.before


def make_sentinel(root: Path) -> None:
    """Files an attacker would like to delete or overwrite, including names generate uses and
    the temporary-file names its sweep looks for."""
    (root / "deep" / "er").mkdir(parents=True)
    (root / "precious.txt").write_text("do not touch\n")
    (root / "deep" / "er" / "data.bin").write_bytes(bytes(range(256)))
    (root / "CMakeLists.txt").write_text("# the sentinel's own\n")
    (root / "pyproject.toml").write_text("[project]\nname = 'sentinel'\n")
    (root / "metadata.json").write_text("{}\n")
    (root / "cmake-x").mkdir()
    (root / "cmake-x" / "keep.txt").write_text("keep\n")
    for name in ("build2cmake_torch.cmake", "_ops.py", "CMakeLists.txt", "pyproject.toml"):
        (root / f".{name}.stale.tmp").write_text("not yours\n")
    (root / "link-to-precious").symlink_to("precious.txt")


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / "scale_add", project, symlinks=True)
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    make_sentinel(sentinel)
    return Scene(project, sentinel, state(sentinel))


@pytest.fixture
def own_key_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """build2cmake's build-folder key lives in a folder of this test (children inherit it)."""
    monkeypatch.setenv("BUILD2CMAKE_CACHE", str(tmp_path / "cache"))


def make_universal(scene: Scene) -> Path:
    """Turn the scene's project into a universal kernel `uni`; returns its package folder."""
    for child in scene.project.iterdir():
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()
    scene.build_toml.write_text(UNIVERSAL)
    package = scene.project / "torch-ext" / "uni"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from ._ops import ops\n")
    (package / "helpers.py").write_text("X = 1\n")
    return package


def cli(*args: str | os.PathLike[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The real command line in a fresh interpreter, with a timeout (a hang fails the test)."""
    return subprocess.run(
        [sys.executable, "-m", "build2cmake", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def assert_one_user_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit 2 with exactly one error line (plus warnings), naming what the test expects."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("build2cmake: error")]
    assert len(errors) == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def cli_in(
    cwd: Path, *args: str | os.PathLike[str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """The real command line run from `cwd` (as CI runs it inside the clone)."""
    return subprocess.run(
        [sys.executable, "-m", "build2cmake", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def cmake(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> (
    subprocess.CompletedProcess[str]
):  # fmt: skip
    return subprocess.run(
        ["cmake", *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, check=False
    )


def configure(project: Path, *defines: str) -> subprocess.CompletedProcess[str]:
    """CMake's configure as scikit-build-core runs it: from the project folder, into build/cmake."""
    return cmake("-S", ".", "-B", "build/cmake", "-G", "Ninja", "-DBUILD2CMAKE_BACKEND=cpu",
                 *(f"-D{d}" for d in defines), cwd=project)  # fmt: skip


def load_provider(
    project: Path, build_dir: str = "build/cmake"
) -> subprocess.CompletedProcess[str]:
    """The provider as scikit-build-core's own loader imports and calls it (what pip's build
    runs first), in a fresh interpreter started in the project folder as pip starts hooks."""
    code = (
        "from scikit_build_core.builder._load_provider import load_provider\n"
        f"m = load_provider('build2cmake_metadata', {PROVIDER_FOLDER!r})\n"
        f"settings = {{'stable-abi': '2.9', 'build-dir': {build_dir!r}}}\n"
        "print(m.dynamic_metadata('dependencies', settings))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=60
    )
