"""What input is refused: one error naming the file, the key and what would be valid, before
anything is written.

Compiler flags in build.toml (cxx-flags, cuda-flags, hip-flags, sycl-flags): a flag reaches gcc,
clang or nvcc as written, and compilers have options that run a program, load a plugin, write a
file wherever they say or read more options from a file. Each such flag is refused by validate /
generate with one error naming the file, the key and index, the flag and what it would do; the
real compilers are run to show that each attack tested end to end works when the flag is given
to them directly. Then strings that would reach generated files, YAML or CMake as more than they
say (a trailing newline, foreign digits, a CMake keyword), command-line arguments (checked before
the first write) and target folders that are system or home folders.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from build2cmake.api import clean, generate_torch, validate
from build2cmake.config.flags import flag_problem
from build2cmake.config.hub_variants import parse_variant
from build2cmake.ground.errors import Build2CMakeError, BuildConfigError
from build2cmake.ground.safefs import SYSTEM_FOLDERS
from tests.conftest import NVCC, REPO, requires_nvcc, requires_rocm_toolchain
from tests.security import (
    Scene,
    assert_one_user_error,
    cli,
    cli_in,
    state,
)
from tests.test_quoting import CORPUS_FLAGS

# Compiler flags -----------------------------------------------------------------------------------


RUNS = "runs a program"
LOADS = "loads a plugin"
WRITES = "writes a file where it says"
READS = "reads more options from a file"
TAKES_NEXT = "takes its value from the next string"
LINKER = "passes options to the linker"

# Each form the red team found, and what the error must say it does.
DANGEROUS = [
    ("-wrapper", RUNS),
    ("-B/evil/", RUNS),
    ("-Bevil", RUNS),
    ("--prefix=/evil/", RUNS),
    ("-ccbin=/evil/cc", RUNS),
    ("--compiler-bindir=/evil", RUNS),
    ("-ccbin", RUNS),
    ("--run", RUNS),
    ("-fuse-ld=/evil/ld", RUNS),
    ("--ld-path=/evil/ld", RUNS),
    ("--gcc-toolchain=/evil", RUNS),
    ("-fmodule-mapper=x", RUNS),
    ("-fplugin=/evil.so", LOADS),
    ("-fplugin-arg-x-y=z", LOADS),
    ("-fpass-plugin=/evil.so", LOADS),
    ("-Xclang", "clang's compiler proper"),
    ("-mllvm", "LLVM inside the compiler"),
    ("-mllvm=-load=/evil.so", "LLVM inside the compiler"),
    ("-mmlir", "MLIR inside the compiler"),
    ("-mmlir=--mlir-pass-pipeline-crash-reproducer=/tmp/x", "MLIR inside the compiler"),
    ("-specs=/evil.specs", READS),
    ("@/evil.rsp", READS),
    ("@flags.rsp", READS),
    ("-optf", READS),
    ("--options-file=/evil", READS),
    ("--config=/evil.cfg", READS),
    ("-o", WRITES),
    ("-o/elsewhere/x.o", WRITES),
    ("--output=/elsewhere/x.o", WRITES),
    ("-MF", WRITES),
    ("-MF/elsewhere/x.d", WRITES),
    ("--dependency-output=/x.d", WRITES),
    ("-dumpdir", WRITES),
    ("-dumpbase", WRITES),
    ("-save-temps=obj", WRITES),
    ("--keep-dir=/elsewhere", WRITES),
    ("-odir", WRITES),
    ("--output-directory=/elsewhere", WRITES),
    ("--time=/elsewhere/t.csv", WRITES),
    ("-fprofile-generate=/abs", WRITES),
    ("-fprofile-dir=/abs", WRITES),
    ("-fprofile-instr-generate=/abs/x.profraw", WRITES),
    ("-ftime-trace=/abs/trace.json", WRITES),
    ("-fcrash-diagnostics-dir=/abs", WRITES),
    ("-fcrash-diagnostics=all", WRITES),
    ("-gen-reproducer", "to the temporary folder, outside the project"),
    ("-gen-reproducer=always", "to the temporary folder, outside the project"),
    ("-freport-bug", "to the temporary folder, outside the project"),
    ("-fdump-tree-all", WRITES),
    ("-Xcompiler", TAKES_NEXT),
    ("--compiler-options", TAKES_NEXT),
    ("-Xptxas", TAKES_NEXT),
    ("-Xcompiler=-wrapper", "gives the host compiler '-wrapper', which runs a program"),
    ("-Xcompiler=-O3,-B/evil/", "gives the host compiler '-B/evil/', which runs a program"),
    ("--compiler-options=-fplugin=/x.so", "'-fplugin=/x.so', which loads a plugin"),
    ("-Xcompiler=-Wl,--plugin,/x.so", "gives the host compiler '-Wl'"),
    ("-Xcompiler=/bin/sh", "'/bin/sh', which is not an option"),
    ("-Xptxas=-o,/elsewhere/x", "gives ptxas '-o'"),
    ("--ptxas-options=--options-file=x", "gives ptxas '--options-file=x'"),
    ("-Xfatbin=--create=/x", "gives fatbinary '--create=/x'"),
    ("-Xcudafe", TAKES_NEXT),
    ("-Xcudafe=--gen_c_file_name=/x.c", "gives cudafe++ '--gen_c_file_name=/x.c', which is not"),
    ("-Xcudafe=--diag_suppress=177,--include_file=x", "gives cudafe++ '--include_file=x'"),
    # cudafe++ reads one dash as one-letter options: -n -o _display_error_number.
    ("-Xcudafe=-no_display_error_number", "gives cudafe++ '-no_display_error_number'"),
    ("-Xcudafe=-diag_suppress=940", "gives cudafe++ '-diag_suppress=940'"),
    ("-Wl,--plugin,/evil.so", LINKER),
    ("-Wl,-o,/elsewhere", LINKER),
    ("-Xlinker", LINKER),
    ("-Wp,-MD,/elsewhere/x.d", "passes options to the preprocessor"),
    ("-Wa,-o,/elsewhere/x.o", "passes options to the assembler"),
    ("-Wl,@/evil.rsp", "starts a response file"),
    ("-Xcompiler=@/evil.rsp", "starts a response file"),
    # nvcc runs its tools through a shell: $(...), backquotes, redirections and spaces.
    ("-DX=$(touch /tmp/x)", "through a shell"),
    ("-DX=`id`", "through a shell"),
    ("-Xcompiler=-DA=1>/elsewhere/x", "through a shell"),
    ("-Xcompiler=-O3 -wrapper", "through a shell"),
    # A value taken from the next string: CMake may put any string after it.
    ("/bin/sh,-c,touch", "is not an option"),
    ("-fsanitize-ignorelist=/etc/x", "names a path"),
    ("-fsome-future-option=../../x", "names a path"),
    ("-I/usr/include", "list include folders in the kernel's `include` key"),
    ("-nostdinc++", "is not a flag build2cmake passes on"),
    ("-mllvm", "-DCMAKE_HIP_FLAGS="),
]

# icpx (Intel's DPC++) options for sycl-flags, from its documentation and intel/llvm's
# clang/include/clang/Driver/Options.td.
SYCL_DANGEROUS = [
    ("-fsycl-host-compiler=g++", RUNS),
    ("-fsycl-host-compiler=/evil/cc", RUNS),
    ("-fsycl-host-compiler-options=-O2", "passes options to the host compiler that icpx runs"),
    ("-fsycl-add-targets=spir64:image.spv", "adds the device images it names"),
    ("-fsycl-libspirv-path=libspirv.bc", LOADS),
    ("-fsycl-footer-path=footer.h", WRITES),
    ("-fsycl-int-header=header.h", WRITES),
    ("-fsycl-dump-device-code=dump", WRITES),
]
# Kept: they choose what the compile does, with values that name no file (a triple, a split
# mode), or run only the compiler's own tools.
SYCL_KEPT = [
    "-fsycl",
    "-fsycl-targets=spir64_gen,spir64",
    "-fsycl-link-targets=spir64",
    "-fsycl-device-code-split=per_kernel",
    "-fsycl-device-lib=libc,libm-fp32",
    "-fsycl-max-parallel-link-jobs=4",
    "-fno-sycl-rdc",
    "-fsycl-unnamed-lambda",
]


def write_flags(build_toml: Path, kernel_source: str, key: str, flags: list[str]) -> None:
    """Give the kernel whose src starts with `kernel_source` the flags `flags` under `key`."""
    text = build_toml.read_text()
    anchor = f'src = ["{kernel_source}"'
    assert anchor in text
    build_toml.write_text(text.replace(anchor, f"{key} = {json.dumps(flags)}\n{anchor}", 1))


@pytest.mark.parametrize(("flag", "why"), DANGEROUS)
def test_validate_refuses_a_flag_that_runs_loads_writes_or_reads_options(
    scene: Scene, flag: str, why: str
) -> None:
    write_flags(scene.build_toml, "cuda/ops.cu", "cuda-flags", ["-O3", "--use_fast_math", flag])
    with pytest.raises(BuildConfigError) as caught:
        validate(scene.build_toml)
    assert caught.value.key == "[kernel.ops_cuda].cuda-flags[2]"
    message = str(caught.value)
    assert message.startswith(f"{scene.build_toml}: [kernel.ops_cuda].cuda-flags[2]: {flag!r} ")
    assert why in message, message


@pytest.mark.parametrize(("flag", "why"), SYCL_DANGEROUS)
def test_validate_refuses_icpx_options_that_run_load_or_write_what_they_name(
    project: Callable[[str], Path], flag: str, why: str
) -> None:
    """Validation only: there is no icpx here to show the attack on (icpx looks the host
    compiler up on PATH and runs it, as nvcc runs -ccbin's)."""
    root = project("edition5")
    write_flags(root / "build.toml", "relu_xpu/relu.cpp", "sycl-flags", ["-O3", flag])
    with pytest.raises(BuildConfigError) as caught:
        validate(root / "build.toml")
    message = str(caught.value)
    assert message.startswith(f"{root / 'build.toml'}: [kernel.relu_xpu].sycl-flags[1]: {flag!r} ")
    assert why in message, message


def test_validate_keeps_icpx_options_that_name_no_file(project: Callable[[str], Path]) -> None:
    root = project("edition5")
    write_flags(root / "build.toml", "relu_xpu/relu.cpp", "sycl-flags", SYCL_KEPT)
    (found,) = [k for k in validate(root / "build.toml").kernels if k.name == "relu_xpu"]
    assert found.sycl_flags == tuple(SYCL_KEPT)


@pytest.mark.parametrize(
    ("section", "key", "where"),
    [
        ("cpu/ops_cpu.cpp", "cxx-flags", "[kernel.ops_cpu].cxx-flags[0]"),
        ("hip/relu.hip", "hip-flags", "[kernel.relu_rocm].hip-flags[0]"),
        ("torch-ext/torch_binding.cpp", "cxx-flags", "[torch].cxx-flags[0]"),
    ],
)
def test_every_flag_key_refuses_the_same_flags(
    scene: Scene, section: str, key: str, where: str
) -> None:
    if section.startswith("torch-ext"):  # [torch] cxx-flags makes it a v4 file: license too
        text = scene.build_toml.read_text()
        scene.build_toml.write_text(text.replace("version = 1", 'version = 1\nlicense = "MIT"'))
    write_flags(scene.build_toml, section, key, ["-wrapper"])
    result = cli("validate", scene.build_toml)
    assert_one_user_error(result, f"{scene.build_toml}: {where}: '-wrapper' {RUNS}")


def test_corpus_flags_pass_the_flag_rule() -> None:
    """The same list test_quoting validates in build.toml, checked against the rule itself."""
    assert {flag: flag_problem(flag) for flag in CORPUS_FLAGS} == dict.fromkeys(CORPUS_FLAGS)


CUDA_ARCHS = "from its `cuda-capabilities` key"
ROCM_ARCHS = "from its `rocm-archs` key"


@pytest.mark.parametrize(
    ("source", "key", "flag", "where"),
    [
        ("cuda/ops.cu", "cuda-flags", "-gencode=arch=compute_90a,code=sm_90a", CUDA_ARCHS),
        ("cuda/ops.cu", "cuda-flags", "--generate-code=arch=compute_80,code=sm_80", CUDA_ARCHS),
        ("cuda/ops.cu", "cuda-flags", "-arch=sm_80", CUDA_ARCHS),
        ("cuda/ops.cu", "cuda-flags", "--gpu-architecture=compute_80", CUDA_ARCHS),
        ("cuda/ops.cu", "cuda-flags", "--gpu-code=sm_80", CUDA_ARCHS),
        ("hip/relu.hip", "hip-flags", "--offload-arch=gfx942", ROCM_ARCHS),
        ("hip/relu.hip", "hip-flags", "--amdgpu-target=gfx90a", ROCM_ARCHS),
        ("hip/relu.hip", "hip-flags", "-march=gfx90a", ROCM_ARCHS),
        ("hip/relu.hip", "hip-flags", "-mcpu=gfx1100", ROCM_ARCHS),
    ],
)
def test_validate_points_an_architecture_flag_at_the_kernels_arch_key(
    scene: Scene, source: str, key: str, flag: str, where: str
) -> None:
    write_flags(scene.build_toml, source, key, [flag])
    with pytest.raises(BuildConfigError) as caught:
        validate(scene.build_toml)
    assert f"{flag!r} chooses the GPU architectures, which build2cmake sets for each kernel " in (
        str(caught.value)
    )
    assert where in str(caught.value)


def test_validate_keeps_a_host_architecture_flag() -> None:
    assert flag_problem("-march=native") is None
    assert flag_problem("-Xcompiler=-march=x86-64-v3") is None


# nvcc's spellings: it takes --diag-suppress= and --use_fast_math, not the other way round.
RESPELLED = [
    ("--diag_suppress=177", "--diag-suppress=177"),
    ("-diag_error=20012", "-diag-error=20012"),
    ("--use-fast-math", "--use_fast_math"),
    ("--expt_relaxed_constexpr", "--expt-relaxed-constexpr"),
]


@pytest.mark.parametrize(("flag", "spelling"), RESPELLED)
def test_validate_suggests_the_spelling_that_is_passed_on(
    scene: Scene, flag: str, spelling: str
) -> None:
    write_flags(scene.build_toml, "cuda/ops.cu", "cuda-flags", [flag])
    with pytest.raises(BuildConfigError) as caught:
        validate(scene.build_toml)
    assert str(caught.value).endswith(
        f"{flag!r} is not a flag build2cmake passes on; did you mean {spelling!r}?"
    )
    assert flag_problem(spelling) is None


def nvcc_dryrun(folder: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """nvcc --dryrun on a trivial source: the commands it would run, or its error."""
    (folder / "x.cu").write_text("__global__ void k() {}\n")
    return subprocess.run(
        [NVCC, "--dryrun", *flags, "-c", "x.cu", "-o", "x.o"],
        cwd=folder, capture_output=True, text=True, check=False,
    )  # fmt: skip


@pytest.mark.cuda
@requires_nvcc
def test_nvcc_takes_the_suggested_spelling_and_refuses_the_other(tmp_path: Path) -> None:
    for flag, spelling in RESPELLED:
        assert "Unknown option" in nvcc_dryrun(tmp_path, flag).stderr, flag
        accepted = nvcc_dryrun(tmp_path, spelling)
        assert accepted.returncode == 0, accepted.stderr


def test_validate_says_where_a_macro_with_spaces_or_quotes_belongs(scene: Scene) -> None:
    write_flags(scene.build_toml, "cuda/ops.cu", "cuda-flags", ['-DNAME="a b"'])
    result = cli("validate", scene.build_toml)
    assert_one_user_error(
        result,
        "[kernel.ops_cuda].cuda-flags[0]: '-DNAME=\"a b\"' contains '\"'",
        "define a macro whose value needs other characters in a header that the sources include",
    )


# Harmless: they print (-v), use pipes for temporary files (-pipe), silence or harden warnings,
# write debug info beside the object file (-gsplit-dwarf), or keep clang from writing a crashed
# compile's source to the temporary folder.
HARMLESS = [
    "-pipe",
    "-v",
    "--verbose",
    "-gsplit-dwarf",
    "-w",
    "--disable-warnings",
    "--Werror=all-warnings",
    "--Werror=reorder,default-stream-launch",
    "-Xcudafe=--diag_suppress=177",
    "-Xcudafe=--diag_suppress=esa_on_defaulted_function_ignored,--display_error_number",
    "-fno-crash-diagnostics",
]


def test_validate_passes_harmless_flags_on(scene: Scene) -> None:
    write_flags(scene.build_toml, "cuda/ops.cu", "cuda-flags", HARMLESS)
    (found,) = [k for k in validate(scene.build_toml).kernels if k.name == "ops_cuda"]
    assert found.cuda_flags == tuple(HARMLESS)


@pytest.mark.cuda
@requires_nvcc
def test_nvcc_takes_the_harmless_nvcc_flags_and_silences_the_host_compiler_for_both_spellings(
    tmp_path: Path,
) -> None:
    for flag in ("-v", "--verbose", "-w", "--disable-warnings", "--Werror=all-warnings",
                 "-Xcudafe=--diag_suppress=177", "-Xcudafe=--display_error_number"):  # fmt: skip
        result = nvcc_dryrun(tmp_path, flag)
        assert result.returncode == 0, (flag, result.stderr)
    # nvcc's -w and --disable-warnings are one switch, given to the host compiler as gcc's -w
    # (the commands differ only in the names of nvcc's temporary files).
    short, long = (
        re.sub(r"tmpxft_[0-9a-f_]+", "tmpxft", nvcc_dryrun(tmp_path, flag).stderr)
        for flag in ("-w", "--disable-warnings")
    )
    assert short == long
    assert " -w " in short


def test_split_dwarf_writes_its_file_beside_the_object_file(tmp_path: Path) -> None:
    compile_directly(tmp_path, "-gsplit-dwarf", "-pipe", "-v", "-w")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.cpp", "x.dwo", "x.o"]


@pytest.fixture
def wrapper(tmp_path: Path, scene: Scene) -> tuple[Path, Path]:
    """A script in the project that, run as gcc's -wrapper, leaves a marker outside the project
    and then runs the tool it wraps; returns (the script, the marker)."""
    marker = tmp_path / "outside" / "ran.txt"
    marker.parent.mkdir()
    script = scene.project / "wrap.sh"
    script.write_text(f'#!/bin/sh\necho ran > "{marker}"\nexec "$@"\n')
    script.chmod(0o755)
    return script, marker


def compile_directly(folder: Path, *flags: str) -> None:
    """The C++ compiler CMake finds (c++), given `flags` directly on a trivial source."""
    compiler = shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler (c++)")
    (folder / "x.cpp").write_text("int x;\n")
    subprocess.run(
        [compiler, *flags, "-c", "x.cpp", "-o", "x.o"], cwd=folder, check=True, capture_output=True
    )


def test_build_refuses_a_wrapper_flag_that_the_compiler_would_run(
    scene: Scene, wrapper: tuple[Path, Path], tmp_path: Path
) -> None:
    script, marker = wrapper
    # The control: given the flags directly, the compiler runs the project's script.
    compile_directly(tmp_path, "-wrapper", str(script))
    assert marker.read_text() == "ran\n"
    marker.unlink()

    write_flags(scene.build_toml, "cpu/ops_cpu.cpp", "cxx-flags", ["-wrapper", str(script)])
    before = state(scene.project)
    result = cli("build", scene.build_toml, "--backend", "cpu", timeout=600)
    assert result.returncode == 2, result.stderr
    assert f"[kernel.ops_cpu].cxx-flags[0]: '-wrapper' {RUNS}" in result.stderr
    assert f"[kernel.ops_cpu].cxx-flags[1]: {str(script)!r} is not an option" in result.stderr
    assert "Traceback" not in result.stderr
    assert not marker.exists()
    assert state(scene.project) == before  # refused before anything was written
    scene.assert_sentinel_untouched()


def test_build_refuses_a_response_file_that_would_smuggle_a_wrapper_in(
    scene: Scene, wrapper: tuple[Path, Path], tmp_path: Path
) -> None:
    script, marker = wrapper
    rsp = scene.project / "flags.rsp"
    rsp.write_text(f"-wrapper {script}\n")
    compile_directly(tmp_path, f"@{rsp}")
    assert marker.read_text() == "ran\n"
    marker.unlink()

    write_flags(scene.build_toml, "cpu/ops_cpu.cpp", "cxx-flags", ["-O3", f"@{rsp}"])
    before = state(scene.project)
    result = cli("build", scene.build_toml, "--backend", "cpu", timeout=600)
    assert_one_user_error(
        result, f"{scene.build_toml}: [kernel.ops_cpu].cxx-flags[1]: '@{rsp}' {READS}"
    )
    assert not marker.exists()
    assert state(scene.project) == before
    scene.assert_sentinel_untouched()


def files_under(folder: Path) -> list[str]:
    """The files (not folders) under `folder`, relative to it."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir())


@pytest.mark.compile
@pytest.mark.rocm
@requires_rocm_toolchain
def test_a_hip_flag_that_crashes_clang_leaves_nothing_in_the_temporary_folder(
    scene: Scene, tmp_path: Path
) -> None:
    """clang-15 (ROCm 5.2's) aborts in its AMDGPU backend on -mno-code-object-v3 for gfx90a
    ("code object V2 does not support processor gfx90a"), and its crash handler writes the
    preprocessed source (~6 MB, twice) to $TMPDIR. The generated CMake gives HIP compiles
    -fno-crash-diagnostics, and points the compilers' TMPDIR into the build folder, so that the
    folders clang makes on every HIP compile (relu-1a2b3c, CMakeHIPCompilerId-1a2b3c in the
    compiler check) stay there too: nothing at all appears in the user's $TMPDIR."""
    write_flags(scene.build_toml, "hip/relu.hip", "hip-flags", ["-mno-code-object-v3"])
    generate_torch(scene.build_toml)
    temporary = tmp_path / "tmpdir"
    temporary.mkdir()
    env = {**os.environ, "TMPDIR": str(temporary)}
    build = scene.project / "build" / "cmake"
    configured = subprocess.run(
        ["cmake", "-S", scene.project, "-B", build, "-G", "Ninja", "-DBUILD2CMAKE_BACKEND=rocm",
         "-DBUILD2CMAKE_COMPILER_LAUNCHER=OFF"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert configured.returncode == 0, configured.stderr
    assert list(temporary.iterdir()) == []

    # The control: the same compile without -fno-crash-diagnostics leaves the crash files.
    (entry,) = [
        e
        for e in json.loads((build / "compile_commands.json").read_text())
        if e["file"].endswith("hip/relu.hip")
    ]
    command = [arg for arg in shlex.split(entry["command"]) if arg != "-fno-crash-diagnostics"]
    assert len(command) == len(shlex.split(entry["command"])) - 1
    control = tmp_path / "control-tmpdir"
    control.mkdir()
    crashed = subprocess.run(
        command, cwd=entry["directory"], capture_output=True, text=True, check=False,
        env={**os.environ, "TMPDIR": str(control)},
    )  # fmt: skip
    if "code object V2 does not support processor" not in crashed.stderr:
        pytest.skip(f"{command[0]} does not crash on -mno-code-object-v3: {crashed.stderr[-300:]}")
    assert [name for name in files_under(control) if name.endswith(".cu")], files_under(control)

    built = subprocess.run(["ninja", "-C", build, "kernel_relu_rocm"],
                           capture_output=True, text=True, env=env, check=False)  # fmt: skip
    assert built.returncode != 0
    assert "code object V2 does not support processor gfx90a" in built.stdout, built.stdout
    assert "-fno-crash-diagnostics -mno-code-object-v3" in built.stdout
    assert list(temporary.iterdir()) == []
    assert f"TMPDIR={build / 'tmp'}" in built.stdout  # ninja echoes the failed command
    assert files_under(build / "tmp") == []  # the folders clang makes, no crash files
    scene.assert_sentinel_untouched()


@pytest.mark.cuda
@requires_nvcc
def test_validate_refuses_shell_syntax_that_nvcc_would_run(scene: Scene, tmp_path: Path) -> None:
    """nvcc runs gcc, cicc and ptxas through a shell: a '$(...)' in a macro runs."""
    marker = tmp_path / "outside" / "ran.txt"
    marker.parent.mkdir()
    flag = f"-DX=$(touch {marker})"
    (tmp_path / "x.cu").write_text("__global__ void k() {}\n")
    subprocess.run(
        [NVCC, flag, "-c", "x.cu", "-o", "x.o"], cwd=tmp_path, check=True, capture_output=True
    )
    assert marker.exists()  # the control: nvcc ran the command
    marker.unlink()

    write_flags(scene.build_toml, "cuda/ops.cu", "cuda-flags", [flag])
    result = cli("generate-torch", scene.build_toml)
    assert_one_user_error(result, "[kernel.ops_cuda].cuda-flags[0]", "'$'", "through a shell")
    assert not marker.exists()


# Strings that would reach generated files as more than they say -----------------------------------


def set_kernel_key(scene: Scene, kernel: str, key: str, value: str) -> None:
    """Replace `key = ...` of `[kernel.<kernel>]` with a TOML-escaped `value` list."""
    lines = scene.build_toml.read_text().splitlines()
    start = lines.index(f"[kernel.{kernel}]")
    for i in range(start + 1, len(lines)):
        if lines[i].startswith(f"{key} ="):
            lines[i] = f"{key} = [{value}]"
            break
    scene.build_toml.write_text("\n".join(lines) + "\n")


@pytest.mark.usefixtures("own_key_folder")
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


@pytest.mark.usefixtures("own_key_folder")
@pytest.mark.parametrize(
    "text", ["torch2.13-cpu\n", "torch\u0662.\u0661\u0663-cpu", "torch213-cxx11-cpu-x86_64-linux\n"]
)
def test_variant_names_with_a_trailing_newline_or_foreign_digits_are_refused(text: str) -> None:
    with pytest.raises(Build2CMakeError):
        parse_variant(text, machine="x86_64")


@pytest.mark.usefixtures("own_key_folder")
@pytest.mark.parametrize("keyword", ["PUBLIC", "INTERFACE", "PRIVATE", "SYSTEM", "BEFORE", "AFTER"])
def test_an_include_folder_named_like_a_cmake_keyword_is_refused(
    scene: Scene, keyword: str
) -> None:
    """target_include_directories(t PRIVATE PUBLIC) takes the folder for a keyword: it would
    silently drop out of the include path."""
    (scene.project / keyword).mkdir()
    set_kernel_key(scene, "scale_add_rocm", "include", f'"hip", "{keyword}"')
    assert_one_user_error(cli("validate", scene.build_toml), f"'{keyword}' is a keyword")


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
    assert "      BUILD_TOML: tests/fixtures/scale_add/build.toml\n" in result.stdout
    assert "secrets" not in result.stdout


# Arguments and targets, checked before the first write --------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        ["-D", "NOEQUALS"],
        ["-D", "=value"],
        ["-D", "A B=1"],
        ["-j", "0"],
        ["-j", "-4"],
        ["--ops-id", "abc\n"],
        ["--ops-id", "\u0661\u0662"],  # Arabic-Indic digits: \d would take them
        ["--ops-id", "a" * 33],
        ["--ops-id", "a-b"],
        ["--backend", "cuda", "--ops-id", ""],
    ],
)
def test_build_checks_its_arguments_before_writing_anything(
    scene: Scene, arguments: list[str]
) -> None:
    before = state(scene.project)
    result = cli("build", scene.build_toml, *arguments)
    assert_one_user_error(result)
    assert state(scene.project) == before


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


@pytest.mark.parametrize("ops_id", ["abc\n", "\u0661", "a" * 33, "x y", ""])
def test_generate_refuses_a_bad_ops_id_before_writing(scene: Scene, ops_id: str) -> None:
    before = state(scene.project)
    assert_one_user_error(cli("generate-torch", scene.build_toml, "--ops-id", ops_id), "--ops-id")
    assert state(scene.project) == before


def test_generate_accepts_a_32_character_ops_id(scene: Scene) -> None:
    ops_id = "A_z9" * 8
    assert cli("generate-torch", scene.build_toml, "--ops-id", ops_id).returncode == 0
    assert (
        f"_scale_add_cpu_{ops_id}"
        in (scene.project / "CMakeLists.txt").read_text()
        + (scene.project / "torch-ext" / "scale_add" / "_ops.py").read_text()
    )


def test_nul_byte_and_overlong_names_are_one_error(tmp_path: Path) -> None:
    with pytest.raises(Build2CMakeError):
        clean(tmp_path / "a\0b" / "build.toml")
    long_folder = tmp_path / ("x" * 300)
    result = cli("clean", long_folder / "build.toml")
    assert_one_user_error(result, "x" * 300)
    result = cli("generate-torch", tmp_path / "build.toml", long_folder)
    assert "Traceback" not in result.stderr and result.returncode == 2


def other_users_home() -> Path:
    """An existing home folder from the password database that is not $HOME."""
    home = os.environ.get("HOME", "")
    for entry in pwd.getpwall():
        path = Path(entry.pw_dir)
        if entry.pw_dir not in ("", "/", home) and path.is_dir() and path not in SYSTEM_FOLDERS:
            return path
    pytest.skip("no other user's home folder on this machine")


@pytest.mark.parametrize("folder", ["/", "/etc", "/usr", "/bin", "/lib", "/var", "/home", "/tmp"])
def test_clean_and_generate_refuse_system_folders(folder: str) -> None:
    # --dry-run: were the guard broken, the test still deletes nothing.
    result = cli("clean", Path(folder) / "build.toml", folder, "--dry-run")
    assert_one_user_error(result, "refusing")


def test_any_users_home_is_refused_not_only_home(tmp_path: Path) -> None:
    home = other_users_home()
    env = {**os.environ, "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "build2cmake", "clean", str(home / "build.toml"), "--dry-run"],
        capture_output=True, text=True, env=env, check=False, timeout=60,
    )  # fmt: skip
    assert_one_user_error(result, "home folder")
