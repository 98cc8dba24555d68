"""`build` on hostile projects, without a compiler: a universal kernel goes through the same
variant writing, record and clean paths as a compiled one (build/torch-universal/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from build2cmake.api import build, clean
from build2cmake.fileset import content_hash
from tests.security import Scene, assert_one_user_error, cli, state

UNIVERSAL = '[general]\nname = "uni"\nuniversal = true\nversion = 1\n'


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


def test_universal_build_writes_the_variant_and_clean_removes_it(scene: Scene) -> None:
    make_universal(scene)
    before = state(scene.project)
    _, built = build(scene.build_toml)
    variant = scene.project / "build" / "torch-universal"
    assert built.path == variant
    assert sorted(p.name for p in variant.iterdir()) == [
        "__init__.py", "_ops.py", "helpers.py", "metadata.json"
    ]  # fmt: skip
    record = json.loads((scene.project / "build" / ".build2cmake-variants.json").read_text())
    assert record == {
        "format": 2,
        "variants": {"torch-universal": [content_hash((variant / "metadata.json").read_bytes())]},
        "staging": [],
    }
    report = clean(scene.build_toml)
    assert "build/torch-universal/" in report.removed
    assert state(scene.project) == before


def test_build_does_not_ship_a_package_file_linked_from_outside(scene: Scene) -> None:
    package = make_universal(scene)
    (package / "secret.py").symlink_to(scene.sentinel / "precious.txt")
    result = cli("build", scene.build_toml)
    assert_one_user_error(result, "secret.py", "outside")
    assert not (scene.project / "build" / "torch-universal").exists()
    scene.assert_sentinel_untouched()


def test_build_refuses_a_symlinked_build_folder(scene: Scene) -> None:
    make_universal(scene)
    (scene.project / "build").symlink_to(scene.sentinel)
    result = cli("build", scene.build_toml)
    assert_one_user_error(result, "symlink")
    scene.assert_sentinel_untouched()


def test_build_does_not_replace_a_symlinked_variant_without_force(scene: Scene) -> None:
    make_universal(scene)
    (scene.project / "build").mkdir()
    variant = scene.project / "build" / "torch-universal"
    variant.symlink_to(scene.sentinel)
    digest = content_hash((scene.sentinel / "metadata.json").read_bytes())
    (scene.project / "build" / ".build2cmake-variants.json").write_text(
        json.dumps({"torch-universal": digest})
    )
    assert_one_user_error(cli("build", scene.build_toml), "--force")
    scene.assert_sentinel_untouched()
    result = cli("build", scene.build_toml, "--force")
    assert result.returncode == 0, result.stderr
    assert variant.is_dir() and not variant.is_symlink()
    scene.assert_sentinel_untouched()  # the link was replaced, its target untouched


def test_build_of_a_variant_the_user_changed_needs_force(scene: Scene) -> None:
    make_universal(scene)
    build(scene.build_toml)
    metadata = scene.project / "build" / "torch-universal" / "metadata.json"
    metadata.write_text("{}\n")
    assert_one_user_error(cli("build", scene.build_toml), "--force")
    assert metadata.read_text() == "{}\n"
    assert cli("build", scene.build_toml, "--force").returncode == 0
    assert json.loads(metadata.read_text())["name"] == "uni"
