"""A command reads and parses build.toml once and hands the Project down (pypa/build's
ProjectBuilder habit): counted where every read of build.toml becomes a Project."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import build2cmake.config
from build2cmake import api
from build2cmake.config.model import Project
from tests.conftest import FIXTURES


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every build.toml turned into a Project from now on, by path."""
    seen: list[Path] = []
    original = build2cmake.config.parse_project

    def counting(data: Mapping[str, Any], build_toml: Path) -> Project:
        seen.append(build_toml)
        return original(data, build_toml)

    # load_project reads build.toml and hands the data to parse_project, by its global name.
    monkeypatch.setattr(build2cmake.config, "parse_project", counting)
    return seen


def test_build_for_sharing_parses_build_toml_once(tmp_path: Path, parses: list[Path]) -> None:
    root = tmp_path / "noarch"
    shutil.copytree(FIXTURES / "noarch", root)
    _, built, _ = api.build_for_sharing(root / "build.toml", backend="cpu")
    assert built.path == root / "build" / "torch-cpu"
    assert parses == [root / "build.toml"]


def test_upload_plan_parses_build_toml_once(tmp_path: Path, parses: list[Path]) -> None:
    root = tmp_path / "noarch"
    shutil.copytree(FIXTURES / "noarch", root)
    api.build_for_sharing(root / "build.toml", backend="cpu")
    parses.clear()
    plan = api.plan_upload(root / "build.toml", repo_id="stand-in-org/noarch-kernel")
    assert plan.variants == ("torch-cpu",)
    assert parses == [root / "build.toml"]
