"""Attack class 6 and the CLI flags: arguments checked before anything is written, one folder
lock shared by generate, build and clean, system folders refused, and each flag run for real."""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from build2cmake.api import generate_torch
from build2cmake.safefs import SYSTEM_FOLDERS
from tests.security import Scene, assert_one_user_error, cli, state


@pytest.mark.parametrize(
    "arguments",
    [
        ["-D", "NOEQUALS"],
        ["-D", "=value"],
        ["-D", "A B=1"],
        ["-j", "0"],
        ["-j", "-4"],
        ["--ops-id", "abc\n"],
        ["--ops-id", "\u0661\u0662"],  # Arabic-Indic digits: \d would take them
        ["--ops-id", "a" * 33],
        ["--ops-id", "a-b"],
        ["--backend", "cuda", "--ops-id", ""],
    ],
)
def test_build_checks_its_arguments_before_writing_anything(
    scene: Scene, arguments: list[str]
) -> None:
    before = state(scene.project)
    result = cli("build", scene.build_toml, *arguments)
    assert_one_user_error(result)
    assert state(scene.project) == before


@pytest.mark.parametrize("ops_id", ["abc\n", "\u0661", "a" * 33, "x y", ""])
def test_generate_refuses_a_bad_ops_id_before_writing(scene: Scene, ops_id: str) -> None:
    before = state(scene.project)
    assert_one_user_error(cli("generate-torch", scene.build_toml, "--ops-id", ops_id), "--ops-id")
    assert state(scene.project) == before


def test_generate_accepts_a_32_character_ops_id(scene: Scene) -> None:
    ops_id = "A_z9" * 8
    assert cli("generate-torch", scene.build_toml, "--ops-id", ops_id).returncode == 0
    assert (
        f"_scale_add_cpu_{ops_id}"
        in (scene.project / "CMakeLists.txt").read_text()
        + (scene.project / "torch-ext" / "scale_add" / "_ops.py").read_text()
    )


def other_users_home() -> Path:
    """An existing home folder from the password database that is not $HOME."""
    home = os.environ.get("HOME", "")
    for entry in pwd.getpwall():
        path = Path(entry.pw_dir)
        if entry.pw_dir not in ("", "/", home) and path.is_dir() and path not in SYSTEM_FOLDERS:
            return path
    pytest.skip("no other user's home folder on this machine")


@pytest.mark.parametrize("folder", ["/", "/etc", "/usr", "/bin", "/lib", "/var", "/home", "/tmp"])
def test_clean_and_generate_refuse_system_folders(folder: str) -> None:
    # --dry-run: were the guard broken, the test still deletes nothing.
    result = cli("clean", Path(folder) / "build.toml", folder, "--dry-run")
    assert_one_user_error(result, "refusing")


def test_any_users_home_is_refused_not_only_home(tmp_path: Path) -> None:
    home = other_users_home()
    env = {**os.environ, "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "build2cmake", "clean", str(home / "build.toml"), "--dry-run"],
        capture_output=True, text=True, env=env, check=False, timeout=60,
    )  # fmt: skip
    assert_one_user_error(result, "home folder")


@contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Hold the lock generate, build and clean take, as another build2cmake would."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def blocked_on_lock(process: subprocess.Popen[str], folder: Path) -> bool:
    """Wait until `process` waits for the folder's lock (the kernel lists it in /proc/locks as
    a blocked request), or exits without ever waiting. No sleeps that a slow machine could
    outrun: the answer comes from the kernel's lock table."""
    inode = f":{folder.stat().st_ino} "
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        with open("/proc/locks") as table:
            for line in table:
                fields = line.split()
                if "->" in fields and inode in line + " " and str(process.pid) in fields:
                    return True
        time.sleep(0.02)
    raise AssertionError("process neither exited nor waited for the lock")


def start(*args: str | os.PathLike[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "build2cmake", *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_generate_waits_for_the_folder_lock_and_writes_nothing_meanwhile(scene: Scene) -> None:
    before = state(scene.project)
    with folder_lock(scene.project):
        process = start("generate-torch", scene.build_toml)
        assert blocked_on_lock(process, scene.project), process.communicate()
        assert state(scene.project) == before
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert (scene.project / "CMakeLists.txt").is_file()


def test_clean_waits_for_the_folder_lock(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    (scene.project / "build" / "cmake").mkdir(parents=True)
    before = state(scene.project)
    with folder_lock(scene.project):
        process = start("clean", scene.build_toml)
        assert blocked_on_lock(process, scene.project), process.communicate()
        assert state(scene.project) == before  # the build folder is still there
    process.communicate(timeout=120)
    assert process.returncode == 0
    assert not (scene.project / "build").exists()


def test_build_holds_the_same_folder_lock_as_clean(scene: Scene) -> None:
    """build takes the project folder's lock before its first write and (see api.build) keeps it
    until the variant is written, so clean cannot delete the folder CMake compiles in."""
    before = state(scene.project)
    with folder_lock(scene.project):
        process = start("build", scene.build_toml, "--backend", "cpu")
        try:
            assert blocked_on_lock(process, scene.project), process.communicate()
            assert state(scene.project) == before
        finally:
            process.kill()
            process.communicate()


def test_clean_target_dir_removes_what_generate_wrote_there(scene: Scene, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    project_before = state(scene.project)
    assert cli("generate-torch", scene.build_toml, elsewhere).returncode == 0
    assert (elsewhere / "CMakeLists.txt").is_file()
    assert state(scene.project) == project_before

    dry = cli("clean", scene.build_toml, elsewhere, "--dry-run")
    assert dry.returncode == 0 and "would remove CMakeLists.txt" in dry.stdout
    assert (elsewhere / "CMakeLists.txt").is_file()

    result = cli("clean", scene.build_toml, elsewhere)
    assert result.returncode == 0, result.stderr
    assert "removed CMakeLists.txt" in result.stdout
    assert list(elsewhere.iterdir()) == []
    assert state(scene.project) == project_before


def test_generate_force_through_the_cli(scene: Scene) -> None:
    assert cli("generate-torch", scene.build_toml).returncode == 0
    pyproject = scene.project / "pyproject.toml"
    pyproject.write_text("# mine\n")
    assert_one_user_error(cli("generate-torch", scene.build_toml), "pyproject.toml", "--force")
    assert pyproject.read_text() == "# mine\n"
    result = cli("generate-torch", scene.build_toml, "--force")
    assert result.returncode == 0 and "wrote pyproject.toml" in result.stdout
    assert pyproject.read_text().startswith("# Generated by build2cmake")


def test_clean_force_through_the_cli(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    (scene.project / "CMakeLists.txt").write_text("# mine\n")
    kept = cli("clean", scene.build_toml)
    assert "kept CMakeLists.txt" in kept.stdout
    assert (scene.project / "CMakeLists.txt").read_text() == "# mine\n"
    forced = cli("clean", scene.build_toml, "--force")
    assert "removed CMakeLists.txt" in forced.stdout
    assert not (scene.project / "CMakeLists.txt").exists()


@pytest.mark.compile
def test_build_defines_jobs_and_force_through_the_cli(scene: Scene) -> None:
    args = ("build", scene.build_toml, "--backend", "cpu", "-j", "1")
    first = cli(*args, "-D", "CMAKE_VERBOSE_MAKEFILE=ON", timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "-DCMAKE_VERBOSE_MAKEFILE=ON" in first.stdout and "--parallel 1" in first.stdout
    cache = (scene.project / "build" / "cmake-variant-cpu" / "CMakeCache.txt").read_text()
    assert "CMAKE_VERBOSE_MAKEFILE:BOOL=ON" in cache
    variant = Path(first.stdout.splitlines()[-1].split()[1])
    metadata = variant / "metadata.json"
    metadata.write_text(json.dumps({"changed": "by the user"}))
    refused = cli(*args, timeout=600)
    assert_one_user_error(refused, str(variant), "--force")
    assert json.loads(metadata.read_text()) == {"changed": "by the user"}
    forced = cli(*args, "--force", timeout=600)
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert json.loads(metadata.read_text())["backend"] == {"type": "cpu"}
    scene.assert_sentinel_untouched()
