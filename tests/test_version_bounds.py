"""build.toml's version bounds hold at configure time, at the precision they are written."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from build2cmake.api import generate_torch
from tests.conftest import requires_nvcc

pytestmark = pytest.mark.compile

TORCH = re.match(r"(\d+)\.(\d+)", torch.__version__)
assert TORCH is not None
MAJOR, MINOR = int(TORCH.group(1)), int(TORCH.group(2))


def configure(root: Path, backend: str) -> subprocess.CompletedProcess[str]:
    command = ["cmake", "-S", str(root), "-B", str(root / "build" / "cmake"), "-G", "Ninja",
               f"-DBUILD2CMAKE_BACKEND={backend}"]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, check=False)


def with_bounds(project: Callable[[str], Path], torch_section: str, general: str = "") -> Path:
    root = project("scale_add")
    text = (root / "build.toml").read_text()
    text = text.replace("[torch]\n", f"[torch]\n{torch_section}\n")
    text = text.replace("version = 1\n", f"version = 1\n{general}\n")
    (root / "build.toml").write_text(text)
    generate_torch(root / "build.toml")
    return root


@pytest.mark.parametrize(
    ("bound", "ok"),
    [
        (f'maxver = "{MAJOR}.{MINOR}"', True),  # "2.13" admits 2.13.x
        (f'maxver = "{MAJOR}.{MINOR - 1}"', False),
        (f'minver = "{MAJOR}.{MINOR}"', True),
        (f'minver = "{MAJOR}.{MINOR + 1}"', False),
        (f'maxver = "{MAJOR}.{MINOR}.0"', True),
    ],
)
def test_torch_bounds_are_enforced_at_the_precision_written(
    project: Callable[[str], Path], bound: str, ok: bool
) -> None:
    root = with_bounds(project, bound)
    result = configure(root, "cpu")
    if ok:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode != 0
        key = bound.split(" ")[0]
        assert f"build.toml's [torch] {key} = " in result.stderr
        assert f"but torch is {torch.__version__.split('+')[0]}" in result.stderr


@requires_nvcc
@pytest.mark.cuda
def test_cuda_maxver_below_the_toolkit_stops_configure(project: Callable[[str], Path]) -> None:
    root = with_bounds(project, "", '\n[general.cuda]\nmaxver = "11.8"')
    result = configure(root, "cuda")
    assert result.returncode != 0
    assert 'build.toml\'s [general.cuda] maxver = "11.8", but CUDA is' in result.stderr
