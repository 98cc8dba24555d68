"""Attack class 2: symlinks in a cloned project (a `cmake`, `torch-ext/<package>` or `build`
folder, a planted temporary file) must not lead a write or delete outside it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from build2cmake.api import clean, generate_torch, update_build
from build2cmake.errors import Build2CMakeError
from build2cmake.safefs import ProjectFolder
from tests.security import Scene, assert_one_user_error, cli, state


@pytest.mark.parametrize("folder", ["cmake", "torch-ext/scale_add", "torch-ext"])
def test_generate_refuses_a_symlinked_output_folder(scene: Scene, folder: str) -> None:
    link = scene.project / folder
    if link.exists():
        import shutil

        shutil.rmtree(link)
    link.symlink_to(scene.sentinel)
    before = state(scene.project)
    result = cli("generate-torch", scene.build_toml, "--force")
    if folder == "torch-ext":
        # The binding sources live there: validation already names each one (one line each).
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert "[torch].src[0]: 'torch-ext/torch_binding.cpp' is a symlink" in result.stderr
    else:
        assert_one_user_error(result, "is a symlink")
    scene.assert_sentinel_untouched()
    assert state(scene.project) == before  # refused before the first write


def test_generate_stale_temporary_sweep_stays_out_of_symlinked_folders(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    cmake = scene.project / "cmake"
    shutil.rmtree(cmake)
    cmake.symlink_to(scene.sentinel)  # the sentinel holds .build2cmake_torch.cmake.*.tmp
    with pytest.raises(Build2CMakeError, match="symlink"):
        generate_torch(scene.build_toml, force=True)
    scene.assert_sentinel_untouched()


def test_generate_replaces_a_symlinked_file_without_writing_through_it(scene: Scene) -> None:
    (scene.project / "CMakeLists.txt").symlink_to(scene.sentinel / "CMakeLists.txt")
    result = cli("generate-torch", scene.build_toml)
    assert_one_user_error(result, "CMakeLists.txt", "--force")
    generate_torch(scene.build_toml, force=True)
    scene.assert_sentinel_untouched()
    assert not (scene.project / "CMakeLists.txt").is_symlink()


def test_generate_never_writes_through_a_planted_temporary_file(scene: Scene) -> None:
    """Temporary names are random and opened with O_EXCL|O_NOFOLLOW; plant links under the
    old fixed and the prefix names anyway."""
    planted = []
    for name in ("CMakeLists.txt", "pyproject.toml"):
        for suffix in ("tmp", "update.tmp", "x.tmp", "b2c-0123abcd.tmp"):
            planted.append(scene.project / f".{name}.{suffix}")
            planted[-1].symlink_to(scene.sentinel / "precious.txt")
    generate_torch(scene.build_toml)
    scene.assert_sentinel_untouched()
    # The sweep removed the links at names our writer makes (never their targets) and left
    # the others, which are not ours to delete.
    left = {p.name for p in planted if p.is_symlink()}
    assert left == {p.name for p in planted if ".b2c-" not in p.name}


def test_update_build_never_writes_through_a_planted_temporary_symlink(scene: Scene) -> None:
    seed = scene.build_toml.read_text().replace('backends = ["cpu", "cuda", "rocm"]\n', "")
    seed = seed.replace("[general]\n", '[general]\nlicense = "MIT"\n')
    scene.build_toml.write_text(seed)
    (scene.project / ".build.toml.update.tmp").symlink_to(scene.sentinel / "precious.txt")
    assert update_build(scene.build_toml) is True
    scene.assert_sentinel_untouched()
    assert 'backends = ["cpu", "cuda", "rocm"]' in scene.build_toml.read_text()


def test_update_build_refuses_a_symlinked_build_toml(scene: Scene) -> None:
    seed = scene.build_toml.read_text().replace('backends = ["cpu", "cuda", "rocm"]\n', "")
    seed = seed.replace("[general]\n", '[general]\nlicense = "MIT"\n')
    (scene.project / "real.toml").write_text(seed)
    scene.build_toml.unlink()
    scene.build_toml.symlink_to("real.toml")
    result = cli("update-build", scene.build_toml)
    assert_one_user_error(result, "symlink")
    assert (scene.project / "real.toml").read_text() == seed


def test_clean_does_not_follow_a_symlinked_generated_folder(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    ops = scene.project / "torch-ext" / "scale_add" / "_ops.py"
    (scene.sentinel / "_ops.py").write_bytes(ops.read_bytes())  # same hash as the manifest's
    scene.before = state(scene.sentinel)
    package = scene.project / "torch-ext" / "scale_add"
    moved = scene.project / "moved"
    package.rename(moved)
    package.symlink_to(scene.sentinel)
    report = clean(scene.build_toml, force=True)
    assert "torch-ext/scale_add/_ops.py" not in report.removed
    scene.assert_sentinel_untouched()
    assert package.is_symlink()


def test_project_folder_walk_refuses_a_symlink_swapped_in(tmp_path: Path) -> None:
    """The fd walk itself: a component that is a symlink is refused even when it points back
    inside the project (no check-then-use window)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "inside").symlink_to("real")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (tmp_path / "out").symlink_to(outside)
    with ProjectFolder(tmp_path) as folder:
        for name in ("inside/x", "out/x", "out/a/b"):
            with pytest.raises(Build2CMakeError, match="symlink"):
                folder.write_atomic(name, b"x")
        for name in ("../x", "/etc/passwd", "a//b", "a/./b", "", "a\0b"):
            with pytest.raises(Build2CMakeError, match="not a normalized path"):
                folder.write_atomic(name, b"x")
            with pytest.raises(Build2CMakeError, match="not a normalized path"):
                folder.unlink(name)
        with pytest.raises(Build2CMakeError, match="symlink"):
            folder.rmtree("out/a")
        with pytest.raises(Build2CMakeError, match="not a real folder"):
            folder.rmtree("out")
        assert folder.unlink("out") is True  # the link itself
    assert list(outside.iterdir()) == []
    assert sorted(os.listdir(tmp_path)) == ["inside", "real"]


def test_write_never_follows_a_link_at_its_own_temporary_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Temporary names are random; should an attacker guess one (here: we fix it) and plant a
    symlink there, O_EXCL|O_NOFOLLOW refuses it instead of writing through it."""
    import build2cmake.safefs as safefs

    monkeypatch.setattr(safefs.secrets, "token_hex", lambda n: "guessed")
    target = tmp_path / "outside.txt"
    target.write_text("untouched")
    project = tmp_path / "p"
    project.mkdir()
    (project / ".CMakeLists.txt.b2c-guessed.tmp").symlink_to(target)
    with ProjectFolder(project) as folder, pytest.raises(Build2CMakeError, match="cannot write"):
        folder.write_atomic("CMakeLists.txt", b"attack")
    assert target.read_text() == "untouched"
    assert not (project / "CMakeLists.txt").exists()


@pytest.mark.parametrize("link", ["build", "build/cmake"])
def test_generate_refuses_a_symlinked_build_folder_pip_would_write_through(
    scene: Scene, link: str
) -> None:
    (scene.project / "build").mkdir()
    if link == "build":
        (scene.project / "build").rmdir()
    (scene.project / link).symlink_to(scene.sentinel)
    before = state(scene.project)
    assert_one_user_error(cli("generate-torch", scene.build_toml), link, "symlink")
    assert state(scene.project) == before
    scene.assert_sentinel_untouched()
