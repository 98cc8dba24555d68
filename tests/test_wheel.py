"""CI proves the package, not the checkout: build2cmake's wheel (`pip wheel --no-deps .`),
installed into a clean venv outside the repository with a torch, does what the issue asks of a
user who only ran `pip install build2cmake`: `toolchain list`, `toolchain install rocm-7.2` (a
no-op where it is installed; minutes where it is not), `doctor` naming the toolchain that
compiles gfx942, and kernels/gemm built for gfx942 by `build` inside the toolchain, its code
objects read back with build2cmake.toolchains.offload from the venv.

Needs root on Linux (the toolchain runs with chroot), the network to PyPI for the venv's
packages and, where rocm-7.2 is not installed yet, to the Debian mirror.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_gemm_project import copy_gemm

pytestmark = [pytest.mark.toolchains, pytest.mark.rocm, pytest.mark.compile]

TORCH = "torch==2.13.0"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean venv (no system site-packages) holding the wheel built from this checkout."""
    if sys.platform != "linux" or os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("building in a toolchain needs root on Linux and unshare")
    work = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", str(REPO), "-w", str(work)],
        capture_output=True, text=True, cwd=work, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = work.glob("build2cmake-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    # What a toolchain needs comes in the wheel: the package, its templates, no script.
    needed = (
        "build2cmake/toolchains/recipes.py", "build2cmake/toolchains/sandbox.py",
        "build2cmake/builds/inside.py",
        "build2cmake/_data/cmake_templates/rocm/build2cmake_find_rocm.cmake",
    )  # fmt: skip
    for name in needed:
        assert name in names, name
    assert not any(n.startswith("scripts/") or n.endswith(".sh") for n in names)
    env_dir = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    installed = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel), TORCH],
        capture_output=True, text=True, cwd=work, check=False,
    )  # fmt: skip
    if installed.returncode != 0:
        pytest.skip(f"cannot install the wheel with {TORCH} here: {installed.stderr[-600:]}")
    return env_dir


def _run(venv: Path, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """build2cmake from the venv, in `cwd`, with nothing of the checkout on the path."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL"))}
    environment.update(PATH=f"{venv / 'bin'}:{os.environ.get('PATH', '')}", **env)
    return subprocess.run(
        [str(venv / "bin" / "build2cmake"), *args],
        capture_output=True, text=True, cwd=cwd, env=environment, timeout=3600, check=False,
    )  # fmt: skip


def test_the_installed_wheel_installs_the_toolchain_and_builds_gemm_for_gfx942_in_it(
    venv: Path, tmp_path: Path
) -> None:
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import build2cmake; print(build2cmake.__file__)"],
        capture_output=True, text=True, cwd=tmp_path, check=True,
    ).stdout.strip()  # fmt: skip
    assert where.startswith(str(venv)), where  # the wheel's, not the checkout's

    listed = _run(venv, "toolchain", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"^rocm-7\.2 ", listed.stdout, re.MULTILINE), listed.stdout

    made = _run(venv, "toolchain", "install", "rocm-7.2", cwd=tmp_path)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-3000:]
    assert "rocm-7.2: " in made.stdout + made.stderr
    listed = _run(venv, "toolchain", "list", cwd=tmp_path)
    assert re.search(r"^rocm-7\.2 +7\.2\.\S+ .* installed: ", listed.stdout, re.MULTILINE)

    root = copy_gemm(tmp_path)
    doctor = _run(venv, "doctor", "build.toml", cwd=root)
    assert re.search(r"^    gfx942 +compiled by: .*\brocm-7\.2\b", doctor.stdout, re.MULTILINE), (
        doctor.stdout
    )

    # gemm also declares gfx940, which only the host's older clang lists: the host would keep
    # it, so the toolchain is chosen by name, as doctor's fix line says.
    built = _run(
        venv, "build", "build.toml", "--backend", "rocm", "-j", "2", cwd=root,
        BUILD2CMAKE_TOOLCHAIN="rocm-7.2",
    )  # fmt: skip
    log = root / "build" / "cmake-torch2.13-rocm72.log"
    assert built.returncode == 0, (
        built.stdout[-3000:]
        + built.stderr[-3000:]
        + (log.read_text()[-3000:] if log.exists() else "")
    )
    assert "build2cmake: building in toolchain rocm-7.2 (BUILD2CMAKE_TOOLCHAIN=rocm-7.2)" in (
        built.stdout
    )
    last = built.stdout.strip().splitlines()[-1]
    assert last.startswith("built build/torch213-cxx11-rocm72-x86_64-linux (backend rocm, archs ")
    assert "gfx942" in last
    variant = root / "build" / "torch213-cxx11-rocm72-x86_64-linux"
    (library,) = variant.glob("_gemm_rocm_*.so")
    read_back = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import json, pathlib, sys\nfrom build2cmake.toolchains.offload import rocm_targets\n"
         "print(json.dumps(sorted(rocm_targets(pathlib.Path(sys.argv[1])))))", str(library)],
        capture_output=True, text=True, cwd=tmp_path, check=True,
    )  # fmt: skip
    targets = json.loads(read_back.stdout)
    assert "gfx942" in targets and set(targets) <= {"gfx90a", "gfx940", "gfx942"}, targets
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["backend"]["archs"] == sorted(t.split(":")[0] for t in targets)


def test_the_installed_wheel_pip_installs_gemm_for_gfx942_in_a_toolchain(
    venv: Path, tmp_path: Path
) -> None:
    """`pip install -e` in a toolchain, from the wheel alone: pip runs CMake in the Python it is
    run by, so it runs inside (`build2cmake toolchain run rocm-6.4 -- pip install ...`, the
    route docs/rocm.md gives; the rocm-6.4 toolchain holds Debian's CPU torch), and the editable
    build's extension carries gfx942."""
    listed = _run(venv, "toolchain", "path", "rocm-6.4", cwd=tmp_path)
    if listed.returncode != 0:
        pytest.skip("the rocm-6.4 toolchain is not installed here")
    root = copy_gemm(tmp_path)
    inside = ("toolchain", "run", "rocm-6.4", "--bind", str(root), "--")
    generated = _run(venv, *inside, "python", "-m", "build2cmake", "generate-torch", "build.toml",
                     cwd=root)  # fmt: skip
    assert generated.returncode == 0, generated.stdout[-2000:] + generated.stderr[-2000:]
    # gemm declares cpu too, which the toolchain's CPU torch would pick: rocm is named.
    rocm = ("-C", "cmake.define.BUILD2CMAKE_BACKEND=rocm")
    installed = _run(venv, *inside, "pip", "install", "--no-build-isolation", *rocm, "-e", ".",
                     cwd=root)  # fmt: skip
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    libraries = sorted((root / "build" / "cmake").rglob("_gemm_rocm_*.so"))
    assert libraries, "no extension built"
    read_back = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import json, pathlib, sys\nfrom build2cmake.toolchains.offload import rocm_targets\n"
         "print(json.dumps(sorted(rocm_targets(pathlib.Path(sys.argv[1])))))", str(libraries[0])],
        capture_output=True, text=True, cwd=tmp_path, check=True,
    )  # fmt: skip
    targets = {t.split(":")[0] for t in json.loads(read_back.stdout)}
    assert "gfx942" in targets and targets <= {"gfx90a", "gfx942"}, targets
