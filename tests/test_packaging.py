"""The build2cmake wheel carries its templates: generate works from the wheel alone."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO

GOLDEN = Path(__file__).parent / "golden" / "scale_add"


@pytest.mark.compile
def test_wheel_ships_templates_and_generates_outside_the_repo(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("build2cmake-*.whl")
    unpacked = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(unpacked)
    assert "build2cmake/_data/cmake_templates/common/CMakeLists.txt.j2" in names
    assert "build2cmake/_data/torch-ext/_ops.py.j2" in names

    root = project("scale_add")
    # Only the unpacked wheel on the path, run from outside the repository.
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from build2cmake.cli import main; sys.exit(main())",
         "generate-torch", str(root / "build.toml")],
        capture_output=True, text=True, cwd=tmp_path, check=False,
        env={"PYTHONPATH": str(unpacked), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    import_check = subprocess.run(
        [sys.executable, "-c", "import build2cmake; print(build2cmake.__file__)"],
        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(unpacked)},
        check=True,
    )  # fmt: skip
    assert import_check.stdout.startswith(str(unpacked))
    assert (root / "CMakeLists.txt").read_text() == (GOLDEN / "CMakeLists.txt").read_text()
