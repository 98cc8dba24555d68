"""Input from a cloned repository gets one clear error line, never a traceback, never a
half-written build.toml; names and paths from it reach the terminal escaped; generate deletes
only temporaries of its own. Every case runs the real command line."""

from __future__ import annotations

import hashlib
import json
import runpy
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from build2cmake.generate.fileset import MANIFEST_NAME
from build2cmake.ground.errors import Build2CMakeError, printable
from tests.conftest import REPO
from tests.security import FIXTURES, assert_one_user_error, cli, state

TEMPLATES = REPO / "cmake_templates"

FORGED = "build2cmake: all good"


def project(tmp_path: Path, build_toml: str, *sources: str) -> Path:
    """A project folder holding `build_toml` and empty files at `sources`; its build.toml."""
    root = tmp_path / "p"
    root.mkdir()
    for source in sources:
        (root / source).parent.mkdir(parents=True, exist_ok=True)
        (root / source).write_text("// empty\n")
    path = root / "build.toml"
    path.write_text(textwrap.dedent(build_toml))
    return path


def read(build_toml: Path) -> dict[str, Any]:
    return tomlkit.parse(build_toml.read_text()).unwrap()


def cli_with_patch(patch: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in a fresh interpreter, after `patch` (Python source) has replaced a piece of
    build2cmake: how a test reaches a code path no input can."""
    script = f"import sys\n{patch}from build2cmake.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def assert_no_raw_control(result: subprocess.CompletedProcess[str]) -> None:
    """Nothing the input held reached the terminal raw: no ESC, no forged line."""
    for stream in (result.stdout, result.stderr):
        assert "\x1b" not in stream, stream
        assert not any(line.startswith(FORGED) for line in stream.splitlines()), stream
        assert not any(line.startswith("build2cmake: error: \\x1b") for line in stream.split("\n"))


# -- 7: tracebacks instead of one error line ---------------------------------------------------

NO_FRAMEWORK = {
    "edition 5": """\
        [general]
        name = "ab"
        version = 1
        edition = 5
        license = "MIT"
        backends = ["cpu"]
        """,
    "v4": """\
        [general]
        name = "ab"
        version = 1
        license = "MIT"
        backends = ["cpu"]
        source = "https://github.com/org/ab"
        """,
}


@pytest.mark.parametrize("fmt", sorted(NO_FRAMEWORK))
@pytest.mark.parametrize("command", ["validate", "generate-torch", "doctor"])
def test_a_file_without_a_framework_section_is_one_error_naming_the_choices(
    tmp_path: Path, fmt: str, command: str
) -> None:
    build_toml = project(tmp_path, NO_FRAMEWORK[fmt])
    before = state(build_toml.parent)
    result = cli(command, build_toml)
    assert_one_user_error(result, "build.toml: [torch]: give exactly one of [torch]", "found none")
    assert state(build_toml.parent) == before


def test_update_build_adds_a_hipify_twin_to_an_inline_kernel_table(tmp_path: Path) -> None:
    build_toml = project(
        tmp_path,
        """\
        kernel = { foo = { language = "cuda-hipify", src = ["k/a.cu"], depends = ["torch"] } }
        [general]
        name = "ab"
        license = "MIT"
        [torch]
        src = []
        """,
        "k/a.cu",
    )
    result = cli("update-build", build_toml)
    assert result.returncode == 0, result.stderr
    data = read(build_toml)
    assert data["kernel"]["foo"]["backend"] == "cuda"
    twin = {"backend": "rocm", "depends": ["torch"], "src": ["k/a.cu"]}
    assert data["kernel"]["foo_rocm"] == twin
    valid = cli("validate", build_toml)
    assert "valid (edition 5, torch)" in valid.stdout, valid.stderr
    assert "foo (cuda), foo_rocm (rocm)" in valid.stdout


def test_update_build_moves_cuda_minver_inside_an_inline_general_table(tmp_path: Path) -> None:
    build_toml = project(
        tmp_path,
        """\
        general = { name = "ab", license = "MIT", cuda-minver = "11.8" }  # keep me
        [torch]
        src = []
        [kernel.foo]
        backend = "cuda"
        src = ["k/a.cu"]
        depends = ["torch"]
        """,
        "k/a.cu",
    )
    result = cli("update-build", build_toml)
    assert result.returncode == 0, result.stderr
    text = build_toml.read_text()
    assert "# keep me" in text
    general = tomlkit.parse(text).unwrap()["general"]
    assert general["cuda"] == {"minver": "11.8"}
    assert "cuda-minver" not in general
    assert general["edition"] == 5
    assert cli("validate", build_toml).returncode == 0


# -- 8: update-build writes only a file that reads back as the same build ----------------------


def test_update_build_keeps_dotted_keys_where_they_belong(tmp_path: Path) -> None:
    build_toml = project(
        tmp_path,
        """\
        general.name = "ab"
        general.cuda-minver = "11.8"
        general.license = "MIT"
        torch.src = []
        [kernel.foo]
        backend = "cuda"
        src = ["k/a.cu"]
        depends = ["torch"]
        """,
        "k/a.cu",
    )
    result = cli("update-build", build_toml)
    assert result.returncode == 0, result.stderr
    data = read(build_toml)
    assert data["general"]["license"] == "MIT"
    assert data["general"]["cuda"] == {"minver": "11.8"}
    assert data["torch"] == {"src": []}
    valid = cli("validate", build_toml)
    assert "valid (edition 5, torch)" in valid.stdout, valid.stderr


CONTRADICTIONS = {
    "v3 universal with [tvm-ffi]": (
        """\
        [general]
        name = "ab"
        backends = ["cuda"]
        license = "MIT"
        universal = true
        [tvm-ffi]
        src = ["t/binding.cpp"]
        """,
        "[general].universal",
        "t/binding.cpp",
    ),
    "v1 universal with a kernel": (
        """\
        [general]
        name = "ab"
        license = "MIT"
        [torch]
        universal = true
        [kernel.foo]
        src = ["k/a.cu"]
        depends = ["torch"]
        """,
        "[kernel.foo]",
        "k/a.cu",
    ),
}


@pytest.mark.parametrize("case", sorted(CONTRADICTIONS))
@pytest.mark.parametrize("command", ["validate", "update-build"])
def test_a_universal_kernel_with_compiled_parts_is_refused_and_left_alone(
    tmp_path: Path, case: str, command: str
) -> None:
    text, key, source = CONTRADICTIONS[case]
    build_toml = project(tmp_path, text, source)
    before = state(build_toml.parent)
    result = cli(command, build_toml)
    assert_one_user_error(result, f"build.toml: {key}: a universal kernel")
    assert state(build_toml.parent) == before


def test_update_build_refuses_a_rewrite_that_does_not_read_back_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """Should the rewrite ever produce something invalid (here: a rewrite that forgets the
    edition), build.toml stays as it was and no temporary file is left."""
    build_toml = project(
        tmp_path,
        """\
        [general]
        name = "ab"
        license = "MIT"
        backends = ["cpu"]
        [torch]
        src = []
        [kernel.foo]
        backend = "cpu"
        src = ["k/a.cpp"]
        depends = ["torch"]
        """,
        "k/a.cpp",
    )
    before = state(build_toml.parent)
    result = cli_with_patch(
        "import build2cmake.config.migrate as m\n"
        "m.to_edition5 = lambda document, project, build_toml, inline=False: None\n",
        "update-build",
        str(build_toml),
    )
    assert_one_user_error(result, "update-build cannot rewrite this file", "nothing was written")
    assert state(build_toml.parent) == before


# -- 9: attacker strings reach the terminal escaped --------------------------------------------

EVIL_KEY = '"evil\\nbuild2cmake: all good\\u001b[31mRED" = 1\n'


@pytest.mark.parametrize("command", ["validate", "doctor", "generate-torch"])
def test_a_key_name_cannot_forge_a_line_or_send_an_escape(tmp_path: Path, command: str) -> None:
    build_toml = project(
        tmp_path,
        """\
        [general]
        name = "ab"
        version = 1
        edition = 5
        license = "MIT"
        backends = ["cpu"]
        """
        + EVIL_KEY
        + "[torch-noarch]\n",
    )
    result = cli(command, build_toml)
    assert_one_user_error(result, "[general].evil\\nbuild2cmake: all good\\x1b[31mRED: unknown key")
    assert_no_raw_control(result)


def test_a_warning_about_a_kernel_key_is_escaped(tmp_path: Path) -> None:
    build_toml = project(
        tmp_path,
        """\
        [general]
        name = "ab"
        version = 1
        edition = 5
        license = "MIT"
        backends = ["cpu"]
        [torch]
        src = []
        [kernel."k\\u001b[2J"]
        backend = "cpu"
        depends = []
        src = ["k/a.cpp", "k/a.cpp"]
        """,
        "k/a.cpp",
    )
    result = cli("validate", build_toml)
    assert_no_raw_control(result)
    assert "\\x1b[2J" in result.stderr


def test_clean_dry_run_escapes_manifest_entries(tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "scale_add", root)
    name = "cmake/x\nbuild2cmake: error: \x1b[31mfake"
    (root / "cmake").mkdir()
    (root / name).write_bytes(b"ours\n")
    digest = "sha256:" + hashlib.sha256(b"ours\n").hexdigest()
    (root / MANIFEST_NAME).write_text(json.dumps({"files": {name: digest}}))
    before = state(root)
    result = cli("clean", root / "build.toml", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "would remove cmake/x\\nbuild2cmake: error: \\x1b[31mfake" in result.stdout
    assert not any(line.startswith("build2cmake: error") for line in result.stdout.splitlines())
    assert_no_raw_control(result)
    assert state(root) == before


@pytest.mark.parametrize(
    ("argument", "why"),
    [("torch-ext", "is a directory, expected a build.toml file"), ("buid.toml", "file not found")],
)
def test_clean_of_a_folder_or_a_missing_file_is_one_error_and_removes_nothing(
    tmp_path: Path, argument: str, why: str
) -> None:
    """`clean DIR` and a mistyped name used to clean the folder around them (here the project:
    the parent of torch-ext/ and of the missing file), as generate never would."""
    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "scale_add", root)
    assert cli("generate-torch", root / "build.toml").returncode == 0
    before = state(root)
    result = cli("clean", root / argument)
    assert_one_user_error(result, f"{root / argument}: {why}")
    assert state(root) == before  # CMakeLists.txt, the manifest and the rest are all there
    assert (root / "CMakeLists.txt").is_file()


def test_ci_github_refuses_a_folder_name_yaml_or_actions_would_read_as_more(
    tmp_path: Path,
) -> None:
    # JSON quoting would keep it a string, but nothing from the repository reaches the workflow
    # unless it is plain ASCII (Actions evaluates `${{ }}` in any value): refused, on one line.
    repository = tmp_path / "repo"
    folder = repository / "a\non: {evil: 1}\n#"
    shutil.copytree(FIXTURES / "scale_add", folder)
    result = cli("ci", "github", folder / "build.toml", "--repository", repository)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "a\\non: {evil: 1}\\n#/build.toml" in result.stderr


def test_printable_escapes_controls_and_format_characters_and_is_idempotent() -> None:
    text = "a\nb\r\tc\x1b[31m\x00\x85\u2028\u202e\udcff é ü 中"
    shown = printable(text)
    assert shown == "a\\nb\\r\\tc\\x1b[31m\\x00\\x85\\u2028\\u202e\\udcff é ü 中"
    assert printable(shown) == shown
    assert str(Build2CMakeError("x\ny", "d\x1b")) == "x\\ny\n  d\\x1b"


@pytest.mark.parametrize("script", ["common/build2cmake_metadata.py", "rocm/build2cmake_hipify.py"])
def test_the_build_time_scripts_escape_as_printable_does(script: str) -> None:
    """The scripts run in the build, without build2cmake, so each carries a copy of printable."""
    copy = runpy.run_path(str(TEMPLATES / script), run_name="copy")["_printable"]
    # Every code point, surrogates (non-UTF-8 file names) included.
    text = "".join(map(chr, range(1, 0x110000)))
    assert copy(text) == printable(text)
    assert copy("plain é 中") == "plain é 中"


def test_the_build_folder_check_escapes_every_byte_outside_printable_ascii(tmp_path: Path) -> None:
    """cmake/build2cmake_build_dir.cmake's build2cmake_printable: printable's escapes for ASCII;
    CMake has no Unicode tables, so each byte of a non-ASCII character is escaped."""
    text = "".join(map(chr, range(1, 0x80))) + "é\u202e\x85"
    (tmp_path / "in.txt").write_bytes(text.encode() + b"\xff")  # and a byte that is not UTF-8
    (tmp_path / "show.cmake").write_text(
        f'include("{TEMPLATES / "common" / "build2cmake_build_dir.cmake"}")\n'
        'file(READ "${CMAKE_CURRENT_LIST_DIR}/in.txt" text)\n'
        'build2cmake_printable(shown "${text}")\n'
        'file(WRITE "${CMAKE_CURRENT_LIST_DIR}/out.txt" "${shown}")\n'
    )
    # In script mode the source and build folders are the working folder: the check returns.
    subprocess.run(["cmake", "-P", "show.cmake"], cwd=tmp_path, check=True, capture_output=True)
    shown = (tmp_path / "out.txt").read_bytes().decode("ascii")
    ascii_part = "".join(map(chr, range(1, 0x80)))
    assert shown == printable(ascii_part) + "\\xc3\\xa9\\xe2\\x80\\xae\\xc2\\x85\\xff"


def test_an_unexpected_exception_is_one_internal_error_line_not_a_traceback(
    tmp_path: Path,
) -> None:
    build_toml = project(tmp_path, NO_FRAMEWORK["edition 5"])
    result = cli_with_patch(
        "import build2cmake.api as api\n"
        "def boom(path):\n"
        "    raise KeyError('x\\nbuild2cmake: all good\\x1b[31m')\n"
        "api.validate = boom\n",
        "validate",
        str(build_toml),
    )
    assert result.returncode == 3
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("build2cmake: internal error: KeyError: ")
    assert len(lines) == 2 and "bug in build2cmake" in lines[1]
    assert_no_raw_control(result)


# -- 10: generate deletes only temporaries of its own ------------------------------------------


def test_generate_keeps_user_files_that_only_look_like_temporaries(tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "scale_add", root)
    mine = [
        root / ".pyproject.toml.my-notes.tmp",
        root / "torch-ext" / ".registration.h.orig.tmp",
        root / ".CMakeLists.txt.12345678.tmp",
        root / ".CMakeLists.txt.b2c-1234567.tmp",
        root / ".CMakeLists.txt.b2c-12345678x.tmp",
    ]
    for path in mine:
        path.write_text("the user's\n")
    ours = root / ".pyproject.toml.b2c-0badcafe.tmp"  # what a killed write leaves
    ours.write_text("half written\n")
    result = cli("generate-torch", root / "build.toml")
    assert result.returncode == 0, result.stderr
    for path in mine:
        assert path.read_text() == "the user's\n", path
    assert not ours.exists()
