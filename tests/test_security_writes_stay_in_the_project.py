"""What may be written: nothing outside the project (or the folder named), and nothing through a
symlink.

CMake, Ninja, the compilers and our build-time scripts follow symlinks, so a symlink planted in
an output folder (cmake/, torch-ext/<package>/), in a build folder (build/cmake*) or under a
temporary file's name must never be written through, whether the build runs through `build2cmake
build`, `pip install -e` or a plain `cmake -S -B`; `init` and `ci github -o` write only inside the
folder named; a file or variant the user changed is replaced only with --force; generate, build
and clean take turns on the project folder's lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from build2cmake.api import build, clean, generate_torch, update_build
from build2cmake.builds import builder
from build2cmake.generate.fileset import content_hash
from build2cmake.ground import folder_marks
from build2cmake.ground.errors import Build2CMakeError
from build2cmake.ground.safefs import ProjectFolder
from tests.conftest import REPO, BuildEnv, requires_rocm_toolchain
from tests.security import (
    FIXTURES,
    Scene,
    assert_one_user_error,
    cli,
    cli_in,
    cmake,
    configure,
    make_universal,
    state,
)

# Output folders and temporary files: generate and update-build ------------------------------------


@pytest.mark.parametrize("folder", ["cmake", "torch-ext/scale_add", "torch-ext"])
def test_generate_refuses_a_symlinked_output_folder(scene: Scene, folder: str) -> None:
    link = scene.project / folder
    if link.exists():
        import shutil

        shutil.rmtree(link)
    link.symlink_to(scene.sentinel)
    before = state(scene.project)
    result = cli("generate-torch", scene.build_toml, "--force")
    if folder == "torch-ext":
        # The binding sources live there: validation already names each one (one line each).
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert "[torch].src[0]: 'torch-ext/torch_binding.cpp' is a symlink" in result.stderr
    else:
        assert_one_user_error(result, "is a symlink")
    scene.assert_sentinel_untouched()
    assert state(scene.project) == before  # refused before the first write


def test_generate_stale_temporary_sweep_stays_out_of_symlinked_folders(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    cmake = scene.project / "cmake"
    shutil.rmtree(cmake)
    cmake.symlink_to(scene.sentinel)  # the sentinel holds .build2cmake_torch.cmake.*.tmp
    with pytest.raises(Build2CMakeError, match="symlink"):
        generate_torch(scene.build_toml, force=True)
    scene.assert_sentinel_untouched()


def test_generate_replaces_a_symlinked_file_without_writing_through_it(scene: Scene) -> None:
    (scene.project / "CMakeLists.txt").symlink_to(scene.sentinel / "CMakeLists.txt")
    result = cli("generate-torch", scene.build_toml)
    assert_one_user_error(result, "CMakeLists.txt", "--force")
    generate_torch(scene.build_toml, force=True)
    scene.assert_sentinel_untouched()
    assert not (scene.project / "CMakeLists.txt").is_symlink()


def test_generate_never_writes_through_a_planted_temporary_file(scene: Scene) -> None:
    """Temporary names are random and opened with O_EXCL|O_NOFOLLOW; plant links under the
    old fixed and the prefix names anyway."""
    planted = []
    for name in ("CMakeLists.txt", "pyproject.toml"):
        for suffix in ("tmp", "update.tmp", "x.tmp", "b2c-0123abcd.tmp"):
            planted.append(scene.project / f".{name}.{suffix}")
            planted[-1].symlink_to(scene.sentinel / "precious.txt")
    generate_torch(scene.build_toml)
    scene.assert_sentinel_untouched()
    # The sweep removed the links at names our writer makes (never their targets) and left
    # the others, which are not ours to delete.
    left = {p.name for p in planted if p.is_symlink()}
    assert left == {p.name for p in planted if ".b2c-" not in p.name}


def test_update_build_never_writes_through_a_planted_temporary_symlink(scene: Scene) -> None:
    seed = scene.build_toml.read_text().replace('backends = ["cpu", "cuda", "rocm"]\n', "")
    seed = seed.replace("[general]\n", '[general]\nlicense = "MIT"\n')
    scene.build_toml.write_text(seed)
    (scene.project / ".build.toml.update.tmp").symlink_to(scene.sentinel / "precious.txt")
    assert update_build(scene.build_toml) is True
    scene.assert_sentinel_untouched()
    assert 'backends = ["cpu", "cuda", "rocm"]' in scene.build_toml.read_text()


def test_update_build_refuses_a_symlinked_build_toml(scene: Scene) -> None:
    seed = scene.build_toml.read_text().replace('backends = ["cpu", "cuda", "rocm"]\n', "")
    seed = seed.replace("[general]\n", '[general]\nlicense = "MIT"\n')
    (scene.project / "real.toml").write_text(seed)
    scene.build_toml.unlink()
    scene.build_toml.symlink_to("real.toml")
    result = cli("update-build", scene.build_toml)
    assert_one_user_error(result, "symlink")
    assert (scene.project / "real.toml").read_text() == seed


def test_project_folder_walk_refuses_a_symlink_swapped_in(tmp_path: Path) -> None:
    """The fd walk itself: a component that is a symlink is refused even when it points back
    inside the project (no check-then-use window)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "inside").symlink_to("real")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (tmp_path / "out").symlink_to(outside)
    with ProjectFolder(tmp_path) as folder:
        for name in ("inside/x", "out/x", "out/a/b"):
            with pytest.raises(Build2CMakeError, match="symlink"):
                folder.write_atomic(name, b"x")
        for name in ("../x", "/etc/passwd", "a//b", "a/./b", "", "a\0b"):
            with pytest.raises(Build2CMakeError, match="not a normalized path"):
                folder.write_atomic(name, b"x")
            with pytest.raises(Build2CMakeError, match="not a normalized path"):
                folder.unlink(name)
        with pytest.raises(Build2CMakeError, match="symlink"):
            folder.rmtree("out/a")
        with pytest.raises(Build2CMakeError, match="not a real folder"):
            folder.rmtree("out")
        assert folder.unlink("out") is True  # the link itself
    assert list(outside.iterdir()) == []
    assert sorted(os.listdir(tmp_path)) == ["inside", "real"]


def test_write_never_follows_a_link_at_its_own_temporary_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Temporary names are random; should an attacker guess one (here: we fix it) and plant a
    symlink there, O_EXCL|O_NOFOLLOW refuses it instead of writing through it."""
    import build2cmake.ground.safefs as safefs

    monkeypatch.setattr(safefs.secrets, "token_hex", lambda n: "guessed")
    target = tmp_path / "outside.txt"
    target.write_text("untouched")
    project = tmp_path / "p"
    project.mkdir()
    (project / ".CMakeLists.txt.b2c-guessed.tmp").symlink_to(target)
    with ProjectFolder(project) as folder, pytest.raises(Build2CMakeError, match="cannot write"):
        folder.write_atomic("CMakeLists.txt", b"attack")
    assert target.read_text() == "untouched"
    assert not (project / "CMakeLists.txt").exists()


@pytest.mark.parametrize("link", ["build", "build/cmake"])
def test_generate_refuses_a_symlinked_build_folder_pip_would_write_through(
    scene: Scene, link: str
) -> None:
    (scene.project / "build").mkdir()
    if link == "build":
        (scene.project / "build").rmdir()
    (scene.project / link).symlink_to(scene.sentinel)
    before = state(scene.project)
    assert_one_user_error(cli("generate-torch", scene.build_toml), link, "symlink")
    assert state(scene.project) == before
    scene.assert_sentinel_untouched()


def chattr(flag: str, path: Path) -> bool:
    if shutil.which("chattr") is None:
        return False
    done = subprocess.run(["chattr", flag, str(path)], capture_output=True, check=False)
    return done.returncode == 0


def test_unwritable_target_folder_is_one_error_and_leaves_it_as_it_was(scene: Scene) -> None:
    # Root ignores permission bits; the immutable attribute stops root too.
    if os.geteuid() != 0 and not chattr("+i", scene.project):
        (scene.project).chmod(0o555)
    elif not chattr("+i", scene.project):
        pytest.skip("cannot make a folder unwritable here (no chattr +i)")
    try:
        before = state(scene.project)
        result = cli("generate-torch", scene.build_toml)
        assert_one_user_error(result, "cannot write")
        assert state(scene.project) == before
    finally:
        chattr("-i", scene.project)
        scene.project.chmod(0o755)


# Build folders: refused before anything runs (generate, build, the pip metadata hook) -------------


# A module that, when imported, leaves a mark in the sentinel tree (the test then fails).
MARKER = "ran.txt"
# An escape sequence (clear the screen, turn red) in a planted name, and how it must be shown.
ESCAPES = "\x1b[2J\x1b[31m"
ESCAPES_SHOWN = "\\x1b[2J\\x1b[31m"


def one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(
    "planted",
    [
        "build/cmake/CMakeFiles",
        "build/cmake/build2cmake-rebuilt",
        "build/cmake/hipified",
        "build/cmake/CMakeFiles/_scale_add.dir/deep",
        "build/cmake-variant-cpu/build2cmake-defines.json",
    ],
)
def test_generate_refuses_a_symlink_anywhere_in_a_build_folder(scene: Scene, planted: str) -> None:
    link = scene.project / planted
    link.parent.mkdir(parents=True)
    link.symlink_to(scene.sentinel / "precious.txt")
    before = state(scene.project)
    result = cli("generate-torch", scene.build_toml)
    assert_one_user_error(result, f"{link}: is a symlink (to {scene.sentinel}", "real files")
    assert state(scene.project) == before  # refused before the first write
    scene.assert_sentinel_untouched()


def test_generate_refuses_a_fifo_in_the_build_folder(scene: Scene) -> None:
    (scene.project / "build" / "cmake").mkdir(parents=True)
    os.mkfifo(scene.project / "build" / "cmake" / "build.ninja")
    assert_one_user_error(cli("generate-torch", scene.build_toml), "build.ninja: is a FIFO")


def test_build_never_writes_its_defines_record_through_a_planted_symlink(scene: Scene) -> None:
    """The red-team case: `build` overwrote the link's target with "[]"."""
    folder = scene.project / "build" / "cmake-variant-cpu"
    folder.mkdir(parents=True)
    (folder / "build2cmake-defines.json").symlink_to(scene.sentinel / "precious.txt")
    result = cli("build", scene.build_toml, "--backend", "cpu")
    assert_one_user_error(result, "build2cmake-defines.json: is a symlink", "real files")
    scene.assert_sentinel_untouched()


def test_compile_project_checks_its_build_folder_before_cmake_runs(scene: Scene) -> None:
    """`build --variants` reaches compile_project without generate: it checks on its own. (A
    folder the clone shipped is replaced whole before this check; a link inside a folder made
    here is refused.)"""
    generate_torch(scene.build_toml)
    with ProjectFolder(scene.project) as project:
        folder_marks.claim(project, "build/cmake-variant-cpu")
    folder = scene.project / "build" / "cmake-variant-cpu" / "CMakeFiles"
    folder.symlink_to(scene.sentinel)
    with pytest.raises(Build2CMakeError, match="CMakeFiles: is a symlink"):
        builder.compile_project(scene.project, "cpu")
    scene.assert_sentinel_untouched()


def test_defines_record_planted_as_a_symlink_is_ignored_and_replaced(scene: Scene) -> None:
    folder = scene.project / "b"
    folder.mkdir()
    record = folder / "build2cmake-defines.json"
    record.symlink_to(scene.sentinel / "precious.txt")
    assert builder.fresh_cache_arguments(folder, ["A=1"]) == []  # not read through the link
    builder._record_defines(folder, ["A=1"])
    assert not record.is_symlink() and record.read_text() == '["A=1"]\n'
    scene.assert_sentinel_untouched()


@pytest.mark.parametrize("planted", ["build", "build/cmake", "build/cmake/CMakeFiles"])
def test_pip_install_refuses_a_planted_build_folder_symlink_before_cmake_runs(
    scene: Scene, build_env: BuildEnv, planted: str
) -> None:
    generate_torch(scene.build_toml)
    elsewhere = scene.project.parent / "elsewhere"
    elsewhere.mkdir()
    link = scene.project / planted
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(elsewhere)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(build_env.python), "install",
         "--no-build-isolation", "--no-deps", "-q", "-e", str(scene.project)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert f"{link} is a symlink" in one_line(result.stderr), result.stderr
    assert list(elsewhere.iterdir()) == []  # scikit-build-core and CMake never started


def test_pip_install_prints_a_planted_link_target_escaped(
    scene: Scene, build_env: BuildEnv
) -> None:
    """cmake/build2cmake_metadata.py names the link and its target: an escape sequence in the
    target reaches the terminal escaped."""
    generate_torch(scene.build_toml)
    link = scene.project / "build" / "cmake" / "CMakeFiles"
    link.parent.mkdir(parents=True)
    link.symlink_to(f"{scene.sentinel}{ESCAPES}")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(build_env.python), "install",
         "--no-build-isolation", "--no-deps", "-q", "-e", str(scene.project)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "\x1b" not in result.stdout + result.stderr
    shown = f"{link} is a symlink (to {scene.sentinel}{ESCAPES_SHOWN})"
    assert shown in one_line(result.stderr), result.stderr
    scene.assert_sentinel_untouched()


# Build folders: the generated CMake, through a plain `cmake -S -B` --------------------------------


@pytest.mark.compile
def test_configure_removes_symlinks_planted_in_the_build_folder_then_stops(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    elsewhere = scene.project.parent / "elsewhere"
    elsewhere.mkdir()
    build = scene.project / "build" / "cmake"
    (build / "sub").mkdir(parents=True)
    (build / "CMakeFiles").symlink_to(elsewhere)
    (build / "build2cmake-rebuilt").symlink_to(scene.sentinel / "precious.txt")
    (build / "sub" / "compile_commands.json").symlink_to(scene.sentinel / "metadata.json")
    result = configure(scene.project)
    assert result.returncode != 0
    message = one_line(result.stderr)
    assert "held symlinks" in message
    for name in ("CMakeFiles", "build2cmake-rebuilt", "sub/compile_commands.json"):
        assert f"{build / name} (a symlink to" in message
        assert not (build / name).is_symlink()
    scene.assert_sentinel_untouched()
    # CMake itself makes CMakeFiles/pkgRedirects (empty) before the project's first line runs;
    # nothing else reached the link's target (CMake's own last writes went into real folders).
    assert sorted(p.name for p in elsewhere.rglob("*")) == ["pkgRedirects"]
    assert (build / "CMakeFiles").is_dir() and not (build / "CMakeFiles").is_symlink()
    # The next configure starts clean and succeeds.
    again = configure(scene.project)
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in elsewhere.rglob("*")) == ["pkgRedirects"]


@pytest.mark.compile
def test_configure_refuses_a_build_folder_reached_through_a_symlink(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    elsewhere = scene.project.parent / "elsewhere"
    elsewhere.mkdir()
    (scene.project / "build").symlink_to(elsewhere)
    result = configure(scene.project)
    assert result.returncode != 0
    message = one_line(result.stderr)
    assert f"{scene.project / 'build'} is a symlink (to {elsewhere})" in message, message
    # Stopped before project(): no compiler checks, no build files. (CMake's own cache and
    # CMakeFiles/ are made before the first line runs: generate, build and the pip hook refuse
    # this earlier; see the tests above.)
    assert not (elsewhere / "cmake" / "build.ninja").exists()
    assert not list(elsewhere.rglob("CMakeCXXCompiler.cmake"))


@pytest.mark.compile
def test_configure_prints_planted_link_targets_escaped(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    build = scene.project / "build" / "cmake"
    build.mkdir(parents=True)
    (build / f"a{ESCAPES}").symlink_to(f"{scene.sentinel}{ESCAPES}")
    result = configure(scene.project)
    assert result.returncode != 0
    assert "\x1b" not in result.stdout + result.stderr
    shown = f"{build}/a{ESCAPES_SHOWN} (a symlink to {scene.sentinel}{ESCAPES_SHOWN})"
    assert shown in one_line(result.stderr), result.stderr
    scene.assert_sentinel_untouched()


@pytest.mark.compile
def test_configure_prints_a_planted_build_folder_link_escaped(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    elsewhere = scene.project.parent / f"elsewhere{ESCAPES}"
    elsewhere.mkdir()
    (scene.project / "build").symlink_to(elsewhere)
    result = configure(scene.project)
    assert result.returncode != 0
    assert "\x1b" not in result.stdout + result.stderr
    shown = f"{scene.project / 'build'} is a symlink (to {scene.project.parent}/elsewhere"
    assert f"{shown}{ESCAPES_SHOWN})" in one_line(result.stderr), result.stderr


@pytest.mark.compile
def test_the_rebuilt_note_is_never_written_through_a_symlink(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    build = scene.project / "build" / "cmake"
    assert configure(scene.project).returncode == 0
    env = {**os.environ, "SKBUILD_EDITABLE_SKIP": "1"}  # as in a scikit-build-core build
    first = cmake("--build", build, cwd=scene.project, env=env)
    assert first.returncode == 0, first.stdout
    note = build / "build2cmake-rebuilt"
    assert note.read_text().startswith("_scale_add_cpu_")
    # A link planted after configure (which would have removed it): the POST_BUILD step writes
    # a note only where there is none (O_EXCL, O_NOFOLLOW), so the link is left as it is and
    # nothing is written through it.
    note.unlink()
    note.symlink_to(scene.sentinel / "precious.txt")
    source = scene.project / "cpu" / "ops_cpu.cpp"
    source.write_text(source.read_text() + "\n// edited\n")
    second = cmake("--build", build, cwd=scene.project, env=env)
    assert second.returncode == 0, second.stdout
    assert note.is_symlink()
    scene.assert_sentinel_untouched()


# hipify, run by the generated CMake of a rocm kernel with CUDA sources ----------------------------


@pytest.mark.compile
@pytest.mark.rocm
@requires_rocm_toolchain
def test_hipify_step_imports_nothing_of_the_project_and_refuses_a_symlinked_output(
    tmp_path: Path,
) -> None:
    project = tmp_path / "edition5"
    shutil.copytree(FIXTURES / "edition5", project, symlinks=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    generate_torch(project / "build.toml")
    # Beside cmake/build2cmake_hipify.py: `python script.py` would import it.
    (project / "cmake" / "argparse.py").write_text(
        f"open({str(elsewhere / MARKER)!r}, 'w').write('x')\n"
    )
    configured = cmake("-S", ".", "-B", "build/cmake", "-G", "Ninja",
                       "-DBUILD2CMAKE_BACKEND=rocm", cwd=project)  # fmt: skip
    assert configured.returncode == 0, configured.stderr
    build = project / "build" / "cmake"
    target = "hipified/relu_cuda/relu.hip"
    hipified = subprocess.run(["ninja", "-C", build, target], capture_output=True, text=True)
    assert hipified.returncode == 0, hipified.stdout
    assert (build / target).read_text().startswith("// !!! This is a file automatically")
    assert not (elsewhere / MARKER).exists()

    # A link planted after configure: the script refuses to write through it.
    shutil.rmtree(build / "hipified")
    (build / "hipified").symlink_to(elsewhere)
    refused = subprocess.run(["ninja", "-C", build, target], capture_output=True, text=True)
    assert refused.returncode != 0
    assert f"refusing to write through the symlink {build / 'hipified'}" in refused.stdout
    # Ninja itself makes the output's parent folder before running the step; no file arrives.
    assert [p for p in elsewhere.rglob("*") if not p.is_dir()] == []


def test_hipify_prints_a_planted_link_target_escaped(tmp_path: Path) -> None:
    """The real script (generate copies it unchanged), stopped by a symlinked output folder."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "k.cu").write_text("// empty\n")
    out = project / "build" / "cmake" / "hipified"
    out.parent.mkdir(parents=True)
    out.symlink_to(f"{tmp_path}/elsewhere{ESCAPES}")
    script = REPO / "cmake_templates" / "rocm" / "build2cmake_hipify.py"
    result = subprocess.run(
        [sys.executable, str(script), "--project-dir", str(project), "--output-dir", str(out),
         "--depfile", f"{out}/k.hip.d", "--output", f"{out}/k.hip", "k.cu"],
        capture_output=True, text=True, cwd="/", check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "\x1b" not in result.stdout + result.stderr
    shown = f"refusing to write through the symlink {out} (to {tmp_path}/elsewhere{ESCAPES_SHOWN})"
    assert shown in result.stderr, result.stderr


# Variants: build/<variant>/ (a universal kernel: the same paths, no compiler) ---------------------


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


# Folders the user names: `ci github -o` and `init` ------------------------------------------------


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


# One folder lock for generate, build and clean; --force run for real ------------------------------


@contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Hold the lock generate, build and clean take, as another build2cmake would."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def blocked_on_lock(process: subprocess.Popen[str], folder: Path) -> bool:
    """Wait until `process` waits for the folder's lock (the kernel lists it in /proc/locks as
    a blocked request), or exits without ever waiting. No sleeps that a slow machine could
    outrun: the answer comes from the kernel's lock table."""
    inode = f":{folder.stat().st_ino} "
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        with open("/proc/locks") as table:
            for line in table:
                fields = line.split()
                if "->" in fields and inode in line + " " and str(process.pid) in fields:
                    return True
        time.sleep(0.02)
    raise AssertionError("process neither exited nor waited for the lock")


def start(*args: str | os.PathLike[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "build2cmake", *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_generate_waits_for_the_folder_lock_and_writes_nothing_meanwhile(scene: Scene) -> None:
    before = state(scene.project)
    with folder_lock(scene.project):
        process = start("generate-torch", scene.build_toml)
        assert blocked_on_lock(process, scene.project), process.communicate()
        assert state(scene.project) == before
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert (scene.project / "CMakeLists.txt").is_file()


def test_clean_waits_for_the_folder_lock(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    (scene.project / "build" / "cmake").mkdir(parents=True)
    before = state(scene.project)
    with folder_lock(scene.project):
        process = start("clean", scene.build_toml)
        assert blocked_on_lock(process, scene.project), process.communicate()
        assert state(scene.project) == before  # the build folder is still there
    process.communicate(timeout=120)
    assert process.returncode == 0
    assert not (scene.project / "build").exists()


def test_build_holds_the_same_folder_lock_as_clean(scene: Scene) -> None:
    """build takes the project folder's lock before its first write and (see api.build) keeps it
    until the variant is written, so clean cannot delete the folder CMake compiles in."""
    before = state(scene.project)
    with folder_lock(scene.project):
        process = start("build", scene.build_toml, "--backend", "cpu")
        try:
            assert blocked_on_lock(process, scene.project), process.communicate()
            assert state(scene.project) == before
        finally:
            process.kill()
            process.communicate()


def test_generate_force_through_the_cli(scene: Scene) -> None:
    assert cli("generate-torch", scene.build_toml).returncode == 0
    pyproject = scene.project / "pyproject.toml"
    pyproject.write_text("# mine\n")
    assert_one_user_error(cli("generate-torch", scene.build_toml), "pyproject.toml", "--force")
    assert pyproject.read_text() == "# mine\n"
    result = cli("generate-torch", scene.build_toml, "--force")
    assert result.returncode == 0 and "wrote pyproject.toml" in result.stdout
    assert pyproject.read_text().startswith("# Generated by build2cmake")


@pytest.mark.compile
def test_build_defines_jobs_and_force_through_the_cli(scene: Scene) -> None:
    args = ("build", scene.build_toml, "--backend", "cpu", "-j", "1")
    first = cli(*args, "-D", "CMAKE_VERBOSE_MAKEFILE=ON", timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "-DCMAKE_VERBOSE_MAKEFILE=ON" in first.stdout and "--parallel 1" in first.stdout
    cache = (scene.project / "build" / "cmake-variant-cpu" / "CMakeCache.txt").read_text()
    assert "CMAKE_VERBOSE_MAKEFILE:BOOL=ON" in cache
    variant = Path(first.stdout.splitlines()[-1].split()[1])
    metadata = variant / "metadata.json"
    metadata.write_text(json.dumps({"changed": "by the user"}))
    refused = cli(*args, timeout=600)
    assert_one_user_error(refused, str(variant), "--force")
    assert json.loads(metadata.read_text()) == {"changed": "by the user"}
    forced = cli(*args, "--force", timeout=600)
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert json.loads(metadata.read_text())["backend"] == {"type": "cpu"}
    scene.assert_sentinel_untouched()
