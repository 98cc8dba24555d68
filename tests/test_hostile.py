"""Attacks on build2cmake: fuzzed and mutated build.toml files, killed and concurrent runs, paths
with spaces and unicode. Every outcome is success or one user error (exit 2), never a traceback,
never a half-written project."""

from __future__ import annotations

import contextlib
import io
import keyword
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from build2cmake.api import clean, generate_torch, validate
from build2cmake.cli import main
from build2cmake.ground.errors import Build2CMakeError, BuildConfigError
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


# Valid projects in the current format, built from the fixture's sources, so that the generate
# path (render, write, manifest, regenerate, clean) is fuzzed and not only validation.
package_names = st.from_regex(r"[a-z][a-z0-9]{0,8}(-[a-z0-9]{1,4})?", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n.replace("-", "_")) and n not in ("torch", "build2cmake")
)
SOURCES = {
    "cpu": ["cpu/ops_cpu.cpp"],
    "rocm": ["hip/scale_add.hip", "hip/relu.hip", "hip/launchers.h"],
    "cuda": ["cuda/ops.cu", "cuda/launchers_cuda.h"],
}


@st.composite
def valid_projects(draw: st.DrawFn) -> dict[str, Any]:
    backends = draw(st.lists(st.sampled_from(["cpu", "cuda", "rocm"]), min_size=1, unique=True))
    general: dict[str, Any] = {"name": draw(package_names), "backends": sorted(backends)}
    if draw(st.booleans()):
        general["version"] = draw(st.integers(0, 9))
    if draw(st.booleans()):
        general["license"] = draw(st.sampled_from(["Apache-2.0", "MIT", "BSD-3-Clause"]))
    if draw(st.booleans()):
        depends = st.lists(st.sampled_from(["einops", "helion", "tvm-ffi"]), unique=True)
        general["python-depends"] = draw(depends)
    document: dict[str, Any] = {
        "general": general,
        "torch": {"src": ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]},
        "kernel": {},
    }
    for backend in backends:
        for index in range(draw(st.integers(1, 2))):
            kernel: dict[str, Any] = {
                "backend": backend,
                "depends": ["torch"] if backend == "cpu" else [],
                "src": draw(st.lists(st.sampled_from(SOURCES[backend]), min_size=1, unique=True)),
            }
            if backend == "rocm":
                kernel["rocm-archs"] = draw(
                    st.lists(
                        st.sampled_from(["gfx90a", "gfx940", "gfx942", "gfx1100", "gfx90a:xnack+"]),
                        min_size=1, unique=True,
                    )
                )  # fmt: skip
                kernel["include"] = ["hip"]
            if backend == "cuda" and draw(st.booleans()):
                kernel["cuda-capabilities"] = draw(
                    st.lists(st.sampled_from(["7.5", "8.0", "8.9+PTX", "9.0a"]), min_size=1,
                             unique=True)
                )  # fmt: skip
            name = draw(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True))
            document["kernel"][f"{name}_{backend}_{index}"] = kernel
    return document


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    document=valid_projects(),
    ops_id=st.none() | st.from_regex(r"[A-Za-z0-9_]{1,32}", fullmatch=True),
)
def test_fuzzed_valid_projects_generate_regenerate_and_clean(
    document: dict[str, Any], ops_id: str | None
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "project"
        shutil.copytree(FIXTURES / "scale_add", root)
        (root / "build.toml").write_text(tomlkit.dumps(document), "utf-8")
        before = snapshot(root)
        report = generate_torch(root / "build.toml", ops_id=ops_id)
        assert "CMakeLists.txt" in report.written and "pyproject.toml" in report.written
        package = document["general"]["name"].replace("-", "_")
        assert f"torch-ext/{package}/_ops.py" in report.written
        generated = snapshot(root)
        for name in report.written:
            assert generated[name].splitlines()[0].lstrip(b"#/ ").startswith(b"Generated by")
        again = generate_torch(root / "build.toml", ops_id=ops_id)
        assert again.written == () and again.removed == ()
        assert snapshot(root) == generated
        cleaned = clean(root / "build.toml")
        assert cleaned.kept_edited == ()
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


# generate-torch killed (SIGKILL, no cleanup) right before its N-th call that changes the disk.
# A profile hook counts those calls, so every kill point of a run is visited whatever the
# machine's speed: the atomicity check does not rest on timing. The run is a fork of the test
# process (no interpreter start-up per kill point).
def _changes_disk(function: object) -> bool:
    if function in (os.replace, os.rename, os.write, os.unlink):
        return True
    owner = getattr(function, "__self__", None)
    return (
        getattr(function, "__name__", "") in ("write", "writelines", "truncate")
        and isinstance(owner, io.IOBase)
        and owner not in (sys.stdout, sys.stderr)
    )


def generate_killed_at(build_toml: Path, limit: int) -> int:
    """Run generate_torch in a child killed before its `limit`-th disk change (0: never).
    Returns the number of disk changes when it was not killed, -9 when it was."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        count = 0

        def hook(frame: object, event: str, function: object) -> None:
            nonlocal count
            if event == "c_call" and _changes_disk(function):
                count += 1
                if count == limit:
                    os.kill(os.getpid(), signal.SIGKILL)

        code = 0
        try:
            sys.setprofile(hook)
            generate_torch(build_toml)
        except BaseException:
            code = 1
        finally:
            sys.setprofile(None)
        os.write(write_end, str(count).encode())
        os._exit(code)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read_end, "rb") as pipe:
        written = pipe.read()
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    assert os.WEXITSTATUS(status) == 0, "generate failed in the child"
    return int(written)


def generated_state(root: Path, names: list[str]) -> dict[str, bytes | None]:
    return {n: (root / n).read_bytes() if (root / n).exists() else None for n in names}


@pytest.mark.parametrize("scenario", ["from scratch", "rewrite"])
def test_generate_killed_before_any_write_never_leaves_a_half_written_file(
    project: Callable[[str], Path], scenario: str
) -> None:
    root = project("scale_add")
    golden = {
        p.relative_to(GOLDEN).as_posix(): p.read_bytes() for p in GOLDEN.rglob("*") if p.is_file()
    }
    names = sorted(golden)
    # The rewrite scenario replaces files of another ops id: each must be old or new, never mixed.
    old: dict[str, bytes | None] = dict.fromkeys(names)
    if scenario == "rewrite":
        assert run_cli("generate-torch", root / "build.toml", "--ops-id", "old").returncode == 0
        old = generated_state(root, names)
    initial = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    folders = {p for p in root.rglob("*") if p.is_dir()}

    def reset() -> None:
        for path in sorted(root.rglob("*"), reverse=True):
            if path.is_dir() and path not in folders:
                shutil.rmtree(path)
            elif path.is_file() and path not in initial:
                path.unlink()
        for path, content in initial.items():
            path.write_bytes(content)

    partial = 0
    kills = 0
    for limit in range(1, 1000):
        reset()
        outcome = generate_killed_at(root / "build.toml", limit)
        if outcome != -9:  # the run got past its last disk change: every point was visited
            break
        kills += 1
        now = generated_state(root, names)
        for name in names:  # every file is old or new, never empty, never a mix
            assert now[name] in (old[name], golden[name]), (limit, name)
        partial += now != golden and now != old
        generate_torch(root / "build.toml")
        assert generated_state(root, names) == golden
        assert not list(root.rglob("*.tmp")), limit
    assert generated_state(root, names) == golden
    assert kills >= 2 * (len(names) if scenario == "from scratch" else 2), kills
    assert partial >= 1  # some kills landed between two files


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
