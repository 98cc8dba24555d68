"""Red team, second round (issue #43), the build side: a cloned kernel repository built as a CI
job builds a stranger's pull request, with `build2cmake build` or `pip install
--no-build-isolation -e .`.

Classes attacked here:
- code of the clone that ran during the build: modules, packages and cached bytecode planted
  where pip imports our metadata provider from, and build folders (build/cmake*) shipped with a
  CMakeCache.txt whose entries run CMake code at the configure;
- inputs that hung or crashed us: a FIFO listed as a source, a build.toml that costs the TOML
  parser minutes, include folders with names that are not UTF-8 or thousands of levels deep;
- strings reaching generated files: patterns that accept a trailing newline or non-ASCII
  digits, include folders named like the keywords of the CMake commands they reach.

Every planted piece of code leaves a mark in the sentinel tree if it runs; every hang case runs
under a time limit.
"""

from __future__ import annotations

import os
import py_compile
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from build2cmake import folder_marks
from build2cmake.api import generate_torch
from build2cmake.errors import Build2CMakeError
from build2cmake.hub_variants import parse_variant
from build2cmake.safefs import ProjectFolder
from tests.security import Scene, assert_one_user_error, cli, state

MARKER = "ran.txt"
PROVIDER_FOLDER = "cmake/build2cmake-metadata"
PYC = f"build2cmake_metadata.{sys.implementation.cache_tag}.pyc"


@pytest.fixture(autouse=True)
def _own_key_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """build2cmake's build-folder key lives in a folder of this test (children inherit it)."""
    monkeypatch.setenv("BUILD2CMAKE_CACHE", str(tmp_path / "cache"))


def evil(scene: Scene) -> str:
    """Python that leaves the mark in the sentinel tree."""
    return f"open({str(scene.sentinel / MARKER)!r}, 'w').write('x')\n"


def ran(scene: Scene) -> bool:
    return (scene.sentinel / MARKER).exists()


def load_provider(
    project: Path, build_dir: str = "build/cmake"
) -> subprocess.CompletedProcess[str]:
    """The provider as scikit-build-core's own loader imports and calls it (what pip's build
    runs first), in a fresh interpreter started in the project folder as pip starts hooks."""
    code = (
        "from scikit_build_core.builder._load_provider import load_provider\n"
        f"m = load_provider('build2cmake_metadata', {PROVIDER_FOLDER!r})\n"
        f"settings = {{'stable-abi': '2.9', 'build-dir': {build_dir!r}}}\n"
        "print(m.dynamic_metadata('dependencies', settings))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=60
    )


def plant_cmake_cache(scene: Scene, build_dir: str) -> Path:
    """A build folder as a clone can ship it: a CMakeCache.txt for this very path whose entry
    runs CMake code at the first project(), and our -D record saying nothing changed."""
    folder = scene.project / build_dir
    folder.mkdir(parents=True)
    payload = scene.project / "payload.cmake"
    payload.write_text(
        f'file(WRITE "{(scene.sentinel / MARKER).as_posix()}" "x")\n'
        'message(FATAL_ERROR "the planted cache ran")\n'
    )
    (folder / "CMakeCache.txt").write_text(
        f"CMAKE_HOME_DIRECTORY:INTERNAL={scene.project}\n"
        f"CMAKE_CACHEFILE_DIR:INTERNAL={folder}\n"
        f"CMAKE_PROJECT_TOP_LEVEL_INCLUDES:STRING={payload}\n"
    )
    (folder / "build2cmake-defines.json").write_text('["CMAKE_CXX_COMPILER_LAUNCHER=/bin/false"]\n')
    return folder


# Class 1: code of the clone run by the build ----------------------------------------------------


@pytest.mark.parametrize(
    "planted",
    [
        "unicodedata.py",  # a module the provider imports
        "hmac.py",
        "build2cmake_metadata/__init__.py",  # a package wins over the module
        f"build2cmake_metadata{'.cpython-311-x86_64-linux-gnu.so'}",  # so does an extension
        "build2cmake_metadata.pyc",
    ],
)
def test_generate_refuses_anything_planted_beside_the_metadata_provider(
    scene: Scene, planted: str
) -> None:
    path = scene.project / PROVIDER_FOLDER / planted
    path.parent.mkdir(parents=True)
    path.write_text(evil(scene))
    before = state(scene.project)
    result = cli("generate-torch", scene.build_toml)
    assert_one_user_error(result, planted.split("/")[0], "keeps only its metadata provider")
    assert state(scene.project) == before
    scene.assert_sentinel_untouched()


def test_generate_removes_planted_bytecode_so_pip_runs_our_provider(scene: Scene) -> None:
    """A cached .pyc marked "unchecked" is run without looking at the source beside it."""
    source = scene.project.parent / "evil_source.py"
    source.write_text(evil(scene) + "def dynamic_metadata(field, settings=None):\n    return []\n")
    cache = scene.project / PROVIDER_FOLDER / "__pycache__"
    cache.mkdir(parents=True)
    py_compile.compile(
        str(source),
        cfile=str(cache / PYC),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    result = cli("generate-torch", scene.build_toml)
    assert result.returncode == 0, result.stderr
    assert not cache.exists()
    loaded = load_provider(scene.project)
    assert loaded.returncode == 0, loaded.stderr
    assert "torch>=2.9" in loaded.stdout
    assert not ran(scene)


def test_the_provider_never_imports_modules_of_the_projects_cmake_folder(scene: Scene) -> None:
    """The provider used to be imported from cmake/, first on the import path: a cmake/json.py
    or cmake/unicodedata.py (files generate leaves alone there) ran in pip's build."""
    generate_torch(scene.build_toml)
    for name in ("unicodedata", "hmac", "secrets", "shutil", "json", "importlib"):
        (scene.project / "cmake" / f"{name}.py").write_text(evil(scene))
    loaded = load_provider(scene.project)
    assert loaded.returncode == 0, loaded.stderr
    assert not ran(scene)


def test_the_provider_replaces_a_shipped_build_folder_before_cmake_reads_it(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    folder = plant_cmake_cache(scene, "build/cmake")
    other = plant_cmake_cache_copy(scene, folder, "build/cmake-variant-cpu")
    loaded = load_provider(scene.project)
    assert loaded.returncode == 0, loaded.stderr
    for path in (folder, other):
        assert f"{path}: removed; it was not made by build2cmake" in loaded.stderr
    assert not other.exists()
    assert sorted(p.name for p in folder.iterdir()) == [folder_marks.MARK]
    # Made here now: the next build keeps it (and what CMake writes into it).
    (folder / "CMakeCache.txt").write_text("# CMake's own\n")
    again = load_provider(scene.project)
    assert again.returncode == 0 and "removed" not in again.stderr, again.stderr
    assert (folder / "CMakeCache.txt").is_file()
    assert not ran(scene)
    scene.assert_sentinel_untouched()


def plant_cmake_cache_copy(scene: Scene, folder: Path, name: str) -> Path:
    copy = scene.project / name
    shutil.copytree(folder, copy)
    return copy


def test_build_replaces_a_shipped_build_folder_before_cmake_reads_it(scene: Scene) -> None:
    """The red-team case: the planted cache's CMAKE_PROJECT_TOP_LEVEL_INCLUDES ran at the
    configure of `build2cmake build`. Now the folder is replaced; the build then stops at its
    first compile (the launcher /bin/false keeps this test fast)."""
    plant_cmake_cache(scene, "build/cmake-variant-cpu")
    start = time.monotonic()
    result = cli(
        "build", scene.build_toml, "--backend", "cpu",
        "-D", "CMAKE_CXX_COMPILER_LAUNCHER=/bin/false", timeout=300,
    )  # fmt: skip
    assert not ran(scene), result.stdout
    assert "it was not made by build2cmake on this machine" in result.stdout
    assert_one_user_error(result, "CMake build failed")
    assert time.monotonic() - start < 300
    scene.assert_sentinel_untouched()


def test_a_first_build_reports_no_build_folder_removed(scene: Scene) -> None:
    """A fresh copy has no build folder: the first build makes and marks it, and has nothing to
    report as removed (it used to make the folder first, then remove it as "not made here")."""
    result = cli(
        "build", scene.build_toml, "--backend", "cpu",
        "-D", "CMAKE_CXX_COMPILER_LAUNCHER=/bin/false", timeout=300,
    )  # fmt: skip
    assert "removed" not in result.stdout + result.stderr, result.stdout
    assert (scene.project / "build" / "cmake-variant-cpu" / folder_marks.MARK).is_file()


@pytest.mark.compile
def test_pip_install_replaces_a_shipped_build_folder(scene: Scene) -> None:
    generate_torch(scene.build_toml)
    plant_cmake_cache(scene, "build/cmake")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "-v",
         "-e", str(scene.project), "-C", "cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=/bin/false"],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert result.returncode != 0  # the launcher stops the first compile
    assert "it was not made by build2cmake on this machine" in result.stdout + result.stderr
    assert not ran(scene)


def test_marks_of_the_provider_and_of_build2cmake_agree(scene: Scene) -> None:
    """The provider carries a copy of folder_marks: each accepts the other's marks."""
    generate_torch(scene.build_toml)
    with ProjectFolder(scene.project) as folder:
        assert folder_marks.claim(folder, "build/cmake") is None
        (scene.project / "build" / "cmake" / "CMakeCache.txt").write_text("# kept\n")
        assert load_provider(scene.project).returncode == 0
        assert (scene.project / "build" / "cmake" / "CMakeCache.txt").is_file()
        shutil.rmtree(scene.project / "build")
        assert load_provider(scene.project).returncode == 0
        key = folder_marks.folder_key()
        assert folder_marks.made_here(folder, "build/cmake", key)


def test_a_mark_copied_to_another_folder_is_not_accepted(scene: Scene) -> None:
    """A mark proves one folder (device and inode) was made here: copies of it prove nothing."""
    with ProjectFolder(scene.project) as folder:
        folder_marks.claim(folder, "build/cmake")
        key = folder_marks.folder_key()
        shutil.copytree(scene.project / "build" / "cmake", scene.project / "build" / "cmake-x")
        assert folder_marks.made_here(folder, "build/cmake", key)
        assert not folder_marks.made_here(folder, "build/cmake-x", key)
        note = folder_marks.claim(folder, "build/cmake-x")
        assert note is not None and "removed" in note
        assert folder_marks.made_here(folder, "build/cmake-x", key)


# Class 4: hangs and crashes on hostile inputs ---------------------------------------------------


def test_a_fifo_listed_as_a_source_is_one_error_not_a_hang(scene: Scene) -> None:
    source = scene.project / "cpu" / "ops_cpu.cpp"
    source.unlink()
    os.mkfifo(source)
    for command in ("validate", "generate-torch"):
        result = cli(command, scene.build_toml, timeout=20)
        assert_one_user_error(result, "[kernel.ops_cpu].src[0]", "is not a regular file")


def dotted_keys_build_toml(scene: Scene, keys: int = 400, depth: int = 20) -> None:
    """31 KB of long dotted keys: tomlkit took 244 s over it."""
    text = scene.build_toml.read_text()
    lines = [".".join(f"k{j}" for j in range(depth)) + f".x{i} = 1" for i in range(keys)]
    scene.build_toml.write_text(text.replace("[torch]", "[general.extra]\n" + "\n".join(lines)
                                             + "\n\n[torch]", 1))  # fmt: skip


def test_a_build_toml_of_dotted_keys_is_read_in_seconds(scene: Scene) -> None:
    dotted_keys_build_toml(scene)
    start = time.monotonic()
    result = cli("validate", scene.build_toml, timeout=30)
    assert result.returncode == 2, result.stderr
    assert "extra" in result.stderr and "Traceback" not in result.stderr
    assert time.monotonic() - start < 30


def test_update_build_refuses_a_build_toml_of_dotted_keys_in_seconds(scene: Scene) -> None:
    """A valid file may spell its kernels as dotted keys (kernel.k0.src = ...): 300 kernels so
    spelled (29 KB) took tomlkit, with which update-build keeps comments, 127 s. It is refused
    before tomlkit reads it; validate and generate read it with tomllib, in well under a second."""
    lines = []
    for i in range(300):
        lines += [f'kernel.k{i}.backend = "cpu"', f'kernel.k{i}.depends = ["torch"]',
                  f'kernel.k{i}.src = ["cpu/ops_cpu.cpp"]']  # fmt: skip
    lines += ["[general]", 'name = "scale-add"', "[torch]",
              'src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]']  # fmt: skip
    scene.build_toml.write_text("\n".join(lines) + "\n")
    start = time.monotonic()
    assert cli("validate", scene.build_toml, timeout=30).returncode == 0
    result = cli("update-build", scene.build_toml, timeout=30)
    assert_one_user_error(result, "900 dotted keys", "more than 64")
    assert time.monotonic() - start < 30


def test_a_name_that_is_not_utf8_in_an_include_folder_is_hashed_not_a_crash(scene: Scene) -> None:
    """The ops id hashes every header under `include` folders by name and content."""
    hip = os.fsencode(scene.project / "hip")
    with open(os.path.join(hip, b"odd-\xff.h"), "wb") as header:
        header.write(b"// a header\n")
    result = cli("generate-torch", scene.build_toml, timeout=60)
    assert result.returncode == 0, result.stderr


def deep_tree(top: Path, depth: int) -> None:
    """`top`/d/d/... `depth` levels deep, made by descriptor one level at a time (the path
    soon exceeds PATH_MAX)."""
    top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


@pytest.fixture
def deep_cleanup(scene: Scene) -> Iterator[None]:
    yield
    subprocess.run(["rm", "-rf", str(scene.project)], check=True, timeout=120)


@pytest.mark.parametrize("depth", [40, 1100])
def test_an_include_folder_too_deep_is_one_error_not_a_crash(
    scene: Scene, depth: int, deep_cleanup: None
) -> None:
    deep_tree(scene.project / "hip", depth)
    result = cli("generate-torch", scene.build_toml, timeout=60)
    assert_one_user_error(result, "nests more than 32 folders")


def test_a_build_folder_too_deep_is_one_error_everywhere(scene: Scene, deep_cleanup: None) -> None:
    """Walks of build folders are bounded: a planted tree 1100 levels deep is one error from
    generate, build and the pip hook, never a RecursionError; clean's removal is iterative, so
    it removes the whole tree with the generated files (it used to remove those, then stop at
    the tree: a half-clean project)."""
    generate_torch(scene.build_toml)
    deep_tree(scene.project / "build" / "cmake", 1100)
    for command in ("generate-torch", "build"):
        result = cli(command, scene.build_toml, timeout=60)
        assert_one_user_error(result, "more than 64 levels deep")
    loaded = load_provider(scene.project)
    assert loaded.returncode != 0
    assert "is a folder more than 64 levels deep" in loaded.stderr
    assert "RecursionError" not in loaded.stderr
    cleaned = cli("clean", scene.build_toml, timeout=60)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert not (scene.project / "build" / "cmake").exists()
    assert not (scene.project / "CMakeLists.txt").exists()


# Class 5: strings reaching generated files ------------------------------------------------------


def set_kernel_key(scene: Scene, kernel: str, key: str, value: str) -> None:
    """Replace `key = ...` of `[kernel.<kernel>]` with a TOML-escaped `value` list."""
    lines = scene.build_toml.read_text().splitlines()
    start = lines.index(f"[kernel.{kernel}]")
    for i in range(start + 1, len(lines)):
        if lines[i].startswith(f"{key} ="):
            lines[i] = f"{key} = [{value}]"
            break
    scene.build_toml.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("kernel", "key", "value", "shown"),
    [
        ("ops_cuda", "cuda-capabilities", '"8.0\\n"', "'8.0\\n'"),
        ("ops_cuda", "cuda-capabilities", '"\\u0668.\\u0660"', "is not a CUDA compute capability"),
        ("scale_add_rocm", "rocm-archs", '"gfx90a:xnack-\\n"', "unknown target feature"),
    ],
)
def test_archs_with_a_trailing_newline_or_foreign_digits_are_refused(
    scene: Scene, kernel: str, key: str, value: str, shown: str
) -> None:
    set_kernel_key(scene, kernel, key, value)
    assert_one_user_error(cli("validate", scene.build_toml), key, shown)


@pytest.mark.parametrize(
    "text", ["torch2.13-cpu\n", "torch\u0662.\u0661\u0663-cpu", "torch213-cxx11-cpu-x86_64-linux\n"]
)
def test_variant_names_with_a_trailing_newline_or_foreign_digits_are_refused(text: str) -> None:
    with pytest.raises(Build2CMakeError):
        parse_variant(text, machine="x86_64")


@pytest.mark.parametrize("keyword", ["PUBLIC", "INTERFACE", "PRIVATE", "SYSTEM", "BEFORE", "AFTER"])
def test_an_include_folder_named_like_a_cmake_keyword_is_refused(
    scene: Scene, keyword: str
) -> None:
    """target_include_directories(t PRIVATE PUBLIC) takes the folder for a keyword: it would
    silently drop out of the include path."""
    (scene.project / keyword).mkdir()
    set_kernel_key(scene, "scale_add_rocm", "include", f'"hip", "{keyword}"')
    assert_one_user_error(cli("validate", scene.build_toml), f"'{keyword}' is a keyword")
