from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import time
import venv
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

# The security tests' fixtures: a project + sentinel scene, and a build-folder key of its own.
from tests.security import own_key_folder, scene  # noqa: F401

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).parent.parent


@contextlib.contextmanager
def serving(
    process: subprocess.Popen[Any],
    ready: Callable[[], bool],
    not_ready: str,
    *,
    timeout: float = 30,
    log: Path | None = None,
) -> Iterator[None]:
    """A server a test started (Redis, an sccache-dist scheduler or build server): waits until
    `ready()`, failing with `not_ready` after `timeout` s or with the server's exit (and the tail
    of its `log`), then runs the test, and stops the server however the test ends (SIGTERM, then
    SIGKILL after 30 s)."""
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            exited = f"the server exited: {log.read_text()[-2000:] if log else ''}"
            assert process.poll() is None, exited
            assert time.monotonic() < deadline, not_ready
            time.sleep(0.1)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def load_script(path: Path) -> ModuleType:
    """A script of benchmarks/ imported as a module of its own name (registered in sys.modules:
    dataclasses look their module up there), its folder first on the import path so that it
    finds its sibling scripts."""
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def project(tmp_path: Path) -> Callable[[str], Path]:
    """Copy a fixture kernel project into tmp_path and return its folder."""

    def copy(name: str) -> Path:
        destination = tmp_path / name
        shutil.copytree(FIXTURES / name, destination, symlinks=True)
        return destination

    return copy


def run_cli(
    *args: str | os.PathLike[str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real `build2cmake` command line in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "build2cmake", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )


class BuildEnv:
    """A virtual environment that sees this interpreter's packages (torch, scikit-build-core)
    and takes the kernel packages the tests install, so they never land in the real one."""

    def __init__(self, root: Path) -> None:
        venv.EnvBuilder(system_site_packages=True, with_pip=False).create(root)
        self.python = root / "bin" / "python"

    def pip_install(self, project: Path, *config: str, editable: bool = True) -> None:
        result = self.pip(project, *config, editable=editable)
        assert result.returncode == 0, result.stdout + result.stderr

    def pip(
        self, project: Path, *config: str, editable: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """`pip install` of `project` (-C settings `config`), whatever its outcome."""
        args = [
            str(sys.executable),
            "-m",
            "pip",
            "--python",
            str(self.python),
            "install",
            "--no-build-isolation",
            "--no-deps",
            "-q",
        ]
        for setting in config:
            args += ["-C", setting]
        args += ["-e", str(project)] if editable else [str(project)]
        return subprocess.run(args, capture_output=True, text=True, check=False)

    def run(self, code: str) -> subprocess.CompletedProcess[str]:
        """Run Python code in the environment (from a neutral folder, so imports are real)."""
        return subprocess.run(
            [str(self.python), "-c", code], capture_output=True, text=True, cwd="/", check=False
        )


@pytest.fixture
def build_env(tmp_path_factory: pytest.TempPathFactory) -> BuildEnv:
    return BuildEnv(tmp_path_factory.mktemp("venv"))


def have_rocm_toolchain() -> bool:
    return shutil.which("hipconfig") is not None or Path("/opt/rocm/bin/hipconfig").exists()


requires_rocm_toolchain = pytest.mark.skipif(
    not have_rocm_toolchain(),
    reason="no ROCm toolchain (apt-get install hipcc libamdhip64-dev rocm-device-libs "
    "libamd-comgr-dev libhsa-runtime-dev)",
)


def cuobjdump() -> str | None:
    """cuobjdump from the CUDA toolkit or the nvidia-cuda-cuobjdump package, if installed."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import nvidia

        for root in nvidia.__path__:
            for candidate in Path(root).glob("cu*/bin/cuobjdump"):
                return str(candidate)
    except ImportError:
        pass
    return None


# nvcc on PATH, else where the CUDA toolkit installs it.
NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
requires_nvcc = pytest.mark.skipif(
    not Path(NVCC).exists(), reason="no nvcc (install the CUDA toolkit)"
)
