"""A command killed at any write it makes leaves a project that the next run of the same command
(or `clean`) brings to exactly what an uninterrupted run gives, without --force.

The kill lands exactly, not by timing: the command runs in a fresh interpreter with an audit hook
(sys.addaudithook) that counts the events that change the file system (an open for writing,
mkdir, rename/replace, remove, rmdir, symlink, chmod) and sends the process SIGKILL just before
the Nth. A first run counts them; then the command is killed at each in turn.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

KILLER = """
import os, signal, sys
_at = int(os.environ["B2C_KILL_AT"])
_seen = 0
_WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_CHANGES = {"os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.symlink", "os.link",
            "os.chmod", "os.truncate"}

def _hook(event, args):
    global _seen
    if event == "open":
        flags = args[2] if len(args) > 2 else None
        mode = args[1] if len(args) > 1 else None
        changes = (isinstance(flags, int) and flags & _WRITE) or (
            isinstance(mode, str) and any(c in mode for c in "wax+"))
    else:
        changes = event in _CHANGES
    if changes:
        _seen += 1
        if _seen == _at:
            os.kill(os.getpid(), signal.SIGKILL)

def _count():
    seen = _seen  # before this open, which the hook counts too
    with open(os.environ["B2C_KILL_COUNT"], "w") as f:
        f.write(str(seen))

if _at == 0:
    import atexit
    atexit.register(_count)
sys.addaudithook(_hook)
from build2cmake.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _run(cwd: Path, *args: str | Path, kill_at: int = -1, count: Path | None = None) -> int:
    env = dict(os.environ, B2C_KILL_AT=str(kill_at), B2C_KILL_COUNT=str(count or os.devnull))
    result = subprocess.run(
        [sys.executable, "-c", KILLER, *map(str, args)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if kill_at != -1 and kill_at != 0:
        return result.returncode
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return result.returncode


def _tree(root: Path) -> dict[str, str]:
    """Every entry under `root` (build folders of CMake aside), with a hash of each file."""
    found = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith("build/cmake"):
            continue
        if path.is_symlink():
            found[relative] = "-> " + os.readlink(path)
        elif path.is_dir():
            found[relative] = "dir"
        else:
            found[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _every_kill(
    tmp_path: Path,
    prepare: Callable[[Path], None],
    command: Callable[[Path], list[str | Path]],
    *,
    recover: Callable[[Path], list[str | Path]] | None = None,
    cwd: Callable[[Path], Path] = lambda root: root.parent,
    between: Callable[[Path], None] | None = None,
) -> int:
    """Kill `command` at each of its writes in a fresh copy made by `prepare`; after each kill,
    `recover` (default: the same command again) must succeed and leave the tree an
    uninterrupted run leaves. Commands run in `cwd(root)`. With `between`, the project is
    changed after the kill (and after the uninterrupted run) and the command runs again.
    Returns the number of writes."""
    reference = tmp_path / "reference" / "project"
    prepare(reference)
    count = tmp_path / "count"
    _run(cwd(reference), *command(reference), kill_at=0, count=count)
    writes = int(count.read_text())
    assert writes > 0
    if between is not None:
        between(reference)
        _run(cwd(reference), *command(reference))
    expected = _tree(reference.parent)
    for at in range(1, writes + 1):
        copy = tmp_path / f"kill{at}" / "project"
        prepare(copy)
        status = _run(cwd(copy), *command(copy), kill_at=at)
        assert status == -9, f"write {at} of {writes}: the kill did not land"
        if between is not None:
            between(copy)
        _run(cwd(copy), *(recover or command)(copy))
        if recover is not None:
            _run(cwd(copy), *command(copy))
        got = _tree(copy.parent)
        assert got == expected, f"after a kill at write {at} of {writes}"
        shutil.rmtree(copy.parent)
    return writes


def _noarch(root: Path) -> None:
    shutil.copytree(FIXTURES / "noarch", root)


def _generated(root: Path) -> None:
    _noarch(root)
    _run(root, "generate-torch", root / "build.toml")
    # An edit of build.toml after the first generate: the next one rewrites our files.
    toml = root / "build.toml"
    toml.write_text(toml.read_text().replace("version = 1", "version = 2", 1))


def test_generate_killed_at_any_write_is_finished_by_the_next_generate(tmp_path: Path) -> None:
    """Before: the manifest was written after the files, so a kill in between left our own
    files refused as "edited since". build.toml is edited again after the kill, so the next
    generate writes other content than the killed one did: each file the kill left, old or new,
    must be known as ours (a rerun of identical content would hide a manifest written late).
    The kernel is also renamed since the first generate: the old package's _ops.py is stale,
    listed as ours until it is gone, so a kill before its removal leaves it for the next
    generate to remove."""

    def renamed(root: Path) -> None:
        _generated(root)
        toml = root / "build.toml"
        toml.write_text(toml.read_text().replace('"noarch-kernel"', '"renamed-kernel"', 1))
        shutil.copytree(
            root / "torch-ext" / "noarch_kernel",
            root / "torch-ext" / "renamed_kernel",
            ignore=shutil.ignore_patterns("_ops.py"),  # generate's own
        )

    def edited_again(root: Path) -> None:
        toml = root / "build.toml"
        toml.write_text(toml.read_text().replace("version = 2", "version = 3", 1))

    _every_kill(
        tmp_path,
        renamed,
        lambda root: ["generate-torch", root / "build.toml"],
        between=edited_again,
    )


def test_clean_killed_at_any_write_is_finished_by_the_next_clean(tmp_path: Path) -> None:
    def built(root: Path) -> None:
        _noarch(root)
        _run(root, "build", root / "build.toml", "--backend", "cpu")

    _every_kill(tmp_path, built, lambda root: ["clean", root / "build.toml"])


@pytest.mark.compile
def test_clean_of_a_compiled_project_killed_at_any_write_is_finished_by_the_next_clean(
    tmp_path: Path,
) -> None:
    """A project with cmake/ and its metadata provider's folder, built once and copied for each
    kill, its build folder, variant and compile_commands.json link as build left them. Before
    (#60): a kill at the rmdir of cmake/build2cmake-metadata/ or of cmake/, after their last
    file went, left those folders empty for good."""
    built = tmp_path / "built" / "project"
    shutil.copytree(FIXTURES / "scale_add", built)
    _run(built.parent, "build", built / "build.toml", "--backend", "cpu")
    link = built / "compile_commands.json"
    destination = Path(os.readlink(link)).relative_to(built)

    def copy(root: Path) -> None:
        shutil.copytree(built, root, symlinks=True)
        (root / "compile_commands.json").unlink()
        (root / "compile_commands.json").symlink_to(root / destination)

    assert (built / "cmake" / "build2cmake-metadata").is_dir()
    _every_kill(tmp_path, copy, lambda root: ["clean", root / "build.toml"])


@pytest.mark.parametrize("provider_folder_left", [True, False])
def test_clean_removes_the_two_generated_folders_a_killed_clean_left_empty_and_no_other(
    tmp_path: Path, provider_folder_left: bool
) -> None:
    """What a clean killed between the last file of cmake/build2cmake-metadata/ or cmake/ and
    the folder's rmdir leaves, without a build: the folders empty (or cmake/ alone, the
    provider's folder removed), their files gone. The next clean removes them (#60) and no
    other folder it finds empty: torch-ext/<package>/, emptied here of the user's files and of
    our _ops.py alike, is the user's."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURES / "scale_add", root)
    _run(root.parent, "generate-torch", root / "build.toml")
    emptied = [root / "cmake", root / "torch-ext" / "scale_add"]
    for path in [p for folder in emptied for p in folder.rglob("*") if p.is_file()]:
        path.unlink()
    if not provider_folder_left:
        (root / "cmake" / "build2cmake-metadata").rmdir()
    _run(root.parent, "clean", root / "build.toml")
    assert not (root / "cmake").exists()
    assert (root / "torch-ext" / "scale_add").is_dir()


def test_build_killed_at_any_write_is_finished_by_the_next_build(tmp_path: Path) -> None:
    """A rebuild over an earlier variant: killed anywhere (records, staging, the swap), the
    next build replaces the variant without --force and no staging folder is left."""

    def built_once(root: Path) -> None:
        _noarch(root)
        _run(root, "build", root / "build.toml", "--backend", "cpu")
        (root / "torch-ext" / "noarch_kernel" / "extra.py").write_text("X = 2\n")

    writes = _every_kill(
        tmp_path, built_once, lambda root: ["build", root / "build.toml", "--backend", "cpu"]
    )
    assert writes >= 5


def test_init_killed_at_any_write_leaves_nothing_the_next_init_refuses(tmp_path: Path) -> None:
    def empty(root: Path) -> None:
        root.mkdir(parents=True)

    _every_kill(
        tmp_path,
        empty,
        lambda root: ["init", root / "kernel", "--name", "my-org/add-one", "--backends", "cpu"],
    )


@pytest.mark.parametrize("named", [".", "DIR"])
def test_init_into_an_empty_folder_killed_at_any_write_is_finished_by_the_next_init(
    tmp_path: Path, named: str
) -> None:
    """The folder the user made (and stands in, for `init .`) is filled in place: killed at any
    write, what init left is its own (its record lists it) and the next init, without --force,
    finishes it (#60)."""

    def made(root: Path) -> None:
        (root / "add-one").mkdir(parents=True)

    def init(root: Path) -> list[str | Path]:
        where = "." if named == "." else root / "add-one"
        return ["init", where, "--name", "my-org/add-one", "--backends", "cpu"]

    _every_kill(tmp_path, made, init, cwd=lambda root: root / "add-one" if named == "." else root)


def test_hash_killed_at_any_write_is_finished_by_the_next_hash(tmp_path: Path) -> None:
    """hash rewrites a variant's metadata.json recorded intent first: wherever it is killed, the
    variant stays build's own (the next hash, build or clean may replace or remove it)."""

    # Built once, then copied for each kill (hash reads no build folder).
    template = tmp_path / "template"
    _noarch(template)
    _run(template, "build", template / "build.toml", "--backend", "cpu")
    (init,) = [p for p in (template / "build").glob("*/__init__.py") if "cmake" not in str(p)]
    init.write_text("CHANGED = True\n")

    def built_and_changed(root: Path) -> None:
        shutil.copytree(template, root, symlinks=True)

    _every_kill(tmp_path, built_and_changed, lambda root: ["hash", root / "build.toml"])


@pytest.mark.parametrize("where", ["generate", "build"])
def test_a_killed_command_is_undone_by_clean(tmp_path: Path, where: str) -> None:
    """After a kill at any write of generate or build, clean removes everything ours: the tree
    is the project as it was before generate."""
    pristine = tmp_path / "pristine"
    _noarch(pristine)
    expected = _tree(pristine)
    command = ["generate-torch"] if where == "generate" else ["build"]
    extra = [] if where == "generate" else ["--backend", "cpu"]
    reference = tmp_path / "reference"
    _noarch(reference)
    count = tmp_path / "count"
    _run(reference, *command, reference / "build.toml", *extra, kill_at=0, count=count)
    for at in range(1, int(count.read_text()) + 1):
        copy = tmp_path / f"kill{at}"
        _noarch(copy)
        status = _run(copy, *command, copy / "build.toml", *extra, kill_at=at)
        assert status == -9
        _run(copy, "clean", copy / "build.toml")
        got = {k: v for k, v in _tree(copy).items() if not k.startswith(".build2cmake-lock")}
        # clean keeps build/ itself only when something of the user's is in it.
        got.pop("build", None)
        assert got == expected, f"after a kill at write {at}"
        shutil.rmtree(copy)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs (root only), unmounted however the test ends."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk: Path, leave: int) -> Path:
    """A file that leaves about `leave` bytes of `disk` free."""
    filler = disk / "filler"
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with open(filler, "wb") as f:
        f.write(b"\0" * max(free - leave, 0))
    return filler


@pytest.mark.parametrize("command", ["generate-torch", "build"])
def test_a_full_disk_part_way_is_one_error_and_the_rerun_finishes(
    tmp_path: Path, small_disk: Path, command: str
) -> None:
    """The disk fills at every point of generate (over an earlier generate, after an edit of
    build.toml) and of build (over an earlier variant): each run either succeeds or fails with
    one error line, never a traceback; once space is freed the same command gives the tree an
    uninterrupted run gives."""
    extra = ["--backend", "cpu"] if command == "build" else []
    reference = tmp_path / "reference" / "project"
    _generated(reference)
    _run(reference.parent, command, reference / "build.toml", *extra)
    expected = _tree(reference.parent)
    failures = 0
    for leave in (0, 2048, 8192, 16384, 32768, 65536, 131072):
        project = small_disk / "project"
        shutil.rmtree(project, ignore_errors=True)
        _generated(project)
        if command == "build":
            _run(project.parent, "build", project / "build.toml", "--backend", "cpu")
            (project / "torch-ext" / "noarch_kernel" / "extra.py").write_text("X = 2\n")
            (reference / "torch-ext" / "noarch_kernel" / "extra.py").write_text("X = 2\n")
        filler = _fill(small_disk, leave)
        result = subprocess.run(
            [sys.executable, "-m", "build2cmake", command, str(project / "build.toml"), *extra],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert "Traceback" not in result.stderr, result.stderr
        if result.returncode != 0:
            failures += 1
            errors = [x for x in result.stderr.splitlines() if x.startswith("build2cmake: error")]
            assert result.returncode == 2 and len(errors) == 1, result.stderr
        filler.unlink()
        _run(project.parent, command, project / "build.toml", *extra)
        if command == "build":
            _run(reference.parent, command, reference / "build.toml", *extra)
            expected = _tree(reference.parent)
        got = {k: v for k, v in _tree(small_disk).items() if k != "filler"}
        assert got == expected, f"after a full disk with {leave} bytes left"
    assert failures > 0, "the disk never filled: the test proves nothing"


class _Killed(BaseException):
    """Stands for SIGKILL in-process: nothing after it runs, no except Exception catches it."""


def test_two_kills_in_a_row_leave_generates_own_file_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Generate killed before it replaced pyproject.toml, twice, with build.toml edited between:
    the manifest must still list the content on disk (not only the last intended one), so the
    third generate replaces the file without --force."""
    from build2cmake.api import generate_torch
    from build2cmake.ground.safefs import ProjectFolder

    root = tmp_path / "project"
    _noarch(root)
    generate_torch(root / "build.toml")
    real_write = ProjectFolder.write_atomic

    def killed_at_pyproject(self: ProjectFolder, name: object, *args: object, **kw: object) -> None:
        if str(name) == "pyproject.toml":
            raise _Killed
        real_write(self, name, *args, **kw)  # type: ignore[arg-type]

    toml = root / "build.toml"
    for version in (2, 3):
        edited = re.sub(r"version = [0-9]+", f"version = {version}", toml.read_text(), count=1)
        toml.write_text(edited)
        with monkeypatch.context() as patch:
            patch.setattr(ProjectFolder, "write_atomic", killed_at_pyproject)
            with pytest.raises(_Killed):
                generate_torch(toml)
    report = generate_torch(toml)  # no --force
    assert "pyproject.toml" in report.written
