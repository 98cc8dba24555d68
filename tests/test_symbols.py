"""The check that a built extension loads (cmake/build2cmake_symbols.py, issue #59), on small
shared libraries compiled here: what the system's loader reports missing, what the check keeps
of it, and the build it stops. The built-extension case (a kernel left out by
TORCH_CUDA_ARCH_LIST) is in test_shared_sources.py."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO, load_script, run_cli

SCRIPT = REPO / "cmake_templates" / "common" / "build2cmake_symbols.py"

requires_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")
requires_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")

# A library the extension links, of a C and a C++ function; what it misses itself is not the
# extension's to answer for.
NEEDED = """
extern "C" int c_helper() { return 1; }
int cxx_helper(int x) { return x + 1; }
int lost_in_needed();
int uses_lost() { return lost_in_needed(); }
"""
# The extension: calls both, Python C API functions (public, and the private one Py_DECREF
# calls), and a C and a C++ function nothing defines.
EXTENSION = """
extern "C" int c_helper();
int cxx_helper(int x);
extern "C" int PyModule_AddIntConstant(void*, const char*, long);
extern "C" void _Py_Dealloc(void*);
extern "C" int lost_c();
int lost_cxx(double y);
int calls(void* module) {
  _Py_Dealloc(module);
  return c_helper() + cxx_helper(1) + PyModule_AddIntConstant(module, "x", 1) + lost_c() +
         lost_cxx(2.0);
}
"""


@pytest.fixture
def symbols() -> ModuleType:
    return load_script(SCRIPT)


def compiled(folder: Path) -> Path:
    """ext.so linked to libneeded.so (in `folder`/lib), as a build links its libraries."""
    lib = folder / "lib"
    lib.mkdir()
    (folder / "needed.cpp").write_text(NEEDED)
    (folder / "ext.cpp").write_text(EXTENSION)
    gxx = ["g++", "-shared", "-fPIC", "-O0"]
    subprocess.run([*gxx, "-o", str(lib / "libneeded.so"), str(folder / "needed.cpp")], check=True)
    extension = folder / "ext.so"
    subprocess.run(
        [*gxx, "-o", str(extension), str(folder / "ext.cpp"), f"-L{lib}", "-lneeded"], check=True
    )
    return extension


def checked(symbols: ModuleType, extension: Path, *dirs: Path) -> list[str]:
    loader = symbols.interpreter(str(Path(shutil.which("python3") or "").resolve()))
    assert loader is not None and Path(loader).is_file()
    report = symbols.trace(loader, str(extension), [str(d) for d in dirs])
    names: list[str] = symbols.missing(report, str(extension))
    return names


@requires_gxx
def test_what_the_loader_finds_nowhere_is_missing_but_the_python_api(
    symbols: ModuleType, tmp_path: Path
) -> None:
    extension = compiled(tmp_path)
    # Every library found: both functions nothing defines, C and C++; not Python's.
    assert checked(symbols, extension, tmp_path / "lib") == ["_Z8lost_cxxd", "lost_c"]


@requires_gxx
def test_with_a_library_not_found_c_functions_are_its_to_define_and_cxx_ones_stay_missing(
    symbols: ModuleType, tmp_path: Path
) -> None:
    # As in a variant's environment without torch's CUDA libraries: libneeded is not there, so
    # c_helper and lost_c may be its; the C++ functions are missing all the same.
    extension = compiled(tmp_path)
    assert checked(symbols, extension) == ["_Z10cxx_helperi", "_Z8lost_cxxd"]


@requires_gxx
def test_the_check_fails_with_the_functions_demangled_and_the_kernels_left_out(
    symbols: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extension = compiled(tmp_path)
    lib = ["--library-dir", str(tmp_path / "lib")]
    left = "kernel_sm100: none of its cuda-capabilities (10.0a) serves TORCH_CUDA_ARCH_LIST (9.0a)"
    assert symbols.main([str(extension), *lib, "--left-out", left]) == 1
    said = capsys.readouterr().err
    assert said.startswith(
        "build2cmake: ext.so would not load: it calls 2 functions that no source of this build "
        "and no library it loads defines:\n  lost_cxx(double)\n  lost_c\n"
    )
    assert f"Left out of this build, whose sources may define them:\n  {left}\n" in said
    assert "guard the calls" in said and "-DBUILD2CMAKE_CHECK_SYMBOLS=OFF" in said
    # Nothing left out: the other likely cause.
    assert symbols.main([str(extension), *lib]) == 1
    said = capsys.readouterr().err
    assert "Left out" not in said and "missing from a kernel's `src`" in said


@requires_gxx
def test_an_extension_that_loads_passes_silently(
    symbols: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extension = compiled(tmp_path)
    source = tmp_path / "ext.cpp"
    source.write_text(source.read_text() + "int lost_cxx(double) { return 0; }\n"
                      'extern "C" int lost_c() { return 0; }\n')  # fmt: skip
    subprocess.run(
        ["g++", "-shared", "-fPIC", "-o", str(extension), str(source), f"-L{tmp_path / 'lib'}",
         "-lneeded"], check=True,
    )  # fmt: skip
    assert symbols.main([str(extension), "--library-dir", str(tmp_path / "lib")]) == 0
    assert capsys.readouterr() == ("", "")


# Marks by system calls of its own: a resolver runs before the C library is ready to be called.
PLANTED = """
static long sys(long n, long a, long b, long c) {
  long r;
  __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return r;
}
static void mark(const char* name) { sys(3, sys(2, (long)name, 0101, 0644), 0, 0); }
static int impl(void) { return 1; }
static void* resolver(void) { mark("MARKS/ifunc"); return (void*)impl; }
int chosen(void) __attribute__((ifunc("resolver")));
int calls_chosen(void) { return chosen(); }
__attribute__((constructor)) static void at_load(void) { mark("MARKS/constructor"); }
"""


@requires_gcc
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the planted library is x86_64's")
def test_the_check_runs_no_code_of_the_extension(
    symbols: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The extension is built from the clone's sources: binding its symbols must not run its
    # constructors, nor its IFUNC resolvers, which the loader calls while it relocates. (Nothing
    # is missing in it: a missing symbol would stop a loader that runs it before its code.)
    source = tmp_path / "planted.c"
    source.write_text(PLANTED.replace("MARKS", str(tmp_path)))
    extension = tmp_path / "planted.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(extension), str(source)], check=True)
    assert symbols.main([str(extension)]) == 0
    assert capsys.readouterr() == ("", "")
    assert not (tmp_path / "ifunc").exists() and not (tmp_path / "constructor").exists()


def test_names_reach_the_terminal_printable_and_the_list_is_bounded(symbols: ModuleType) -> None:
    names = [f"f{i}\x1b[2J" for i in range(11)]
    said = symbols.message("/b/ext.so", names, [])
    assert "\x1b" not in said and "f0?[2J" in said
    assert said.count("\n  f") == symbols.SHOWN and "and 3 more" in said
    # Exactly as many as are shown: all named, no count of the rest.
    said = symbols.message("/b/ext.so", names[: symbols.SHOWN], [])
    assert said.count("\n  f") == symbols.SHOWN and "more" not in said


def test_only_a_64_bit_elf_has_an_interpreter_read(symbols: ModuleType, tmp_path: Path) -> None:
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")
    assert symbols.interpreter(str(script)) is None
    assert symbols.interpreter(str(tmp_path / "absent")) is None


@pytest.mark.compile
def test_a_source_missing_from_src_stops_the_build_naming_the_function_and_the_likely_cause(
    project: Callable[[str], Path],
) -> None:
    # The bindings call a function whose source no kernel lists: without the check, `build`
    # would write a variant whose import fails with `undefined symbol`.
    root = project("scale_add")
    (root / "cpu" / "forgotten.cpp").write_text(
        "#include <cstdint>\nint64_t forgotten(int64_t x) { return x; }\n"
    )
    binding = root / "torch-ext" / "torch_binding.cpp"
    binding.write_text(
        binding.read_text() + "\n#include <cstdint>\nint64_t forgotten(int64_t x);\n"
        "int64_t uses_forgotten(int64_t x) { return forgotten(x); }\n"
    )
    result = run_cli("build", root / "build.toml", "--backend", "cpu")
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert re.search(
        r"the first failing step, (\[code=1\] )?_scale_add_cpu_\w+\.abi3\.so: build2cmake: "
        r"_scale_add_cpu_\w+\.abi3\.so would not load: it calls 1 function that no source of "
        r"this build and no library it loads defines:",
        last,
    ), last
    assert "  forgotten(long)\n" in result.stdout
    assert "Is the source that defines them missing from a kernel's `src`" in result.stdout
    assert not [p for p in (root / "build").iterdir() if p.name.startswith("torch")]
