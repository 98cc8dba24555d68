"""What may run: nothing a cloned project plants, whichever command starts Python, CMake or uv.

Planted: modules, packages and cached bytecode beside our pip metadata provider; build folders
(build/cmake*) shipped with a CMakeCache.txt whose entries run CMake code at the configure;
Python and CMake modules of the project beside our scripts; a `build2cmake/` package or a
uv.toml in the clone. The kernel card's template is the clone's too: it is rendered in a sandbox
bounded in time, memory and output. Each planted piece of code leaves a mark in the sentinel tree
if it runs; every hang case runs under a time limit.
"""

from __future__ import annotations

import os
import py_compile
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from build2cmake.api import generate_torch
from build2cmake.config import load_project
from build2cmake.ground import folder_marks
from build2cmake.ground.errors import Build2CMakeError
from build2cmake.ground.safefs import ProjectFolder
from build2cmake.share import card
from tests.conftest import REPO
from tests.security import (
    PROVIDER_FOLDER,
    Scene,
    assert_one_user_error,
    cli,
    configure,
    load_provider,
    make_universal,
    state,
)

# The pip metadata provider and the build folders a clone ships ------------------------------------


MARKER = "ran.txt"
PYC = f"build2cmake_metadata.{sys.implementation.cache_tag}.pyc"


def evil(scene: Scene) -> str:
    """Python that leaves the mark in the sentinel tree."""
    return f"open({str(scene.sentinel / MARKER)!r}, 'w').write('x')\n"


def ran(scene: Scene) -> bool:
    return (scene.sentinel / MARKER).exists()


def plant_cmake_cache(scene: Scene, build_dir: str) -> Path:
    """A build folder as a clone can ship it: a CMakeCache.txt for this very path whose entry
    runs CMake code at the first project(), and our -D record saying nothing changed."""
    folder = scene.project / build_dir
    folder.mkdir(parents=True)
    payload = scene.project / "payload.cmake"
    payload.write_text(
        f'file(WRITE "{(scene.sentinel / MARKER).as_posix()}" "x")\n'
        'message(FATAL_ERROR "the planted cache ran")\n'
    )
    (folder / "CMakeCache.txt").write_text(
        f"CMAKE_HOME_DIRECTORY:INTERNAL={scene.project}\n"
        f"CMAKE_CACHEFILE_DIR:INTERNAL={folder}\n"
        f"CMAKE_PROJECT_TOP_LEVEL_INCLUDES:STRING={payload}\n"
    )
    (folder / "build2cmake-defines.json").write_text('["CMAKE_CXX_COMPILER_LAUNCHER=/bin/false"]\n')
    return folder


@pytest.mark.usefixtures("own_key_folder")
@pytest.mark.parametrize(
    "planted",
    [
        "unicodedata.py",  # a module the provider imports
        "hmac.py",
        "build2cmake_metadata/__init__.py",  # a package wins over the module
        f"build2cmake_metadata{'.cpython-311-x86_64-linux-gnu.so'}",  # so does an extension
        "build2cmake_metadata.pyc",
    ],
)
def test_generate_refuses_anything_planted_beside_the_metadata_provider(
    scene: Scene, planted: str
) -> None:
    path = scene.project / PROVIDER_FOLDER / planted
    path.parent.mkdir(parents=True)
    path.write_text(evil(scene))
    before = state(scene.project)
    result = cli("generate-torch", scene.build_toml)
    assert_one_user_error(result, planted.split("/")[0], "keeps only its metadata provider")
    assert state(scene.project) == before
    scene.assert_sentinel_untouched()


@pytest.mark.usefixtures("own_key_folder")
def test_generate_removes_planted_bytecode_so_pip_runs_our_provider(scene: Scene) -> None:
    """A cached .pyc marked "unchecked" is run without looking at the source beside it."""
    source = scene.project.parent / "evil_source.py"
    source.write_text(evil(scene) + "def dynamic_metadata(field, settings=None):\n    return []\n")
    cache = scene.project / PROVIDER_FOLDER / "__pycache__"
    cache.mkdir(parents=True)
    py_compile.compile(
        str(source),
        cfile=str(cache / PYC),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    result = cli("generate-torch", scene.build_toml)
    assert result.returncode == 0, result.stderr
    assert not cache.exists()
    loaded = load_provider(scene.project)
    assert loaded.returncode == 0, loaded.stderr
    assert "torch>=2.9" in loaded.stdout
    assert not ran(scene)


@pytest.mark.usefixtures("own_key_folder")
def test_the_provider_never_imports_modules_of_the_projects_cmake_folder(scene: Scene) -> None:
    """The provider used to be imported from cmake/, first on the import path: a cmake/json.py
    or cmake/unicodedata.py (files generate leaves alone there) ran in pip's build."""
    generate_torch(scene.build_toml)
    for name in ("unicodedata", "hmac", "secrets", "shutil", "json", "importlib"):
        (scene.project / "cmake" / f"{name}.py").write_text(evil(scene))
    loaded = load_provider(scene.project)
    assert loaded.returncode == 0, loaded.stderr
    assert not ran(scene)


@pytest.mark.usefixtures("own_key_folder")
def test_the_provider_replaces_a_shipped_build_folder_before_cmake_reads_it(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    folder = plant_cmake_cache(scene, "build/cmake")
    other = plant_cmake_cache_copy(scene, folder, "build/cmake-variant-cpu")
    loaded = load_provider(scene.project)
    assert loaded.returncode == 0, loaded.stderr
    for path in (folder, other):
        assert f"{path}: removed; it was not made by build2cmake" in loaded.stderr
    assert not other.exists()
    assert sorted(p.name for p in folder.iterdir()) == [folder_marks.MARK]
    # Made here now: the next build keeps it (and what CMake writes into it).
    (folder / "CMakeCache.txt").write_text("# CMake's own\n")
    again = load_provider(scene.project)
    assert again.returncode == 0 and "removed" not in again.stderr, again.stderr
    assert (folder / "CMakeCache.txt").is_file()
    assert not ran(scene)
    scene.assert_sentinel_untouched()


def plant_cmake_cache_copy(scene: Scene, folder: Path, name: str) -> Path:
    copy = scene.project / name
    shutil.copytree(folder, copy)
    return copy


@pytest.mark.usefixtures("own_key_folder")
def test_build_replaces_a_shipped_build_folder_before_cmake_reads_it(scene: Scene) -> None:
    """The red-team case: the planted cache's CMAKE_PROJECT_TOP_LEVEL_INCLUDES ran at the
    configure of `build2cmake build`. Now the folder is replaced; the build then stops at its
    first compile (the launcher /bin/false keeps this test fast)."""
    plant_cmake_cache(scene, "build/cmake-variant-cpu")
    start = time.monotonic()
    result = cli(
        "build", scene.build_toml, "--backend", "cpu",
        "-D", "CMAKE_CXX_COMPILER_LAUNCHER=/bin/false", timeout=300,
    )  # fmt: skip
    assert not ran(scene), result.stdout
    assert "it was not made by build2cmake on this machine" in result.stdout
    assert_one_user_error(result, "CMake build failed")
    assert time.monotonic() - start < 300
    scene.assert_sentinel_untouched()


@pytest.mark.usefixtures("own_key_folder")
def test_a_first_build_reports_no_build_folder_removed(scene: Scene) -> None:
    """A fresh copy has no build folder: the first build makes and marks it, and has nothing to
    report as removed (it used to make the folder first, then remove it as "not made here")."""
    result = cli(
        "build", scene.build_toml, "--backend", "cpu",
        "-D", "CMAKE_CXX_COMPILER_LAUNCHER=/bin/false", timeout=300,
    )  # fmt: skip
    assert "removed" not in result.stdout + result.stderr, result.stdout
    assert (scene.project / "build" / "cmake-variant-cpu" / folder_marks.MARK).is_file()


@pytest.mark.usefixtures("own_key_folder")
@pytest.mark.compile
def test_pip_install_replaces_a_shipped_build_folder(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    plant_cmake_cache(scene, "build/cmake")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "-v",
         "-e", str(scene.project), "-C", "cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=/bin/false"],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert result.returncode != 0  # the launcher stops the first compile
    assert "it was not made by build2cmake on this machine" in result.stdout + result.stderr
    assert not ran(scene)


@pytest.mark.usefixtures("own_key_folder")
def test_marks_of_the_provider_and_of_build2cmake_agree(scene: Scene) -> None:
    """The provider carries a copy of folder_marks: each accepts the other's marks."""
    generate_torch(scene.build_toml)
    with ProjectFolder(scene.project) as folder:
        assert folder_marks.claim(folder, "build/cmake") is None
        (scene.project / "build" / "cmake" / "CMakeCache.txt").write_text("# kept\n")
        assert load_provider(scene.project).returncode == 0
        assert (scene.project / "build" / "cmake" / "CMakeCache.txt").is_file()
        shutil.rmtree(scene.project / "build")
        assert load_provider(scene.project).returncode == 0
        key = folder_marks.folder_key()
        assert folder_marks.made_here(folder, "build/cmake", key)


@pytest.mark.usefixtures("own_key_folder")
def test_a_mark_copied_to_another_folder_is_not_accepted(scene: Scene) -> None:
    """A mark proves one folder (device and inode) was made here: copies of it prove nothing."""
    with ProjectFolder(scene.project) as folder:
        folder_marks.claim(folder, "build/cmake")
        key = folder_marks.folder_key()
        shutil.copytree(scene.project / "build" / "cmake", scene.project / "build" / "cmake-x")
        assert folder_marks.made_here(folder, "build/cmake", key)
        assert not folder_marks.made_here(folder, "build/cmake-x", key)
        note = folder_marks.claim(folder, "build/cmake-x")
        assert note is not None and "removed" in note
        assert folder_marks.made_here(folder, "build/cmake-x", key)


# Python and CMake modules of the project, where the configure and doctor start Python -------------


def plant_module(folder: Path, name: str, scene: Scene) -> None:
    (folder / f"{name}.py").write_text(f"open({str(scene.sentinel / MARKER)!r}, 'w').write('x')\n")


@pytest.mark.compile
def test_configure_never_imports_the_projects_python_modules(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    for name in ("sysconfig", "json", "importlib", "torch"):
        plant_module(scene.project, name, scene)
    (scene.project / "build" / "cmake").mkdir(parents=True)
    plant_module(scene.project / "build" / "cmake", "sysconfig", scene)
    result = configure(scene.project)
    assert result.returncode == 0, result.stderr
    assert "torch 2." in result.stdout  # torch was found, from the environment
    assert not (scene.sentinel / MARKER).exists()


@pytest.mark.compile
def test_configure_never_runs_cmake_modules_the_project_ships(scene: Scene) -> None:
    """The generated CMake includes our modules by path: a cloned project's cmake/FindTorch.cmake
    or CheckLinkerFlag.cmake must not replace CMake's (they would run at every configure)."""
    generate_torch(scene.build_toml)
    mark = (scene.sentinel / MARKER).as_posix()
    for name in ("FindTorch", "CheckLinkerFlag", "FindPython", "FindCUDAToolkit", "Findhip"):
        (scene.project / "cmake" / f"{name}.cmake").write_text(f'file(WRITE "{mark}" "x")\n')
    result = configure(scene.project)
    assert result.returncode == 0, result.stderr
    assert "torch 2." in result.stdout
    assert not (scene.sentinel / MARKER).exists()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="needs python -P (3.11)")
def test_doctor_never_imports_the_projects_python_modules(scene: Scene) -> None:
    """Run from inside the project, as users do; -P keeps the parent's own sys.path clean (the
    `build2cmake` console script is like that), so only the child's behaviour is tested."""
    for name in ("json", "torch", "importlib"):
        plant_module(scene.project, name, scene)
    result = subprocess.run(
        [sys.executable, "-P", "-m", "build2cmake", "doctor", "build.toml"],
        capture_output=True, text=True, cwd=scene.project, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    assert re.search(r"^torch: +2\.\d+", result.stdout, re.MULTILINE), result.stdout
    assert not (scene.sentinel / MARKER).exists()


# build2cmake and uv started again: in a ROCm chroot, for a variant's environment ------------------


CHROOT_SCRIPT = REPO / "scripts" / "rocm-chroot.sh"


def _rocm72_chroot() -> None:
    """Skip (saying why) unless the cached ROCm 7.2 chroot of scripts/rocm-chroot.sh is usable."""
    if sys.platform != "linux" or os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("the ROCm chroot needs root on Linux and unshare")
    info = subprocess.run(
        ["bash", str(CHROOT_SCRIPT), "info", "rocm72"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if info.returncode != 0:
        pytest.skip(f"no cached ROCm 7.2 chroot: {info.stderr.strip()}")


@pytest.mark.rocm
@pytest.mark.compile
def test_chroot_build_runs_no_build2cmake_package_planted_in_the_project(tmp_path: Path) -> None:
    """`build --variants` of a ROCm variant whose ROCm is in a chroot runs build2cmake again in
    there, as root, from the project folder. `python -m build2cmake` puts the current folder first
    on sys.path, so a `build2cmake/` package in the clone ran instead of ours (as root, with the
    host's /dev and /sys mounted in the chroot, and the cached chroot writable)."""
    _rocm72_chroot()
    from tests.test_gemm_project import copy_gemm

    root = copy_gemm(tmp_path)
    planted = root / "build2cmake"
    planted.mkdir()
    marker = root / "PLANTED-RAN"
    code = f"open({str(marker)!r}, 'w').write('ran')\nimport os\nos._exit(0)\n"
    (planted / "__init__.py").write_text(code)
    (planted / "__main__.py").write_text(code)
    # An empty local index: the real build in the chroot fails fast (no torch) once it starts.
    empty_index = tmp_path / "empty-index"
    empty_index.mkdir()
    result = subprocess.run(
        [sys.executable, "-P", "-m", "build2cmake", "build", str(root / "build.toml"),
         "--variants", "torch2.13-rocm72", "-j", "1", "--index-url", str(empty_index)],
        cwd="/", capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert not marker.exists(), result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    # Ours ran in the chroot and failed for want of a torch (no variant was built).
    assert result.returncode == 1, result.stdout + result.stderr
    assert "in the chroot rocm72" in result.stdout, result.stdout


def _planted_torch_wheel(folder: Path, marker: Path) -> None:
    """A 'torch 2.13.99' wheel whose .pth file leaves `marker` whenever the environment's Python
    starts (what a wheel from the clone could run, in every later build using that env)."""
    folder.mkdir()
    info = "torch-2.13.99.dist-info"
    files = {
        "torch/__init__.py": "__version__ = '2.13.99'\n",
        "planted.pth": f"import os; open({str(marker)!r}, 'w').write('ran')\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: torch\nVersion: 2.13.99\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    with zipfile.ZipFile(folder / "torch-2.13.99-py3-none-any.whl", "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
        wheel.writestr(f"{info}/RECORD", "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n")


def test_variant_environment_takes_no_uv_configuration_from_the_clone(
    scene: Scene, tmp_path: Path
) -> None:
    """`build --variants` makes each variant's environment with uv, which reads uv.toml (and
    pyproject.toml's [tool.uv]) from the folder it runs in and its parents. Run in the project
    folder (the chroot's build always is), a clone's uv.toml added its own wheels: a planted
    torch was installed into the cached environment, which every later project with the same
    variant reuses, and its .pth file ran at every start of that environment's Python."""
    marker = scene.sentinel / "PLANTED-RAN"
    _planted_torch_wheel(scene.project / "wheels", marker)
    (scene.project / "uv.toml").write_text(f'find-links = ["{scene.project / "wheels"}"]\n')
    empty_index = tmp_path / "empty-index"
    empty_index.mkdir()
    cache = tmp_path / "cache"
    result = subprocess.run(
        [sys.executable, "-P", "-m", "build2cmake", "build", "build.toml",
         "--variants", "torch2.13-cpu", "--index-url", str(empty_index)],
        cwd=scene.project, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "BUILD2CMAKE_CACHE": str(cache)},
    )  # fmt: skip
    assert not marker.exists(), result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    # No torch in the (empty) index named on the command line: the variant fails, saying so.
    assert result.returncode == 1, result.stdout + result.stderr
    log = (scene.project / "build" / "cmake-torch2.13-cpu.log").read_text()
    assert "torch was not found in the package registry" in log, log[-2000:]
    scene.assert_sentinel_untouched()


# The kernel card: the clone's template, rendered in a bounded sandbox -----------------------------


@pytest.mark.parametrize(
    ("template", "needle"),
    [
        # Unbounded loops (the sandbox's range gives 100000 items; nested, 10**10 iterations).
        (
            "# card\n\n{% for i in range(100000) %}{% for j in range(100000) %}"
            "{% endfor %}{% endfor %}\n",
            "(line 3): took longer than",
        ),
        ("{{ name }}\n{{ 'x' * 10**10 }}\n", "(line 2)"),
        ("{{ name }}\n\n{{ 'x' | center(10**10) }}\n", "(line 3)"),
        ("{% for i in range(100000) %}{{ 'y' * 100 }}{% endfor %}\n", "over 4194304 characters"),
        ("ok\n{{ 1 / 0 }}\n", "(line 2): ZeroDivisionError"),
        ("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}\n", "nests too deeply"),
    ],
)
def test_card_template_is_bounded_in_time_memory_and_output(
    scene: Scene, template: str, needle: str
) -> None:
    make_universal(scene)
    (scene.project / "CARD.md").write_text(template)
    project = load_project(scene.build_toml)
    with pytest.raises(Build2CMakeError, match=r"CARD\.md: cannot be filled in") as raised:
        card.render_card(project, scene.project)
    assert needle in str(raised.value)


def test_build_with_a_looping_card_is_one_error(scene: Scene) -> None:
    make_universal(scene)
    (scene.project / "CARD.md").write_text(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}\n"
    )
    result = cli("build", scene.build_toml, timeout=90)
    assert_one_user_error(result, "CARD.md", "line 1", "took longer than")
