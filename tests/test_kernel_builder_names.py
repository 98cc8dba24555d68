"""kernel-builder's command names on build2cmake (kernel-builder/src/main.rs): the aliases take
kernel-builder's arguments and do what build2cmake's own command does; hash, check-builds,
list-variants --arch, completions and build-and-upload are built here; the Nix-only commands
answer with one line. Projects are the noarch fixture, which `build` lays out without compiling.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import pty
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from build2cmake.builds import digest
from build2cmake.cli import completions, kernel_builder
from build2cmake.cli.parser import argument_parser
from tests.conftest import FIXTURES
from tests.hub_standin import StandInHub, hub_cli

REPO_ID = "stand-in-org/noarch-kernel"
VARIANT = "torch-cpu"


_cli = hub_cli


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _one_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "noarch"
    shutil.copytree(FIXTURES / "noarch", root)
    toml = root / "build.toml"
    hub_table = f'\n[general.hub]\nrepo-id = "{REPO_ID}"\n\n[torch-noarch]\n'
    toml.write_text(toml.read_text().replace("\n[torch-noarch]\n", hub_table))
    return root


@pytest.fixture
def built(project: Path) -> Path:
    _ok(_cli(project, "build", "--backend", "cpu"))
    return project


@pytest.fixture
def hub() -> Iterator[StandInHub]:
    server = StandInHub().start()
    yield server
    server.stop()


# -- the names and where help shows them -------------------------------------------------------


def test_kernel_builder_names_are_not_in_the_command_list_and_named_once_in_the_epilog(
    tmp_path: Path,
) -> None:
    text = _ok(_cli(tmp_path, "--help"))
    listing, _, epilog = text.partition("kernel-builder's command names work too:")
    for name in kernel_builder.NAMES:
        assert name not in listing
        assert " ".join(epilog.split()).count(name) == 1
    for ours in ("generate-torch", "lock", "hash", "check-builds", "completions"):
        assert ours in listing


def test_create_pyproject_and_clean_pyproject_work_on_a_kernel_dir(project: Path) -> None:
    out = _ok(_cli(project.parent, "create-pyproject", project, "--unique-id", "abc123", "-f"))
    assert "wrote pyproject.toml" in out
    ops = (project / "torch-ext" / "noarch_kernel" / "_ops.py").read_text()
    assert '"_noarch_kernel_universal_abc123"' in ops
    dry = _ok(_cli(project.parent, "clean-pyproject", project, "-d", "--ops-id", "abc123"))
    assert "would remove pyproject.toml" in dry and (project / "pyproject.toml").is_file()
    _ok(_cli(project, "clean-pyproject"))  # KERNEL_DIR defaults to the current folder
    assert not (project / "pyproject.toml").exists()


def test_check_config_validates_the_build_toml_of_a_kernel_dir(project: Path) -> None:
    assert "valid (edition 5, torch-noarch)" in _ok(_cli(project.parent, "check-config", project))
    (project / "build.toml").write_text("[general]\nname = 1\n")
    result = _cli(project, "check-config")
    assert result.returncode == 2 and "build.toml" in result.stderr


@pytest.mark.parametrize("name", sorted(kernel_builder.NOT_HERE))
def test_nix_only_commands_answer_with_one_line_whatever_the_arguments(
    tmp_path: Path, name: str
) -> None:
    result = _cli(tmp_path, name, "--variant", "torch213-cxx11-cpu-x86_64-linux", "-L", "x")
    _one_error(result, name)
    assert result.stdout == ""


def test_create_pyproject_kernel_sha_says_where_provenance_comes_from(project: Path) -> None:
    result = _cli(project, "create-pyproject", "--kernel-sha", "a" * 40)
    _one_error(result, "--kernel-sha", "checkout's git")
    assert not (project / "pyproject.toml").exists()


def test_build_takes_a_kernel_dir_and_kernel_builders_variant_option(project: Path) -> None:
    out = _ok(_cli(project.parent, "build", project, "--backend", "cpu"))
    assert out.splitlines()[-1].startswith(f"built {project / 'build' / VARIANT}")
    # --variant is --variants' kernel-builder spelling, with the variant's folder name.
    folder = f"torch213-cxx11-cpu-{platform.machine()}-linux"
    table = _ok(_cli(project, "build", "--variant", folder, "--no-isolation"))
    assert f"{folder}  ok" in table and "1 of 1 variants built" in table
    _one_error(_cli(project, "build", "--variant", "torch2.13-cpu", "--all"), "not allowed with")


@pytest.mark.parametrize("name", ["build-and-copy", "build-and-upload"])
def test_kernel_builders_max_jobs_and_cores_are_variants_at_once_and_jobs_per_variant(
    project: Path, name: str
) -> None:
    """--max-jobs N is build's --concurrent N (variants at once), --cores N its -j N (jobs per
    variant); build-and-copy builds every Hub variant, one at a time unless told."""
    parser = argument_parser()
    args = parser.parse_args([name, str(project), "--max-jobs", "3", "--cores", "5"])
    assert (args.concurrent, args.jobs, args.build_toml) == (3, 5, project / "build.toml")
    assert parser.parse_args([name, str(project)]).concurrent == 1
    assert parser.parse_args(["build-and-copy"]).all is True


def test_list_variants_arch_prints_the_folder_names(tmp_path: Path) -> None:
    gemm = FIXTURES.parent.parent / "kernels" / "gemm"
    specs = _ok(_cli(tmp_path, "list-variants", gemm)).split()
    folders = _ok(_cli(tmp_path, "list-variants", gemm, "--arch")).split()
    assert specs and len(folders) == len(specs)
    assert all(f.endswith("-linux") and "-cxx11-" in f for f in folders)
    assert folders == _ok(_cli(tmp_path, "list-variants", gemm / "build.toml", "--folders")).split()


def test_init_takes_kernel_builders_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "relu"
    target.mkdir()
    (target / "notes.txt").write_text("mine\n")
    refused = _cli(tmp_path, "init", target, "--name", "my-org/relu", "--backends", "cpu")
    assert refused.returncode == 2
    _ok(_cli(tmp_path, "init", target, "--name", "my-org/relu", "--backends", "cpu", "--overwrite"))
    assert (target / "build.toml").is_file() and (target / "notes.txt").read_text() == "mine\n"


# -- hash and check-builds ---------------------------------------------------------------------


def _kernels_digest(variant: Path) -> dict[str, str]:
    rust = pytest.importorskip("kernels._rust")
    files: dict[str, str] = rust.Digest.hash_variant(rust.DigestAlgorithm.SHA256, variant).files
    return files


def test_hash_rewrites_a_stale_digest_as_kernels_computes_it(built: Path) -> None:
    variant = built / "build" / VARIANT
    assert "ok" in _ok(_cli(built, "check-builds"))
    (variant / "__init__.py").write_text("CHANGED = True\n")
    (variant / "extra.py").write_text("X = 1\n")
    stale = _cli(built, "check-builds")
    assert stale.returncode == 1
    assert f"build/{VARIANT}/: __init__.py: does not match its digest" in stale.stdout
    assert f"build/{VARIANT}/: extra.py: not in the digest" in stale.stdout
    out = _ok(_cli(built.parent, "hash", built))
    assert f"build/{VARIANT}/: digest written" in out
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["digest"]["files"] == _kernels_digest(variant)
    assert metadata["digest"]["algorithm"] == digest.ALGORITHM
    assert "ok" in _ok(_cli(built, "check-builds"))
    assert "digest unchanged" in _ok(_cli(built, "hash"))


def test_a_variant_build_made_stays_its_own_after_hash(built: Path) -> None:
    (built / "build" / VARIANT / "__init__.py").write_text("CHANGED = True\n")
    _ok(_cli(built, "hash"))
    # clean removes only variant folders build made and nobody changed since: hash's rewrite
    # of metadata.json is recorded as build's own.
    out = _ok(_cli(built, "clean", "build.toml"))
    assert f"removed build/{VARIANT}/" in out
    assert not (built / "build" / VARIANT).exists()


def test_hash_refuses_a_variant_holding_a_symlink(built: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not the kernel's\n")
    (built / "build" / VARIANT / "leak.py").symlink_to(secret)
    before = (built / "build" / VARIANT / "metadata.json").read_bytes()
    _one_error(_cli(built, "hash"), "leak.py", "symlink")
    assert (built / "build" / VARIANT / "metadata.json").read_bytes() == before


def test_hash_without_a_build_says_to_build_first(project: Path) -> None:
    _one_error(_cli(project, "hash"), "no build variant", "build2cmake build")


def test_check_builds_uses_kernels_own_metadata_parser(built: Path) -> None:
    pytest.importorskip("kernels._rust")
    metadata = built / "build" / VARIANT / "metadata.json"
    data = json.loads(metadata.read_text())
    del data["backend"]
    metadata.write_text(json.dumps(data))
    result = _cli(built, "check-builds")
    assert result.returncode == 1
    assert "kernels' metadata parser refuses it" in result.stdout


# -- fill-card ---------------------------------------------------------------------------------


def test_fill_card_prints_or_writes_the_filled_card(project: Path) -> None:
    (project / "CARD.md").write_text("# {{ repo_id }}\n")
    printed = _ok(_cli(project, "fill-card"))
    assert REPO_ID in printed
    _ok(_cli(project.parent, "fill-card", project, "card-out.md"))
    assert (project.parent / "card-out.md").read_text() == printed
    (project / "CARD.md").unlink()
    _one_error(_cli(project, "fill-card"), "CARD.md", "missing")


def test_fill_card_escapes_the_card_on_a_terminal(project: Path) -> None:
    (project / "CARD.md").write_text("# {{ repo_id }}\x1b[2J\nfine\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    main, terminal = pty.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "build2cmake", "fill-card"],
            stdout=terminal,
            stderr=subprocess.PIPE,
            cwd=project,
            env=env,
            check=False,
            timeout=60,
        )
    finally:
        os.close(terminal)
    shown = b""
    with contextlib.suppress(OSError):  # EIO once the terminal's other end is closed
        while chunk := os.read(main, 4096):
            shown += chunk
    os.close(main)
    assert result.returncode == 0, result.stderr
    assert b"\x1b" not in shown and f"# {REPO_ID}\\x1b[2J".encode() in shown
    assert b"fine" in shown


# -- completions -------------------------------------------------------------------------------


def _bash_complete(script: Path, *words: str) -> list[str]:
    """What bash's completion function offers for `words` (the last is the one completed)."""
    array = " ".join(f"'{w}'" for w in words)
    code = (
        f"source {script}; COMP_WORDS=({array}); COMP_CWORD={len(words) - 1}; "
        'complete -p build2cmake >/dev/null && _build2cmake && printf "%s\\n" "${COMPREPLY[@]}"'
    )
    result = subprocess.run(["bash", "-c", code], capture_output=True, text=True, check=True)
    return result.stdout.split()


def test_bash_completes_commands_options_and_their_choices(tmp_path: Path) -> None:
    script = tmp_path / "build2cmake.bash"
    script.write_text(_ok(_cli(tmp_path, "completions", "bash")))
    assert _bash_complete(script, "build2cmake", "gen") == ["generate-torch"]
    assert _bash_complete(script, "build2cmake", "lo") == ["lock"]
    assert _bash_complete(script, "build2cmake", "build", "--al") == [
        "--allow-toolkit-mismatch",
        "--all",
    ]
    assert _bash_complete(script, "build2cmake", "build", "--backend", "") == [
        "cpu",
        "cuda",
        "rocm",
    ]
    assert _bash_complete(script, "build2cmake", "completions", "") == ["bash", "zsh", "fish"]
    # kernel-builder's names are not offered, and complete their own options once typed.
    assert _bash_complete(script, "build2cmake", "create") == []
    assert _bash_complete(script, "build2cmake", "create-pyproject", "--uni") == ["--unique-id"]
    # Where the script offers nothing (a file argument), bash completes file names.
    registered = subprocess.run(
        ["bash", "-c", f"source {script}; complete -p build2cmake"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert registered.split() == ["complete", "-o", "default", "-F", "_build2cmake", "build2cmake"]


def test_completions_follow_the_parser_so_new_commands_complete_by_themselves(
    tmp_path: Path,
) -> None:
    parser = argument_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    frob = commands.add_parser("frobnicate", help="a command added later")
    frob.add_argument("--level", choices=["low", "high"])
    script = tmp_path / "b.bash"
    script.write_text(completions.script("bash", parser))
    assert _bash_complete(script, "build2cmake", "frob") == ["frobnicate"]
    assert _bash_complete(script, "build2cmake", "frobnicate", "--level", "h") == ["high"]
    assert "frobnicate" in completions.script("zsh", parser)
    assert "frobnicate" in completions.script("fish", parser)


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_script_parses_and_offers_commands_and_options(tmp_path: Path) -> None:
    text = _ok(_cli(tmp_path, "completions", "zsh"))
    assert text.startswith("#compdef build2cmake\n")
    script = tmp_path / "_build2cmake"
    # The file's last line runs the function (zsh's autoload does that); the test calls it.
    script.write_text(text.replace('_build2cmake "$@"\n', ""))
    subprocess.run(["zsh", "-n", str(script)], check=True)
    code = (
        '_describe() { print -l -- "${(@P)4}" }; _arguments() { print -l -- "$@" }; '
        f"source {script}; "
        "words=(build2cmake ge); CURRENT=2; _build2cmake; print -- ---; "
        "words=(build2cmake build --ba); CURRENT=3; _build2cmake"
    )
    out = subprocess.run(["zsh", "-c", code], capture_output=True, text=True, check=True).stdout
    commands, _, build = out.partition("---\n")
    assert (
        "generate-torch:write CMakeLists.txt, cmake/, pyproject.toml and the torch glue" in commands
    )
    assert "create-pyproject" not in commands
    assert (
        "--backend[backend to build (default: the installed torch's)]:value:(cpu cuda rocm)"
        in build
    )


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_script_completes_commands_and_options(tmp_path: Path) -> None:
    script = tmp_path / "build2cmake.fish"
    script.write_text(_ok(_cli(tmp_path, "completions", "fish")))
    code = (
        f"source {script}; complete -C 'build2cmake gen'; echo ---; "
        "complete -C 'build2cmake build --backend '"
    )
    out = subprocess.run(["fish", "-c", code], capture_output=True, text=True, check=True).stdout
    commands, _, choices = out.partition("---\n")
    assert commands.split("\t")[0] == "generate-torch"
    assert [line.split("\t")[0] for line in choices.splitlines()] == ["cpu", "cuda", "rocm"]


# -- build-and-upload --------------------------------------------------------------------------


def test_build_and_upload_builds_then_uploads_what_it_built(project: Path, hub: StandInHub) -> None:
    result = _cli(
        project, "build-and-upload", "--backend", "cpu", "--output-json", "s.json", hub=hub
    )
    out = _ok(result)
    assert f"built build/{VARIANT}" in out
    assert f"uploaded: {hub.url}/kernels/{REPO_ID}/tree/v1" in out
    (commit,) = [c for c in hub.commits if c.revision == "v1"]
    assert f"build/{VARIANT}/metadata.json" in commit.added
    assert (
        commit.added[f"build/{VARIANT}/metadata.json"]
        == (project / "build" / VARIANT / "metadata.json").read_bytes()
    )
    assert json.loads((project / "s.json").read_text())["status"] == "uploaded"


def test_build_and_upload_uploads_nothing_when_the_build_fails(
    project: Path, hub: StandInHub
) -> None:
    (project / "torch-ext" / "noarch_kernel" / "__init__.py").unlink()
    result = _cli(project, "build-and-upload", "--backend", "cpu", hub=hub)
    assert result.returncode == 2
    assert hub.commits == [] and hub.created == []
    # Variants built as kernel-builder builds them, one of which fails: the table, no upload.
    folder = f"torch213-cxx11-cpu-{platform.machine()}-linux"
    result = _cli(project, "build-and-upload", "--variant", folder, "--no-isolation", hub=hub)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "0 of 1 variants built" in result.stdout
    assert "not uploading: not every variant built" in result.stderr
    assert hub.commits == [] and hub.created == []
