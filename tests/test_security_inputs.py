"""Attack class 5: records that are FIFOs, devices, folders or huge; paths with NUL bytes or
names too long; folders that cannot be written. Each is one clear error, never a hang, a
traceback or a half-written project."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from build2cmake.api import clean, generate_torch
from build2cmake.errors import Build2CMakeError
from build2cmake.fileset import MANIFEST_NAME
from build2cmake.safefs import RECORD_LIMIT_BYTES, read_regular_file
from tests.security import Scene, assert_one_user_error, cli, state

VARIANTS = "build/.build2cmake-variants.json"


def plant(path: Path, kind: str, sentinel: Path) -> None:
    """Put a hostile non-file at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    elif kind == "outside-link":
        path.symlink_to(sentinel / "precious.txt")
    elif kind == "huge":
        with open(path, "wb") as f:
            f.truncate(RECORD_LIMIT_BYTES + 1)  # sparse: costs no disk


@pytest.mark.parametrize("kind", ["fifo", "zero", "folder", "outside-link", "huge"])
def test_hostile_manifest_is_one_error_without_hanging(scene: Scene, kind: str) -> None:
    plant(scene.project / MANIFEST_NAME, kind, scene.sentinel)
    before = state(scene.project)
    for command in ("clean", "generate-torch"):
        result = cli(command, scene.build_toml, timeout=30)  # a hang fails here
        assert_one_user_error(result, MANIFEST_NAME)
        if kind == "huge":
            assert f"the limit is {RECORD_LIMIT_BYTES} bytes" in result.stderr
        assert state(scene.project) == before  # refused before any write
    scene.assert_sentinel_untouched()


@pytest.mark.parametrize("kind", ["fifo", "zero", "folder", "outside-link", "huge"])
def test_hostile_variants_record_is_ignored_with_a_warning(scene: Scene, kind: str) -> None:
    generate_torch(scene.build_toml)
    plant(scene.project / VARIANTS, kind, scene.sentinel)
    result = cli("clean", scene.build_toml, timeout=30)
    assert result.returncode == 0, result.stderr
    assert "warning: ignoring the variants record" in result.stderr
    scene.assert_sentinel_untouched()
    assert not (scene.project / "CMakeLists.txt").exists()


def test_read_regular_file_refuses_what_is_not_a_small_regular_file(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    outside = tmp_path / "secret"
    outside.write_text("secret")
    (project / "ok").write_bytes(b"x" * 10)
    (project / "inside-link").symlink_to("ok")
    (project / "outside-link").symlink_to(outside)
    os.mkfifo(project / "fifo")
    (project / "folder").mkdir()
    assert read_regular_file(project / "ok", 10, "build.toml") == b"x" * 10
    assert read_regular_file(project / "inside-link", 10, "build.toml") == b"x" * 10
    cases = {
        "ok": ("limit is 9 bytes", 9),
        "outside-link": ("outside", 100),
        "fifo": ("a FIFO", 100),
        "folder": ("a folder", 100),
        "missing": ("cannot read build.toml", 100),
    }
    for name, (message, limit) in cases.items():
        with pytest.raises(Build2CMakeError, match=message) as caught:
            read_regular_file(project / name, limit, "build.toml")
        assert str(caught.value).startswith(str(project / name))
    with pytest.raises(Build2CMakeError, match="a device"):
        read_regular_file(Path("/dev/zero"), 100, "build.toml", root=Path("/dev"))
    with pytest.raises(Build2CMakeError, match="cannot read"):
        read_regular_file(project / "a\0b", 100, "build.toml")


def test_nul_byte_and_overlong_names_are_one_error(tmp_path: Path) -> None:
    with pytest.raises(Build2CMakeError):
        clean(tmp_path / "a\0b" / "build.toml")
    long_folder = tmp_path / ("x" * 300)
    result = cli("clean", long_folder / "build.toml")
    assert_one_user_error(result, "x" * 300)
    result = cli("generate-torch", tmp_path / "build.toml", long_folder)
    assert "Traceback" not in result.stderr and result.returncode == 2


def chattr(flag: str, path: Path) -> bool:
    if shutil.which("chattr") is None:
        return False
    done = subprocess.run(["chattr", flag, str(path)], capture_output=True, check=False)
    return done.returncode == 0


def test_unwritable_target_folder_is_one_error_and_leaves_it_as_it_was(scene: Scene) -> None:
    # Root ignores permission bits; the immutable attribute stops root too.
    if os.geteuid() != 0 and not chattr("+i", scene.project):
        (scene.project).chmod(0o555)
    elif not chattr("+i", scene.project):
        pytest.skip("cannot make a folder unwritable here (no chattr +i)")
    try:
        before = state(scene.project)
        result = cli("generate-torch", scene.build_toml)
        assert_one_user_error(result, "cannot write")
        assert state(scene.project) == before
    finally:
        chattr("-i", scene.project)
        scene.project.chmod(0o755)


def test_a_manifest_of_a_wrong_shape_is_not_a_traceback(scene: Scene) -> None:
    for content in ("[]", '{"files": null}', "nul\0l", "{" * 100000, json.dumps({"files": []})):
        (scene.project / MANIFEST_NAME).write_text(content)
        result = cli("clean", scene.build_toml)
        assert_one_user_error(result, "unreadable")
