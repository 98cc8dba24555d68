"""What may be deleted: only what generate or build made, inside the project.

A crafted manifest or variants record, or a symlink where clean deletes, must not make generate
or clean delete anything outside the project, nor anything inside it that generate or build did
not make.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from build2cmake.api import clean, generate_torch
from build2cmake.generate.fileset import MANIFEST_NAME, content_hash, is_generated_name
from tests.security import (
    Scene,
    cli,
    state,
)


def sentinel_hashes(scene: Scene) -> dict[str, str]:
    """Each sentinel file under every name an attacker might use for it, with its true hash
    (so that a hash check alone would let the delete through)."""
    entries: dict[str, str] = {}
    for path in scene.sentinel.rglob("*"):
        if path.is_file() and not path.is_symlink():
            digest = content_hash(path.read_bytes())
            rel = path.relative_to(scene.sentinel)
            entries[f"../sentinel/{rel}"] = digest
            entries[str(path)] = digest  # absolute
            entries[f"cmake/../../sentinel/{rel}"] = digest
            entries[f"./../sentinel/{rel}"] = digest
            entries[f"cmake//../../sentinel/{rel}"] = digest
    return entries


def write_manifest(scene: Scene, files: dict[str, object], **extra: object) -> None:
    data = {"files": files, **extra}
    (scene.project / MANIFEST_NAME).write_text(json.dumps(data))


def test_manifest_paths_outside_the_project_are_never_deleted(scene: Scene) -> None:
    write_manifest(scene, sentinel_hashes(scene))
    result = cli("clean", scene.build_toml, "--force")
    assert result.returncode == 0, result.stderr
    assert "warning: .build2cmake-manifest.json: ignoring '../sentinel/precious.txt'" in (
        result.stderr
    )
    scene.assert_sentinel_untouched()

    write_manifest(scene, sentinel_hashes(scene))
    generate_torch(scene.build_toml)  # the stale-file sweep sees them too
    scene.assert_sentinel_untouched()


def test_manifest_build_dirs_globs_are_not_used(scene: Scene) -> None:
    before = state(scene.project)
    (scene.project / "build").mkdir()
    (scene.project / "build" / "notcmake").mkdir()
    write_manifest(
        scene, {}, build_dirs=["*", "**", "../sentinel/*", "../*", "/", str(scene.sentinel)]
    )
    result = cli("clean", scene.build_toml, "--force")
    assert result.returncode == 0, result.stderr
    scene.assert_sentinel_untouched()
    after = state(scene.project)
    assert after.pop("build/notcmake") and after.pop("build")
    assert MANIFEST_NAME not in after  # nothing kept: clean removes it
    assert after == before  # build.toml, sources, everything stays


def test_manifest_entries_that_generate_never_writes_are_kept(scene: Scene) -> None:
    """A manifest naming build.toml or a source with its true hash does not get it deleted."""
    project = scene.project
    hashes = {
        name: content_hash((project / name).read_bytes())
        for name in ("build.toml", "cpu/ops_cpu.cpp", "torch-ext/torch_binding.cpp")
    }
    write_manifest(scene, hashes)
    before = state(project)
    result = cli("clean", scene.build_toml, "--force")
    assert result.returncode == 0, result.stderr
    assert state(project) == before  # the manifest, with entries it ignored, stays too
    assert result.stderr.count("warning:") == 3


@pytest.mark.parametrize(
    "files",
    [
        [],
        {"CMakeLists.txt": 5},
        {"CMakeLists.txt": "md5:abc"},
        {"CMakeLists.txt": "sha256:" + "0" * 64 + "\n"},
        "files",
    ],
)
def test_malformed_manifest_fields_are_one_error_or_ignored(scene: Scene, files: object) -> None:
    generate_torch(scene.build_toml)
    (scene.project / MANIFEST_NAME).write_text(json.dumps({"files": files}))
    before = state(scene.project)
    result = cli("clean", scene.build_toml)
    assert "Traceback" not in result.stderr
    assert result.returncode in (0, 2)
    assert state(scene.project) == before  # nothing valid listed, nothing deleted


def test_variants_record_outside_build_is_never_deleted(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    build = scene.project / "build"
    build.mkdir()
    digest = content_hash((scene.sentinel / "metadata.json").read_bytes())
    names = ["../../sentinel", "..", ".", "../sentinel", str(scene.sentinel), "a/../..", ""]
    (build / ".build2cmake-variants.json").write_text(json.dumps(dict.fromkeys(names, digest)))
    result = cli("clean", scene.build_toml)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("warning: build/.build2cmake-variants.json: ignoring") == len(names)
    scene.assert_sentinel_untouched()
    assert (scene.project / "build.toml").is_file()


def test_variants_record_naming_a_symlinked_variant_does_not_delete_its_target(
    scene: Scene,
) -> None:
    generate_torch(scene.build_toml)
    build = scene.project / "build"
    build.mkdir()
    (build / "torch213-cxx11-cpu-x86_64-linux").symlink_to(scene.sentinel)
    digest = content_hash((scene.sentinel / "metadata.json").read_bytes())
    record = {"torch213-cxx11-cpu-x86_64-linux": digest}
    (build / ".build2cmake-variants.json").write_text(json.dumps(record))
    assert cli("clean", scene.build_toml).returncode == 0
    scene.assert_sentinel_untouched()
    assert (build / "torch213-cxx11-cpu-x86_64-linux").is_symlink()


def test_build_cmake_symlink_is_not_followed_by_clean(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    (scene.project / "build").mkdir()
    (scene.project / "build" / "cmake").symlink_to(scene.sentinel)
    (scene.project / "build" / "cmake-real").mkdir()
    result = cli("clean", scene.build_toml, "--force")
    assert result.returncode == 0, result.stderr
    scene.assert_sentinel_untouched()
    assert (scene.project / "build" / "cmake").is_symlink()
    assert not (scene.project / "build" / "cmake-real").exists()


def test_build_folder_symlink_is_not_followed_by_clean(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    (scene.project / "build").symlink_to(scene.sentinel)  # holds cmake-x/
    result = cli("clean", scene.build_toml, "--force")
    assert result.returncode == 0, result.stderr
    scene.assert_sentinel_untouched()


def test_stale_generated_file_the_user_edited_is_kept(scene: Scene) -> None:
    """Renaming the package makes the old _ops.py stale: removed when unchanged, kept when
    edited (the edit is the user's work)."""
    generate_torch(scene.build_toml)
    old_ops = scene.project / "torch-ext" / "scale_add" / "_ops.py"
    old_ops.write_text(old_ops.read_text() + "# my edit\n")
    text = scene.build_toml.read_text().replace('name = "scale-add"', 'name = "scale-add2"')
    scene.build_toml.write_text(text)
    (scene.project / "torch-ext" / "scale_add2").mkdir()
    report = generate_torch(scene.build_toml)
    assert old_ops.read_text().endswith("# my edit\n")
    assert "torch-ext/scale_add/_ops.py" not in report.removed

    # Unedited: removed.
    scene.build_toml.write_text(text.replace("scale-add2", "scale-add3"))
    (scene.project / "torch-ext" / "scale_add3").mkdir()
    report = generate_torch(scene.build_toml)
    assert report.removed == ("torch-ext/scale_add2/_ops.py",)
    assert not (scene.project / "torch-ext" / "scale_add2" / "_ops.py").exists()


def test_users_own_compile_commands_link_survives_clean(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    link = scene.project / "compile_commands.json"
    for destination in (
        scene.sentinel / "precious.txt",
        scene.sentinel / "build" / "cmake" / "compile_commands.json",  # outside the project
        Path("elsewhere") / "compile_commands.json",
        Path("build") / "mine" / "compile_commands.json",
    ):
        link.symlink_to(destination)
        assert cli("clean", scene.build_toml).returncode == 0
        assert link.is_symlink() and os.readlink(link) == str(destination)
        link.unlink()
        generate_torch(scene.build_toml)
    scene.assert_sentinel_untouched()


def test_clean_removes_the_link_a_generated_build_made(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    build_dir = scene.project / "build" / "cmake"
    build_dir.mkdir(parents=True)
    (build_dir / "compile_commands.json").write_text("[]")
    link = scene.project / "compile_commands.json"
    link.symlink_to(build_dir / "compile_commands.json")
    result = cli("clean", scene.build_toml)
    assert "removed compile_commands.json" in result.stdout
    assert not link.is_symlink()


def test_every_generated_file_is_one_the_manifest_reader_accepts(scene: Scene) -> None:
    """The manifest reader keeps only names generate writes; if render gains a file, this test
    says to add it to fileset.GENERATED_PATTERNS."""
    report = generate_torch(scene.build_toml)
    recorded = json.loads((scene.project / MANIFEST_NAME).read_text())["files"]
    assert sorted(recorded) == sorted(report.written) and len(recorded) >= 5
    for name in recorded:
        assert is_generated_name(name), name
    for name in ("build.toml", "cmake/a/b.cmake", "torch-ext/a/b/_ops.py", "../CMakeLists.txt"):
        assert not is_generated_name(name), name


def test_api_clean_and_generate_agree_with_the_cli(scene: Scene) -> None:
    write_manifest(scene, sentinel_hashes(scene))
    report = clean(scene.build_toml, force=True)
    assert report.removed == () and report.warnings
    scene.assert_sentinel_untouched()


def test_a_hard_link_to_an_outside_file_is_replaced_or_unlinked_never_written(
    scene: Scene,
) -> None:
    """A generated name hard-linked to a file outside, with its true hash in the manifest:
    generate renames over the name and clean unlinks the name; the outside file keeps its
    content (a write in place would change it)."""
    outside = scene.sentinel / "CMakeLists.txt"
    (scene.project / "CMakeLists.txt").hardlink_to(outside)
    write_manifest(scene, {"CMakeLists.txt": content_hash(outside.read_bytes())})
    generate_torch(scene.build_toml)
    scene.assert_sentinel_untouched()
    (scene.project / "CMakeLists.txt").unlink()
    (scene.project / "CMakeLists.txt").hardlink_to(outside)
    write_manifest(scene, {"CMakeLists.txt": content_hash(outside.read_bytes())})
    assert "removed CMakeLists.txt" in cli("clean", scene.build_toml).stdout
    scene.assert_sentinel_untouched()


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


def test_clean_force_through_the_cli(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    (scene.project / "CMakeLists.txt").write_text("# mine\n")
    kept = cli("clean", scene.build_toml)
    assert "kept CMakeLists.txt" in kept.stdout
    assert (scene.project / "CMakeLists.txt").read_text() == "# mine\n"
    forced = cli("clean", scene.build_toml, "--force")
    assert "removed CMakeLists.txt" in forced.stdout
    assert not (scene.project / "CMakeLists.txt").exists()
