"""Attack class: a cloned project's build folders (build/cmake*) and Python files.

CMake, Ninja, the compilers and our build-time scripts follow symlinks, so a symlink planted in a
build folder must never be written through, whether the build runs through `build2cmake build`,
`pip install -e` or a plain `cmake -S -B`; and Python modules of the project (a json.py, a
sysconfig.py, an argparse.py beside our scripts) must never run in place of the standard library's
when build2cmake or the generated CMake start Python.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from build2cmake import builder, folder_marks
from build2cmake.api import generate_torch
from build2cmake.errors import Build2CMakeError
from build2cmake.safefs import ProjectFolder
from tests.conftest import REPO, BuildEnv, requires_rocm_toolchain
from tests.security import FIXTURES, Scene, assert_one_user_error, cli, state

# A module that, when imported, leaves a mark in the sentinel tree (the test then fails).
MARKER = "ran.txt"
# An escape sequence (clear the screen, turn red) in a planted name, and how it must be shown.
ESCAPES = "\x1b[2J\x1b[31m"
ESCAPES_SHOWN = "\\x1b[2J\\x1b[31m"


def plant_module(folder: Path, name: str, scene: Scene) -> None:
    (folder / f"{name}.py").write_text(f"open({str(scene.sentinel / MARKER)!r}, 'w').write('x')\n")


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


def one_line(text: str) -> str:
    return " ".join(text.split())


# Refused before anything runs: generate, build and the pip metadata hook -----------------------


@pytest.mark.parametrize(
    "planted",
    [
        "build/cmake/CMakeFiles",
        "build/cmake/build2cmake-rebuilt",
        "build/cmake/hipified",
        "build/cmake/CMakeFiles/_scale_add.dir/deep",
        "build/cmake-variant-cpu/build2cmake-defines.json",
    ],
)
def test_generate_refuses_a_symlink_anywhere_in_a_build_folder(scene: Scene, planted: str) -> None:
    link = scene.project / planted
    link.parent.mkdir(parents=True)
    link.symlink_to(scene.sentinel / "precious.txt")
    before = state(scene.project)
    result = cli("generate-torch", scene.build_toml)
    assert_one_user_error(result, f"{link}: is a symlink (to {scene.sentinel}", "real files")
    assert state(scene.project) == before  # refused before the first write
    scene.assert_sentinel_untouched()


def test_generate_refuses_a_fifo_in_the_build_folder(scene: Scene) -> None:
    (scene.project / "build" / "cmake").mkdir(parents=True)
    os.mkfifo(scene.project / "build" / "cmake" / "build.ninja")
    assert_one_user_error(cli("generate-torch", scene.build_toml), "build.ninja: is a FIFO")


def test_build_never_writes_its_defines_record_through_a_planted_symlink(scene: Scene) -> None:
    """The red-team case: `build` overwrote the link's target with "[]"."""
    folder = scene.project / "build" / "cmake-variant-cpu"
    folder.mkdir(parents=True)
    (folder / "build2cmake-defines.json").symlink_to(scene.sentinel / "precious.txt")
    result = cli("build", scene.build_toml, "--backend", "cpu")
    assert_one_user_error(result, "build2cmake-defines.json: is a symlink", "real files")
    scene.assert_sentinel_untouched()


def test_compile_project_checks_its_build_folder_before_cmake_runs(scene: Scene) -> None:
    """`build --variants` reaches compile_project without generate: it checks on its own. (A
    folder the clone shipped is replaced whole before this check; a link inside a folder made
    here is refused.)"""
    generate_torch(scene.build_toml)
    with ProjectFolder(scene.project) as project:
        folder_marks.claim(project, "build/cmake-variant-cpu")
    folder = scene.project / "build" / "cmake-variant-cpu" / "CMakeFiles"
    folder.symlink_to(scene.sentinel)
    with pytest.raises(Build2CMakeError, match="CMakeFiles: is a symlink"):
        builder.compile_project(scene.project, "cpu")
    scene.assert_sentinel_untouched()


def test_defines_record_planted_as_a_symlink_is_ignored_and_replaced(scene: Scene) -> None:
    folder = scene.project / "b"
    folder.mkdir()
    record = folder / "build2cmake-defines.json"
    record.symlink_to(scene.sentinel / "precious.txt")
    assert builder.fresh_cache_arguments(folder, ["A=1"]) == []  # not read through the link
    builder._record_defines(folder, ["A=1"])
    assert not record.is_symlink() and record.read_text() == '["A=1"]\n'
    scene.assert_sentinel_untouched()


@pytest.mark.parametrize("planted", ["build", "build/cmake", "build/cmake/CMakeFiles"])
def test_pip_install_refuses_a_planted_build_folder_symlink_before_cmake_runs(
    scene: Scene, build_env: BuildEnv, planted: str
) -> None:
    generate_torch(scene.build_toml)
    elsewhere = scene.project.parent / "elsewhere"
    elsewhere.mkdir()
    link = scene.project / planted
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(elsewhere)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(build_env.python), "install",
         "--no-build-isolation", "--no-deps", "-q", "-e", str(scene.project)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert f"{link} is a symlink" in one_line(result.stderr), result.stderr
    assert list(elsewhere.iterdir()) == []  # scikit-build-core and CMake never started


def test_pip_install_prints_a_planted_link_target_escaped(
    scene: Scene, build_env: BuildEnv
) -> None:
    """cmake/build2cmake_metadata.py names the link and its target: an escape sequence in the
    target reaches the terminal escaped."""
    generate_torch(scene.build_toml)
    link = scene.project / "build" / "cmake" / "CMakeFiles"
    link.parent.mkdir(parents=True)
    link.symlink_to(f"{scene.sentinel}{ESCAPES}")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(build_env.python), "install",
         "--no-build-isolation", "--no-deps", "-q", "-e", str(scene.project)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "\x1b" not in result.stdout + result.stderr
    shown = f"{link} is a symlink (to {scene.sentinel}{ESCAPES_SHOWN})"
    assert shown in one_line(result.stderr), result.stderr
    scene.assert_sentinel_untouched()


# The generated CMake: a plain `cmake -S -B` ------------------------------------------------------


@pytest.mark.compile
def test_configure_removes_symlinks_planted_in_the_build_folder_then_stops(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    elsewhere = scene.project.parent / "elsewhere"
    elsewhere.mkdir()
    build = scene.project / "build" / "cmake"
    (build / "sub").mkdir(parents=True)
    (build / "CMakeFiles").symlink_to(elsewhere)
    (build / "build2cmake-rebuilt").symlink_to(scene.sentinel / "precious.txt")
    (build / "sub" / "compile_commands.json").symlink_to(scene.sentinel / "metadata.json")
    result = configure(scene.project)
    assert result.returncode != 0
    message = one_line(result.stderr)
    assert "held symlinks" in message
    for name in ("CMakeFiles", "build2cmake-rebuilt", "sub/compile_commands.json"):
        assert f"{build / name} (a symlink to" in message
        assert not (build / name).is_symlink()
    scene.assert_sentinel_untouched()
    # CMake itself makes CMakeFiles/pkgRedirects (empty) before the project's first line runs;
    # nothing else reached the link's target (CMake's own last writes went into real folders).
    assert sorted(p.name for p in elsewhere.rglob("*")) == ["pkgRedirects"]
    assert (build / "CMakeFiles").is_dir() and not (build / "CMakeFiles").is_symlink()
    # The next configure starts clean and succeeds.
    again = configure(scene.project)
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in elsewhere.rglob("*")) == ["pkgRedirects"]


@pytest.mark.compile
def test_configure_refuses_a_build_folder_reached_through_a_symlink(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    elsewhere = scene.project.parent / "elsewhere"
    elsewhere.mkdir()
    (scene.project / "build").symlink_to(elsewhere)
    result = configure(scene.project)
    assert result.returncode != 0
    message = one_line(result.stderr)
    assert f"{scene.project / 'build'} is a symlink (to {elsewhere})" in message, message
    # Stopped before project(): no compiler checks, no build files. (CMake's own cache and
    # CMakeFiles/ are made before the first line runs: generate, build and the pip hook refuse
    # this earlier; see the tests above.)
    assert not (elsewhere / "cmake" / "build.ninja").exists()
    assert not list(elsewhere.rglob("CMakeCXXCompiler.cmake"))


@pytest.mark.compile
def test_configure_prints_planted_link_targets_escaped(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    build = scene.project / "build" / "cmake"
    build.mkdir(parents=True)
    (build / f"a{ESCAPES}").symlink_to(f"{scene.sentinel}{ESCAPES}")
    result = configure(scene.project)
    assert result.returncode != 0
    assert "\x1b" not in result.stdout + result.stderr
    shown = f"{build}/a{ESCAPES_SHOWN} (a symlink to {scene.sentinel}{ESCAPES_SHOWN})"
    assert shown in one_line(result.stderr), result.stderr
    scene.assert_sentinel_untouched()


@pytest.mark.compile
def test_configure_prints_a_planted_build_folder_link_escaped(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    elsewhere = scene.project.parent / f"elsewhere{ESCAPES}"
    elsewhere.mkdir()
    (scene.project / "build").symlink_to(elsewhere)
    result = configure(scene.project)
    assert result.returncode != 0
    assert "\x1b" not in result.stdout + result.stderr
    shown = f"{scene.project / 'build'} is a symlink (to {scene.project.parent}/elsewhere"
    assert f"{shown}{ESCAPES_SHOWN})" in one_line(result.stderr), result.stderr


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


@pytest.mark.compile
def test_the_rebuilt_note_is_never_written_through_a_symlink(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    build = scene.project / "build" / "cmake"
    assert configure(scene.project).returncode == 0
    env = {**os.environ, "SKBUILD_EDITABLE_SKIP": "1"}  # as in a scikit-build-core build
    first = cmake("--build", build, cwd=scene.project, env=env)
    assert first.returncode == 0, first.stdout
    note = build / "build2cmake-rebuilt"
    assert note.read_text().startswith("_scale_add_cpu_")
    # A link planted after configure (which would have removed it): the POST_BUILD step writes
    # a note only where there is none (O_EXCL, O_NOFOLLOW), so the link is left as it is and
    # nothing is written through it.
    note.unlink()
    note.symlink_to(scene.sentinel / "precious.txt")
    source = scene.project / "cpu" / "ops_cpu.cpp"
    source.write_text(source.read_text() + "\n// edited\n")
    second = cmake("--build", build, cwd=scene.project, env=env)
    assert second.returncode == 0, second.stdout
    assert note.is_symlink()
    scene.assert_sentinel_untouched()


# hipify, run by the generated CMake of a rocm kernel with CUDA sources ---------------------------


@pytest.mark.compile
@pytest.mark.rocm
@requires_rocm_toolchain
def test_hipify_step_imports_nothing_of_the_project_and_refuses_a_symlinked_output(
    tmp_path: Path,
) -> None:
    project = tmp_path / "edition5"
    shutil.copytree(FIXTURES / "edition5", project, symlinks=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    generate_torch(project / "build.toml")
    # Beside cmake/build2cmake_hipify.py: `python script.py` would import it.
    (project / "cmake" / "argparse.py").write_text(
        f"open({str(elsewhere / MARKER)!r}, 'w').write('x')\n"
    )
    configured = cmake("-S", ".", "-B", "build/cmake", "-G", "Ninja",
                       "-DBUILD2CMAKE_BACKEND=rocm", cwd=project)  # fmt: skip
    assert configured.returncode == 0, configured.stderr
    build = project / "build" / "cmake"
    target = "hipified/relu_cuda/relu.hip"
    hipified = subprocess.run(["ninja", "-C", build, target], capture_output=True, text=True)
    assert hipified.returncode == 0, hipified.stdout
    assert (build / target).read_text().startswith("// !!! This is a file automatically")
    assert not (elsewhere / MARKER).exists()

    # A link planted after configure: the script refuses to write through it.
    shutil.rmtree(build / "hipified")
    (build / "hipified").symlink_to(elsewhere)
    refused = subprocess.run(["ninja", "-C", build, target], capture_output=True, text=True)
    assert refused.returncode != 0
    assert f"refusing to write through the symlink {build / 'hipified'}" in refused.stdout
    # Ninja itself makes the output's parent folder before running the step; no file arrives.
    assert [p for p in elsewhere.rglob("*") if not p.is_dir()] == []


def test_hipify_prints_a_planted_link_target_escaped(tmp_path: Path) -> None:
    """The real script (generate copies it unchanged), stopped by a symlinked output folder."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "k.cu").write_text("// empty\n")
    out = project / "build" / "cmake" / "hipified"
    out.parent.mkdir(parents=True)
    out.symlink_to(f"{tmp_path}/elsewhere{ESCAPES}")
    script = REPO / "cmake_templates" / "rocm" / "build2cmake_hipify.py"
    result = subprocess.run(
        [sys.executable, str(script), "--project-dir", str(project), "--output-dir", str(out),
         "--depfile", f"{out}/k.hip.d", "--output", f"{out}/k.hip", "k.cu"],
        capture_output=True, text=True, cwd="/", check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "\x1b" not in result.stdout + result.stderr
    shown = f"refusing to write through the symlink {out} (to {tmp_path}/elsewhere{ESCAPES_SHOWN})"
    assert shown in result.stderr, result.stderr


# build2cmake's own Python children ----------------------------------------------------------------


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
