"""A cloned kernel repository, second round (issue #43), the commands around the build: `ci
github -o`, `init`, `build --variants`, `upload --dry-run`, `test`, the kernel card and the
generated `_ops.py`'s import-time note. Each attack runs as a user or CI would (the real command
line in a fresh interpreter, with a time limit: a hang fails the test), next to a sentinel tree
that must stay byte-identical; a refusal is exit 2 with exactly one `build2cmake: error:` line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from build2cmake import card
from build2cmake.api import generate_torch
from build2cmake.config import load_project
from build2cmake.errors import Build2CMakeError
from tests.security import Scene, assert_one_user_error, cli, state
from tests.test_security_build import make_universal

REPO = Path(__file__).resolve().parent.parent


def cli_in(
    cwd: Path, *args: str | os.PathLike[str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """The real command line run from `cwd` (as CI runs it inside the clone)."""
    return subprocess.run(
        [sys.executable, "-m", "build2cmake", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def assert_no_crash(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode in (0, 2), (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


# --- 2. writes outside the project through planted symlinks ------------------------------------


def test_ci_github_output_refuses_a_planted_github_link(scene: Scene) -> None:
    # The README's own example path; `.github` in the clone leads to the sentinel.
    (scene.project / ".github").symlink_to(scene.sentinel)
    result = cli_in(
        scene.project, "ci", "github", "build.toml", "-o", ".github/workflows/variants.yml"
    )
    assert_one_user_error(result, ".github", "symlink")
    scene.assert_sentinel_untouched()


def test_ci_github_output_replaces_a_planted_file_link_without_following_it(
    scene: Scene,
) -> None:
    workflows = scene.project / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "variants.yml").symlink_to(scene.sentinel / "precious.txt")
    result = cli_in(
        scene.project, "ci", "github", "build.toml", "-o", ".github/workflows/variants.yml"
    )
    assert result.returncode == 0, result.stderr
    written = workflows / "variants.yml"
    assert not written.is_symlink() and "build2cmake build" in written.read_text()
    scene.assert_sentinel_untouched()


def test_init_refuses_a_target_folder_that_is_a_symlink(scene: Scene) -> None:
    (scene.project / "new-kernel").symlink_to(scene.sentinel)
    for target in ("new-kernel", "new-kernel/sub"):
        result = cli_in(scene.project, "init", target, "--name", "me/new-kernel", "--force")
        assert_one_user_error(result, "new-kernel", "symlink")
    # The default folder (./<kernel name>) planted as a link.
    result = cli_in(scene.project, "init", "--name", "me/new-kernel", "--backends", "cpu")
    assert_one_user_error(result, "new-kernel", "symlink")
    scene.assert_sentinel_untouched()


def test_init_force_refuses_a_linked_subfolder_before_writing_anything(scene: Scene) -> None:
    target = scene.project / "k"
    target.mkdir()
    (target / "tests").symlink_to(scene.sentinel)
    before = state(target)
    result = cli_in(scene.project, "init", "k", "--name", "me/k-one", "--force")
    assert_one_user_error(result, "tests", "symlink")
    # Not half-done: none of init's files before tests/ in its order was written either.
    assert state(target) == before
    scene.assert_sentinel_untouched()


# --- 3. half-done work: every argument and target checked before the first write ----------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("-j", "0"), "-j 0"),
        (("--concurrent", "0"), "--concurrent 0"),
        (("-D", "not a define"), "-D"),
        (("--ops-id", "x;y"), "--ops-id"),
    ],
)
def test_build_variants_checks_arguments_before_writing(
    scene: Scene, args: tuple[str, ...], needle: str
) -> None:
    before = state(scene.project)
    result = cli("build", scene.build_toml, "--variants", "torch2.13-cpu", "--no-isolation", *args)
    assert_one_user_error(result, needle)
    assert state(scene.project) == before
    scene.assert_sentinel_untouched()


def test_build_variants_refuses_an_undeclared_backend_before_writing(tmp_path: Path) -> None:
    assert cli_in(tmp_path, "init", "k", "--name", "me/k-one", "--backends", "cpu").returncode == 0
    before = state(tmp_path / "k")
    result = cli("build", tmp_path / "k" / "build.toml", "--variants", "torch2.13-cu130")
    assert_one_user_error(result, "torch2.13-cu130", "declares no such backend")
    assert state(tmp_path / "k") == before


# --- 4. crashes and hangs on hostile files we read --------------------------------------------


@pytest.mark.parametrize(
    ("template", "needle"),
    [
        # Unbounded loops (the sandbox's range gives 100000 items; nested, 10**10 iterations).
        (
            "# card\n\n{% for i in range(100000) %}{% for j in range(100000) %}"
            "{% endfor %}{% endfor %}\n",
            "(line 3): took longer than",
        ),
        ("{{ name }}\n{{ 'x' * 10**10 }}\n", "(line 2)"),
        ("{{ name }}\n\n{{ 'x' | center(10**10) }}\n", "(line 3)"),
        ("{% for i in range(100000) %}{{ 'y' * 100 }}{% endfor %}\n", "over 4194304 characters"),
        ("ok\n{{ 1 / 0 }}\n", "(line 2): ZeroDivisionError"),
        ("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}\n", "nests too deeply"),
    ],
)
def test_card_template_is_bounded_in_time_memory_and_output(
    scene: Scene, template: str, needle: str
) -> None:
    make_universal(scene)
    (scene.project / "CARD.md").write_text(template)
    project = load_project(scene.build_toml)
    with pytest.raises(Build2CMakeError, match=r"CARD\.md: cannot be filled in") as raised:
        card.render_card(project, scene.project)
    assert needle in str(raised.value)


def test_build_with_a_looping_card_is_one_error(scene: Scene) -> None:
    make_universal(scene)
    (scene.project / "CARD.md").write_text(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}\n"
    )
    result = cli("build", scene.build_toml, timeout=90)
    assert_one_user_error(result, "CARD.md", "line 1", "took longer than")


def _built_universal(scene: Scene) -> Path:
    make_universal(scene)
    result = cli("build", scene.build_toml)
    assert result.returncode == 0, result.stderr
    return scene.project / "build" / "torch-universal" / "metadata.json"


@pytest.mark.parametrize("attack", ["deep", "sparse", "fifo"])
def test_hostile_metadata_json_is_one_error_for_upload_and_test(scene: Scene, attack: str) -> None:
    metadata = _built_universal(scene)
    metadata.unlink()
    if attack == "deep":
        metadata.write_text("[" * 200_000)
    elif attack == "sparse":
        with open(metadata, "wb") as f:
            f.truncate(1 << 40)
    else:
        os.mkfifo(metadata)
    for args in (("upload", "--dry-run", "--repo-id", "me/uni"), ("test", "--variant", "x")):
        result = cli(args[0], scene.build_toml, *args[1:], timeout=30)
        assert_one_user_error(result, "metadata.json")
    scene.assert_sentinel_untouched()


@pytest.mark.parametrize(
    "source",
    [
        "x = " + "-" * 200_000 + "1\n",  # MemoryError in Python's parser
        "x = 1" + " + 1" * 300_000 + "\n",  # RecursionError building the AST
    ],
    ids=["unary-chain", "binop-chain"],
)
def test_package_python_too_deep_for_the_parser_is_one_error(scene: Scene, source: str) -> None:
    package = make_universal(scene)
    (package / "deep.py").write_text(source)
    result = cli("build", scene.build_toml)
    assert_one_user_error(result, "deep.py", "nest too deeply")
    assert not (scene.project / "build" / "torch-universal").exists()


def test_package_python_files_are_read_bounded(scene: Scene) -> None:
    package = make_universal(scene)
    with open(package / "huge.py", "wb") as f:
        f.truncate(1 << 40)
    result = cli("build", scene.build_toml, timeout=30)
    assert_one_user_error(result, "huge.py", "limit")


def test_a_deep_package_tree_is_one_error(scene: Scene) -> None:
    package = make_universal(scene)
    deep = package
    for _ in range(200):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "x.py").write_text("X = 1\n")
    result = cli("build", scene.build_toml, timeout=60)
    assert_one_user_error(result, "nests deeper than")


def test_non_utf8_names_in_the_package_never_crash(scene: Scene) -> None:
    package = make_universal(scene)
    os.close(os.open(os.fsencode(package) + b"/\xff\x1b[2J.py", os.O_CREAT | os.O_WRONLY))
    result = cli("build", scene.build_toml)
    assert_no_crash(result)
    assert "\x1b" not in result.stdout + result.stderr
    scene.assert_sentinel_untouched()


# --- 5. strings that reach YAML or a terminal ---------------------------------------------------


@pytest.mark.parametrize(
    "folder", ["${{ secrets.HF_TOKEN }}", "a: b", "#x", "a b", "x*", "caf\u00e9", "it's"]
)
def test_ci_github_refuses_a_path_actions_or_yaml_would_read_as_more(
    scene: Scene, folder: str
) -> None:
    repository = scene.project.parent / "repo"
    shutil.move(scene.project, repository / folder)
    result = cli_in(repository, "ci", "github", f"{folder}/build.toml", "--repository", ".")
    assert_one_user_error(result, "build.toml path", "ASCII letters")
    assert result.stdout == ""


def test_ci_github_workflow_of_a_plain_path_names_it() -> None:
    result = cli_in(
        REPO, "ci", "github", "tests/fixtures/scale_add/build.toml", "--repository", "."
    )
    assert result.returncode == 0, result.stderr
    assert '"BUILD_TOML": "tests/fixtures/scale_add/build.toml"' in result.stdout
    assert "secrets" not in result.stdout


_IMPORT_OPS = """
import pathlib, runpy, sys
path = pathlib.Path(sys.argv[1])
source = path.read_text().replace("_NAMESPACE = _load_extension()",
                                  "_NAMESPACE = next(iter(_EXTENSIONS))")
code = compile(source, str(path), "exec")
exec(code, {"__file__": str(path), "__name__": "ops_probe", "__package__": "scale_add"})
print("imported")
"""


@pytest.mark.parametrize("attack", ["escapes", "fifo", "genuine"])
def test_generated_ops_prints_only_its_own_rebuild_note(scene: Scene, attack: str) -> None:
    generate_torch(scene.build_toml)
    note = scene.project / "build" / "cmake" / "build2cmake-rebuilt"
    note.parent.mkdir(parents=True)
    ops = scene.project / "torch-ext" / "scale_add" / "_ops.py"
    extension = next(
        line.split('"')[1] for line in ops.read_text().splitlines() if '": "cpu"' in line
    )
    if attack == "escapes":
        note.write_text("\x1b]0;owned\x07\nbuild2cmake: error: forged")
    elif attack == "fifo":
        os.mkfifo(note)
    else:
        note.write_text(extension)
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_OPS, str(ops)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0 and result.stdout == "imported\n", result.stderr
    if attack == "genuine":
        assert result.stderr == f"build2cmake: {extension} was rebuilt since the last import\n"
    else:
        assert result.stderr == ""
    assert not note.exists()
