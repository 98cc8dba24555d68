"""Attacks on build2cmake: fuzzed and mutated build.toml files, killed and concurrent runs, paths
with spaces and unicode. Every outcome is success or one user error (exit 2), never a traceback,
never a half-written project."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from build2cmake.api import generate_torch, validate
from build2cmake.cli import main
from build2cmake.errors import Build2CMakeError, BuildConfigError
from build2cmake.fileset import MANIFEST_NAME
from tests.conftest import FIXTURES, run_cli

GOLDEN = Path(__file__).parent / "golden" / "scale_add"
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
known_keys = st.sampled_from(
    ["name", "backends", "backend", "src", "include", "depends", "rocm-archs",
     "cuda-capabilities", "universal", "version", "hub", "repo-id", "pyext", "cxx-flags"]
)  # fmt: skip
leaves = st.one_of(
    text,
    st.integers(-(2**63), 2**63 - 1),
    st.booleans(),
    st.floats(allow_nan=True),
    st.sampled_from(["cpu", "rocm", "cuda", "metal", "gfx90a", "9.0a", "torch", "", "..", "/"]),
)
values = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(known_keys | text, children, max_size=4)
    ),
    max_leaves=12,
)


def toml_text(document: dict[str, Any]) -> str | None:
    """The document as TOML, or None where the generated structure has no TOML form (tomlkit
    refuses, e.g., some mixes of tables and arrays)."""
    try:
        return tomlkit.dumps(document)
    except Exception:
        return None


def check_outcome(path: Path) -> None:
    """validate and the CLI either accept the file or give exactly one user error."""
    try:
        validate(path)
    except BuildConfigError as error:
        assert str(error).startswith(f"{path}: ")
    with (
        open(os.devnull, "w") as devnull,
        contextlib.redirect_stderr(devnull),
        contextlib.redirect_stdout(devnull),
    ):
        assert main(["validate", str(path)]) in (0, 2)


@FUZZ
@given(document=st.dictionaries(st.sampled_from(["general", "torch", "kernel"]) | text, values))
def test_fuzzed_toml_documents_give_success_or_one_user_error(document: dict[str, Any]) -> None:
    content = toml_text(document)
    if content is None:
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "build.toml"
        path.write_text(content, "utf-8")
        check_outcome(path)


@FUZZ
@given(raw=st.binary(max_size=300) | text.map(str.encode))
def test_arbitrary_bytes_give_success_or_one_user_error(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "build.toml"
        path.write_bytes(raw)
        check_outcome(path)


def fixture_data() -> dict[str, Any]:
    data: dict[str, Any] = tomlkit.parse(
        (FIXTURES / "scale_add" / "build.toml").read_text()
    ).unwrap()
    return data


def key_paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    paths = [prefix] if prefix else []
    if isinstance(data, dict):
        for key, value in data.items():
            paths += key_paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            paths += key_paths(value, (*prefix, index))
    return paths


hostile_values = st.one_of(
    values,
    st.just([f"src/{i}.cpp" for i in range(2000)]),  # a huge list
    st.just(""),
    st.just("ünïcödé/ファイル.cpp"),
    st.just([[[[[[[[["deep"]]]]]]]]]),
    st.just({"a": {"b": {"c": {"d": {}}}}}),
)


@FUZZ
@given(data=st.data())
def test_mutated_fixture_generates_or_fails_without_touching_the_tree(data: st.DataObject) -> None:
    document = fixture_data()
    target = data.draw(st.sampled_from(key_paths(document)), label="key path")
    replacement = data.draw(hostile_values, label="new value")
    holder: Any = document
    for part in target[:-1]:
        holder = holder[part]
    holder[target[-1]] = replacement
    content = toml_text(document)
    if content is None:
        return
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "scale_add"
        shutil.copytree(FIXTURES / "scale_add", root)
        (root / "build.toml").write_text(content, "utf-8")
        before = snapshot(root)
        try:
            generate_torch(root / "build.toml")
        except Build2CMakeError:
            assert snapshot(root) == before


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("depth", [100, 5000])
def test_deeply_nested_arrays_are_a_user_error_or_accepted(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "build.toml"
    path.write_text("[general]\nname = " + "[" * depth + "]" * depth + "\n")
    result = run_cli("validate", path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    # One line per problem of the file, each a user error.
    lines = result.stderr.splitlines()
    assert lines and all(line.startswith("build2cmake: error: ") for line in lines)
    assert "[general].name: expected a string, got list" in lines[0] or "invalid TOML" in lines[0]


# generate-torch with every file write stretched by 100 ms (between writing the temporary file and
# renaming it), so that kills land inside the write phase rather than before or after it.
SLOW_GENERATE = """
import os, sys, time
os.replace = (lambda replace: lambda *a, **k: (time.sleep(0.1), replace(*a, **k))[1])(os.replace)
from build2cmake.cli import main
sys.exit(main(["generate-torch", sys.argv[1]]))
"""


def test_generate_killed_at_random_points_never_leaves_a_half_written_file(
    project: Callable[[str], Path],
) -> None:
    root = project("scale_add")
    golden = {
        p.relative_to(GOLDEN).as_posix(): p.read_bytes() for p in GOLDEN.rglob("*") if p.is_file()
    }
    rng = random.Random(7)
    partial = 0
    for _ in range(12):
        for name in [*golden, MANIFEST_NAME]:  # each round generates from scratch
            (root / name).unlink(missing_ok=True)
        process = subprocess.Popen(
            [sys.executable, "-c", SLOW_GENERATE, str(root / "build.toml")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(rng.uniform(0.15, 1.0))
        process.kill()
        process.wait()
        present = [name for name in golden if (root / name).exists()]
        partial += 0 < len(present) < len(golden)
        for name in present:  # every file is either absent or complete
            assert (root / name).read_bytes() == golden[name], name
    assert partial >= 2, f"only {partial} of 12 kills landed inside the write phase"
    result = run_cli("generate-torch", root / "build.toml")
    assert result.returncode == 0, result.stderr
    assert not list(root.rglob("*.tmp"))
    assert {name: (root / name).read_bytes() for name in golden} == golden


def test_two_concurrent_generates_end_with_a_correct_tree(project: Callable[[str], Path]) -> None:
    root = project("scale_add")
    command = [sys.executable, "-m", "build2cmake", "generate-torch", str(root / "build.toml")]
    for _ in range(3):
        runs = [subprocess.Popen(command, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        errors = [run.communicate()[1] for run in runs]
        assert [run.returncode for run in runs] == [0, 0], errors
    assert not list(root.rglob("*.tmp"))
    for golden in GOLDEN.rglob("*"):
        if golden.is_file():
            assert (root / golden.relative_to(GOLDEN)).read_bytes() == golden.read_bytes()


@pytest.mark.compile
def test_paths_with_spaces_and_unicode_configure(tmp_path: Path) -> None:
    root = tmp_path / "my kernels" / "ünïcode proj"
    shutil.copytree(FIXTURES / "scale_add", root)
    (root / "cpu" / "ops_cpu.cpp").rename(root / "cpu" / "ops cpu ü.cpp")
    text = (root / "build.toml").read_text().replace("cpu/ops_cpu.cpp", "cpu/ops cpu ü.cpp")
    (root / "build.toml").write_text(text)
    generate_torch(root / "build.toml")
    assert "[[cpu/ops cpu ü.cpp]]" in (root / "CMakeLists.txt").read_text()
    result = subprocess.run(
        ["cmake", "-S", str(root), "-B", str(tmp_path / "build dir"), "-G", "Ninja",
         "-DBUILD2CMAKE_BACKEND=cpu"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]


def test_clean_of_a_missing_folder_is_a_user_error(tmp_path: Path) -> None:
    result = run_cli("clean", tmp_path / "gone" / "build.toml")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "target folder does not exist" in result.stderr
