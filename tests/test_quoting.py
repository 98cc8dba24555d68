"""Compiler flags, folder names and kernel names from a hostile checkout either reach CMake and
the compiler exactly as written or are refused by validate / generate with one clear error."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from build2cmake.api import generate_torch, validate
from build2cmake.generate.render import cmake_quote
from build2cmake.ground.errors import Build2CMakeError, BuildConfigError

# Generator-expression syntax, a keyword of the build2cmake_add_*_kernel functions, shell and
# JSON quoting, and a comma inside one flag (a real project passes
# --ptxas-options=--verbose,--warn-on-local-memory-usage). validate refuses all but the comma
# (config/flags.py: nvcc would give '$', '>' or a space to a shell); the renderer must quote
# them anyway, so the test below switches that check off.
HOSTILE_FLAGS = [
    "-DA=1>",
    "-DB=$<1:injected>",
    "-DC=$<0:hidden>",
    "-DD=x,y",
    "-DE=$",
    '-DF="q" $<TARGET_FILE:nonexistent>',
    "-D",
    "SOURCES",
    "-DG=$<",
    "-DH=<>",
]


def edit(build_toml: Path, old: str, new: str) -> None:
    text = build_toml.read_text()
    assert old in text
    build_toml.write_text(text.replace(old, new, 1))


def toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(item) for item in items) + "]"


def configure_cpu(root: Path, build_dir: Path) -> None:
    result = subprocess.run(
        ["cmake", "-S", str(root), "-B", str(build_dir), "-G", "Ninja",
         "-DBUILD2CMAKE_BACKEND=cpu"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]


def compiler_args(build_dir: Path, source: Path) -> list[str]:
    """The argv the compiler gets for `source`: its entry in compile_commands.json names the
    object; ninja prints the command it runs for it (compile_commands.json itself keeps Ninja's
    `$$`), and the shell that runs it splits it."""
    entries = json.loads((build_dir / "compile_commands.json").read_text())
    (entry,) = [e for e in entries if Path(e["file"]) == source]
    output = (Path(entry["directory"]) / entry["output"]).relative_to(build_dir)
    commands = subprocess.run(
        ["ninja", "-C", str(build_dir), "-t", "commands", str(output)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    command = commands.strip().splitlines()[-1]
    split = subprocess.run(
        ["sh", "-c", 'eval "set -- $1"; printf "%s\\0" "$@"', "sh", command],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return split.split("\0")[:-1]


def contains_run(args: list[str], run: list[str]) -> bool:
    return any(args[i : i + len(run)] == run for i in range(len(args)))


@pytest.mark.compile
def test_flags_reach_the_compiler_exactly_as_written(
    project: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The generated CMake's quoting holds on its own, for flags validate would refuse."""
    monkeypatch.setattr("build2cmake.config.schema.flag_problem", lambda flag: None)
    root = project("scale_add")
    build_toml = root / "build.toml"
    edit(build_toml, "version = 1", 'version = 1\nlicense = "MIT"')
    edit(build_toml, "[torch]\n", '[torch]\ncxx-flags = ["-DT=a>b,$<c"]\n')
    edit(
        build_toml,
        'src = ["cpu/ops_cpu.cpp"]',
        f'src = ["cpu/ops_cpu.cpp"]\ncxx-flags = {toml_list(HOSTILE_FLAGS)}',
    )
    generate_torch(build_toml)
    build_dir = tmp_path / "build"
    configure_cpu(root, build_dir)  # $<TARGET_FILE:nonexistent> is no genex: no error
    kernel = compiler_args(build_dir, root / "cpu" / "ops_cpu.cpp")
    assert contains_run(kernel, HOSTILE_FLAGS), kernel
    binding = compiler_args(build_dir, root / "torch-ext" / "torch_binding.cpp")
    assert "-DT=a>b,$<c" in binding, binding
    # Nothing of the kernel's flags leaks to the binding's sources, nor the other way.
    assert not set(HOSTILE_FLAGS) - {"-D"} & set(binding)
    assert "-DT=a>b,$<c" not in kernel


@pytest.mark.parametrize(
    ("flag", "why"),
    [
        ("-DX=a\\", "which CMake's lists would treat as list syntax"),
        ("-DX=[", "which CMake's lists would treat as list syntax"),
        ("-DX=]", "which CMake's lists would treat as list syntax"),
        ("SHELL:-O3 -g", "starts with SHELL:, which CMake would split"),
        ("LINKER:-z,now", "starts with LINKER:"),
        ("-O3;-g", "not a compiler flag"),
    ],
)
def test_validate_refuses_flags_that_cmake_would_not_pass_as_they_are(
    project: Callable[[str], Path], flag: str, why: str
) -> None:
    root = project("scale_add")
    edit(
        root / "build.toml",
        'src = ["cpu/ops_cpu.cpp"]',
        f'src = ["cpu/ops_cpu.cpp"]\ncxx-flags = ["-O3", {json.dumps(flag)}]',
    )
    with pytest.raises(BuildConfigError, match=why) as caught:
        validate(root / "build.toml")
    assert caught.value.key == "[kernel.ops_cpu].cxx-flags[1]"
    assert str(root / "build.toml") in str(caught.value)


# Every flag real kernel-builder projects pass (kernels-community and kernels' examples, all of
# cxx-flags, cuda-flags, hip-flags and sycl-flags): config/flags.py must let each through.
CORPUS_FLAGS = [
    "-O3", "--use_fast_math", "-std=c++17", "-std=c++20", "-DNDEBUG",
    "-DCUTLASS_DEBUG_TRACE_LEVEL=0", "-DCPU_CAPABILITY=AVX512", "-DCK_TILE_FMHA_FWD_FAST_EXP2=1",
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
    "--expt-relaxed-constexpr", "--expt-extended-lambda", "--extended-lambda", "-fopenmp",
    "--ftemplate-backtrace-limit=0", "-mf16c", "-mavx512f", "-mavx512bf16", "-mavx512vl",
    "-mavx512dq", "-mavx512bw", "-mavx512vbmi", "-mavx2", "-mfma", "-mamx-tile", "-mamx-bf16",
    "-mamx-int8", "--threads=1", "-Xptxas=-v", "-diag-suppress=174", "-g", "-lgomp",
    "-Wno-deprecated-declarations", "-Xfatbin=-compress-all", "-fbracket-depth=1024",
    "-res-usage", "--extra-device-vectorization",
    "--ptxas-options=--verbose,--warn-on-local-memory-usage", "-lineinfo",
]  # fmt: skip


@pytest.mark.parametrize("key", ["cxx-flags", "cuda-flags"])
def test_every_flag_the_corpus_uses_validates(project: Callable[[str], Path], key: str) -> None:
    root = project("scale_add")
    kernel = "ops_cpu" if key == "cxx-flags" else "ops_cuda"
    source = "cpu/ops_cpu.cpp" if key == "cxx-flags" else "cuda/ops.cu"
    edit(
        root / "build.toml",
        f'src = ["{source}"',
        f'{key} = {toml_list(CORPUS_FLAGS)}\nsrc = ["{source}"',
    )
    (found,) = [k for k in validate(root / "build.toml").kernels if k.name == kernel]
    assert getattr(found, key.replace("-", "_")) == tuple(CORPUS_FLAGS)


@pytest.mark.parametrize(
    "text",
    ["\nx", "\r\nx", "\n", "\n\nx", "\n]]x", "a\r\nb\r", '\n"${X}$ENV{Y}\\;y\\'],
)
def test_cmake_quoting_keeps_leading_newlines_and_carriage_returns(
    tmp_path: Path, text: str
) -> None:
    script = tmp_path / "echo.cmake"
    script.write_text(
        f'set(v {cmake_quote(text)})\nfile(WRITE "${{CMAKE_CURRENT_LIST_DIR}}/out" "${{v}}")\n',
        "utf-8",
    )
    subprocess.run(["cmake", "-P", str(script)], check=True, capture_output=True)
    assert (tmp_path / "out").read_bytes() == text.encode()


def test_generate_refuses_a_project_folder_with_a_newline(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    # The red team's decoy: "nl/\nproj" generated into nl/ named nl/proj's sources once CMake
    # dropped the newline. Such a folder is refused, and nothing is written.
    root = project("scale_add")
    (tmp_path / "nl").mkdir()
    hostile = tmp_path / "nl" / "\nproj"
    root.rename(hostile)
    shutil.copytree(hostile, tmp_path / "nl" / "proj")
    with pytest.raises(Build2CMakeError) as caught:
        generate_torch(hostile / "build.toml", tmp_path / "nl")
    message = str(caught.value)
    assert repr(str(hostile)) in message and "project folder" in message
    assert "contains '\\n'" in message and "\n" not in message
    assert not (tmp_path / "nl" / "CMakeLists.txt").exists()
    with pytest.raises(Build2CMakeError, match="project folder's path contains '\\\\n'"):
        generate_torch(hostile / "build.toml")
    assert not (hostile / "CMakeLists.txt").exists()


@pytest.mark.parametrize("name", ["p;q", "p[q", "p]q", "p\\q"])
def test_generate_refuses_folder_names_cmake_lists_would_split(
    project: Callable[[str], Path], tmp_path: Path, name: str
) -> None:
    root = project("scale_add")
    (tmp_path / "semi").mkdir()
    hostile = tmp_path / "semi" / name
    root.rename(hostile)
    out = tmp_path / "semi" / "out"
    out.mkdir()
    # Generated elsewhere: the sources' paths would hold the name.
    with pytest.raises(Build2CMakeError, match="the project folder's path contains") as caught:
        generate_torch(hostile / "build.toml", out)
    assert repr(str(hostile)) in str(caught.value)
    # In place: CMAKE_MODULE_PATH (the target folder) would hold it.
    with pytest.raises(Build2CMakeError, match="folder's path contains"):
        generate_torch(hostile / "build.toml")
    # A target folder with the name, for a project elsewhere.
    clean = tmp_path / "clean"
    hostile.rename(clean)
    hostile.mkdir()
    with pytest.raises(Build2CMakeError, match="the target folder's path contains"):
        generate_torch(clean / "build.toml", hostile)
    assert not list(tmp_path.rglob("CMakeLists.txt"))


@pytest.mark.compile
def test_a_project_folder_with_quotes_and_dollars_configures_from_elsewhere(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = project("scale_add")
    hostile = root.parent / 'p"q ${X} $ENV{HOME} #'
    root.rename(hostile)
    out = tmp_path / "out"
    out.mkdir()
    generate_torch(hostile / "build.toml", out)
    build_dir = tmp_path / "build"
    configure_cpu(out, build_dir)
    args = compiler_args(build_dir, hostile / "cpu" / "ops_cpu.cpp")
    assert args[-1] == str(hostile / "cpu" / "ops_cpu.cpp")


@pytest.mark.parametrize(
    ("first", "second"), [("ops_cpu", "ops-cpu"), ("ops-cpu", "ops_cpu"), ("a-b_c", "a_b-c")]
)
def test_validate_refuses_kernel_names_that_make_one_cmake_target(
    project: Callable[[str], Path], first: str, second: str
) -> None:
    root = project("scale_add")
    text = (root / "build.toml").read_text()
    cpu = '[kernel.ops_cpu]\nbackend = "cpu"\ndepends = ["torch"]\nsrc = ["cpu/ops_cpu.cpp"]\n'
    assert cpu in text
    (root / "build.toml").write_text(
        text.replace(
            cpu, cpu.replace("ops_cpu]", f"{first}]") + "\n" + cpu.replace("ops_cpu]", f"{second}]")
        )
    )
    with pytest.raises(BuildConfigError) as caught:
        validate(root / "build.toml")
    message = str(caught.value)
    target = "kernel_" + first.replace("-", "_")
    assert f"[kernel.{second}]" in message and f"[kernel.{first}]" in message, message
    assert f"both make the CMake target '{target}'" in message


def test_validate_refuses_a_v1_kernel_clashing_with_a_hipified_twin(
    tmp_path: Path,
) -> None:
    # v1: a cuda-hipify kernel `relu` also makes `relu_rocm`; a kernel `relu-rocm` would be
    # the same CMake target.
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "relu.cu").write_text("")
    (tmp_path / "t.cpp").write_text("")
    (tmp_path / "build.toml").write_text(
        '[general]\nname = "relu"\n[torch]\nsrc = ["t.cpp"]\n'
        '[kernel.relu]\nlanguage = "cuda-hipify"\nsrc = ["k/relu.cu"]\ndepends = []\n'
        '[kernel.relu-rocm]\nsrc = ["k/relu.cu"]\ndepends = []\n'
    )
    with pytest.raises(BuildConfigError, match="both make the CMake target 'kernel_relu_rocm'"):
        validate(tmp_path / "build.toml")


@pytest.mark.parametrize(
    ("stable", "key"),
    [
        ('stable-abi = "2"', "[torch].stable-abi"),
        ('stable-abi = "10.1"', "[torch].stable-abi"),
        ('stable-abi = "2.256"', "[torch].stable-abi"),
        ('[torch.stable-abi]\ncpu = "2"', "[torch.stable-abi].cpu"),
        # Checked for every backend written, declared or not, as versions are.
        ('[torch.stable-abi]\ncpu = "2.10"\nmetal = "3"', "[torch.stable-abi].metal"),
    ],
)
def test_validate_refuses_a_stable_abi_that_is_not_major_minor(
    project: Callable[[str], Path], stable: str, key: str
) -> None:
    root = project("stable_abi")
    edit(root / "build.toml", '[torch.stable-abi]\ncpu = "2.10"\nmetal = "2.10"', stable)
    with pytest.raises(BuildConfigError) as caught:
        validate(root / "build.toml")
    assert caught.value.key == key
    assert "is not a torch release for the stable ABI; write MAJOR.MINOR" in str(caught.value)


@pytest.mark.parametrize("version", ["2.9", "2.10", "2.11", "2.10.1"])
def test_stable_abi_versions_as_kernel_builder_writes_them_validate(
    project: Callable[[str], Path], version: str
) -> None:
    root = project("stable_abi")
    edit(root / "build.toml", 'cpu = "2.10"', f'cpu = "{version}"')
    assert validate(root / "build.toml").torch.stable_abi_for("cpu") == version  # type: ignore[union-attr]


@pytest.mark.parametrize("name", ["cpu/a[.cpp", "cpu/a].cpp"])
def test_validate_refuses_sources_with_brackets(project: Callable[[str], Path], name: str) -> None:
    # CMake lists join a source holding an unbalanced bracket with the ones after it.
    root = project("scale_add")
    (root / name).write_text("")
    edit(root / "build.toml", 'src = ["cpu/ops_cpu.cpp"]', f'src = ["cpu/ops_cpu.cpp", "{name}"]')
    with pytest.raises(BuildConfigError, match="contains a character a build path cannot have"):
        validate(root / "build.toml")


@pytest.mark.parametrize("name", ["SOURCES", "./CXX_FLAGS", "DEPENDS/"])
def test_validate_refuses_an_include_folder_named_like_a_cmake_keyword(
    project: Callable[[str], Path], name: str
) -> None:
    root = project("scale_add")
    (root / name).mkdir()
    edit(
        root / "build.toml",
        'src = ["cpu/ops_cpu.cpp"]',
        f'src = ["cpu/ops_cpu.cpp"]\ninclude = ["cpu", "{name}"]',
    )
    with pytest.raises(BuildConfigError, match="is a keyword of the generated CMake") as caught:
        validate(root / "build.toml")
    assert caught.value.key == "[kernel.ops_cpu].include[1]"
