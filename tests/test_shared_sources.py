"""Sources several kernels list, compiled once per extension, and the GPU lists a build is
narrowed to (TORCH_CUDA_ARCH_LIST, PYTORCH_ROCM_ARCH): the rules, the configure, the built
extension (#59)."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import pytest

from build2cmake.api import generate_torch
from build2cmake.config import load_project
from build2cmake.config.model import Kernel, Project
from build2cmake.generate.render import GPU_TARGETS_MODULE, _data_dir
from build2cmake.generate.shared_sources import backend_layout
from build2cmake.toolchains.offload import rocm_targets
from tests.conftest import (
    FIXTURES,
    BuildEnv,
    cuobjdump,
    requires_nvcc,
    requires_rocm_toolchain,
    run_cli,
)

MODULE = _data_dir("cmake_templates") / GPU_TARGETS_MODULE
ENV_LISTS = ("TORCH_CUDA_ARCH_LIST", "PYTORCH_ROCM_ARCH")


def fixture_project() -> Project:
    return load_project(FIXTURES / "shared_source" / "build.toml")


def paths(*names: str) -> tuple[PurePosixPath, ...]:
    return tuple(PurePosixPath(n) for n in names)


def test_a_source_two_kernels_list_is_compiled_by_one_unit_of_both() -> None:
    project = fixture_project()
    layout = backend_layout(project, "cuda")
    sm80, sm90 = project.kernels_for("cuda")
    # Each keeps the sources only it lists, and its headers (not compiled, so harmless twice).
    assert layout.own_sources(sm80) == paths("cuda/fill.h", "cuda/only_sm80.cu")
    assert layout.own_sources(sm90) == paths("cuda/fill.h")
    (unit,) = layout.units
    assert [k.name for k in unit.kernels] == ["fill_sm80", "fill_sm90"]
    assert unit.sources == paths("cuda/fill.cu", "cuda/host.cpp")
    # Declared once its last kernel is.
    assert layout.units_after(sm80) == () and layout.units_after(sm90) == (unit,)
    # The ROCm kernels share the same sources: a unit of their own.
    (rocm_unit,) = backend_layout(project, "rocm").units
    assert rocm_unit.target == "build2cmake_shared_rocm_1" != unit.target


def test_sources_shared_by_different_sets_of_kernels_get_one_unit_each() -> None:
    def kernel(name: str, *sources: str) -> Kernel:
        return Kernel(name=name, backend="cuda", depends=(), sources=paths(*sources))

    a, b, c = kernel("a", "x.cu", "y.cu", "a.cu"), kernel("b", "x.cu", "y.cu"), kernel("c", "y.cu")
    project = Project(name="p", backends=("cuda",), torch=None, kernels=(a, b, c))
    layout = backend_layout(project, "cuda")
    assert [([k.name for k in u.kernels], u.sources) for u in layout.units] == [
        (["a", "b"], paths("x.cu")),
        (["a", "b", "c"], paths("y.cu")),
    ]
    assert layout.own_sources(a) == paths("a.cu") and layout.own_sources(c) == ()


@pytest.mark.parametrize(
    ("first", "second", "source", "contradiction"),
    [
        (("-DV=1",), ("-DV=2",), "s.cu", "a has -DV=1, b -DV=2 (the last, b's, wins)"),
        (("-DV",), ("-UV",), "s.cu", "a has -DV=1, b -UV (the last, b's, wins)"),
        (("-DV",), ("-DV=1",), "s.cu", None),  # -DV is V=1
        (("-DV=",), ("-DV",), "s.cu", "a has -DV=, b -DV=1 (the last, b's, wins)"),  # -DV= is empty
        (("-DV=1",), ("-DW=2",), "s.cu", None),  # different macros
        (("-DV=1",), (), "s.cu", None),  # one kernel defining a macro alone is no contradiction
        (("-DV=1", "-DV=2"), ("-DV=2",), "s.cu", None),  # the last flag of a name wins
    ],
)
def test_a_macro_the_kernels_define_differently_is_a_warning_naming_both_and_the_source(
    first: tuple[str, ...], second: tuple[str, ...], source: str, contradiction: str | None
) -> None:
    def kernel(name: str, flags: tuple[str, ...]) -> Kernel:
        return Kernel(name, "cuda", (), paths(source), cuda_flags=flags, cxx_flags=("-DV=9",))

    project = Project("p", ("cuda",), None, (kernel("a", first), kernel("b", second)))
    (unit,) = backend_layout(project, "cuda").units
    if contradiction is None:
        assert unit.conflicts == ()
    else:
        (line,) = unit.conflicts
        assert line.startswith(f"{source}, listed by kernels a and b, is compiled once")
        assert line.endswith(contradiction)


def test_each_contradiction_names_the_value_it_overrides_the_last_one_given() -> None:
    # Three kernels: each line names the value the compile had before this kernel's flags, not
    # the first kernel's; a kernel repeating the value in force contradicts nothing (#59).
    def kernel(name: str, value: str) -> Kernel:
        return Kernel(name, "cuda", (), paths("s.cu"), cuda_flags=(f"-DV={value}",))

    def conflicts(*values: str) -> tuple[str, ...]:
        kernels = tuple(kernel(name, v) for name, v in zip("abc", values, strict=True))
        (unit,) = backend_layout(Project("p", ("cuda",), None, kernels), "cuda").units
        return tuple(line.split("each other: ", 1)[1] for line in unit.conflicts)

    assert conflicts("1", "2", "3") == (
        "a has -DV=1, b -DV=2 (the last, b's, wins)",
        "b has -DV=2, c -DV=3 (the last, c's, wins)",
    )
    assert conflicts("1", "2", "2") == ("a has -DV=1, b -DV=2 (the last, b's, wins)",)
    # The unit's flags are the union, each flag once where it first appears (as CMake keeps a
    # target's repeated options): c's -DV=1 is a's, so the compile has -DV=1 -DV=2, and b's wins.
    assert conflicts("1", "2", "1") == (
        "a has -DV=1, b -DV=2 (the last, b's, wins)",
        "b has -DV=2, c -DV=1 (b's wins: a flag given again is kept once, where it first appears)",
    )


def test_a_contradiction_in_any_source_of_a_unit_is_a_warning() -> None:
    # The unit's CUDA source agrees; its C++ source, second in the list, does not.
    def kernel(name: str, value: str) -> Kernel:
        return Kernel(name, "cuda", (), paths("k.cu", "h.cpp"), cxx_flags=(f"-DV={value}",))

    (unit,) = backend_layout(Project("p", ("cuda",), None, (kernel("a", "1"), kernel("b", "2"))),
                             "cuda").units  # fmt: skip
    assert unit.sources == paths("k.cu", "h.cpp")
    (line,) = unit.conflicts
    assert line.startswith("h.cpp, listed by kernels a and b") and "a has -DV=1, b -DV=2" in line


def test_cxx_flags_decide_the_macros_of_a_shared_cpp_source() -> None:
    a = Kernel("a", "rocm", (), paths("h.cpp"), hip_flags=("-DV=1",), cxx_flags=("-DV=1",))
    b = Kernel("b", "rocm", (), paths("h.cpp"), hip_flags=("-DV=1",), cxx_flags=("-DV=2",))
    (unit,) = backend_layout(Project("p", ("rocm",), None, (a, b)), "rocm").units
    assert len(unit.conflicts) == 1 and "a has -DV=1, b -DV=2" in unit.conflicts[0]


def test_hip_flags_decide_the_macros_of_a_shared_hip_source() -> None:
    a = Kernel("a", "rocm", (), paths("k.hip"), hip_flags=("-DV=1",), cuda_flags=("-DW=1",))
    b = Kernel("b", "rocm", (), paths("k.hip"), hip_flags=("-DV=2",), cuda_flags=("-DW=2",))
    (unit,) = backend_layout(Project("p", ("rocm",), None, (a, b)), "rocm").units
    assert len(unit.conflicts) == 1 and "a has -DV=1, b -DV=2" in unit.conflicts[0]


def test_a_unit_keeps_build_tomls_order_and_follows_its_last_kernel() -> None:
    # The flags go one kernel after the other in build.toml's order, and the unit is declared
    # once the last of its kernels is (the union needs what each recorded), whatever the names.
    second = Kernel("b", "cuda", (), paths("x.cu"), cuda_flags=("-DV=2",))
    first = Kernel("a", "cuda", (), paths("x.cu"), cuda_flags=("-DV=1",))
    layout = backend_layout(Project("p", ("cuda",), None, (second, first)), "cuda")
    (unit,) = layout.units
    assert [k.name for k in unit.kernels] == ["b", "a"]
    assert layout.units_after(second) == () and layout.units_after(first) == (unit,)
    assert unit.conflicts[0].endswith("b has -DV=2, a -DV=1 (the last, a's, wins)")


def test_the_generated_build_lists_a_shared_source_once_per_backend(
    project: Callable[[str], Path],
) -> None:
    root = project("shared_source")
    generate_torch(root / "build.toml")
    text = (root / "CMakeLists.txt").read_text()
    assert text.count("[[cuda/fill.cu]]") == 2  # once in the cuda block, once in the rocm one
    assert "build2cmake_cuda_unit(${EXTENSION} build2cmake_shared_cuda_1" in text
    assert "KERNELS kernel_fill_sm80 kernel_fill_sm90" in text
    assert "KERNELS kernel_fill_gfx90a kernel_fill_gfx940" in text


# The narrowing rules, run by CMake itself from the module the generated builds include.


def run_module(
    code: str, tmp_path: Path, *defines: str, **env: str
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.cmake"
    script.write_text(f'include("{MODULE}")\n{code}\n')
    environment = {k: v for k, v in os.environ.items() if k not in ENV_LISTS}
    environment.update(env)
    return subprocess.run(
        ["cmake", *(f"-D{d}" for d in defines), "-P", str(script)],
        capture_output=True, text=True, env=environment, check=False,
    )  # fmt: skip


def result_of(function: str, kernel: list[str], targets: list[str], tmp_path: Path) -> list[str]:
    code = (
        f'{function}(out "{";".join(kernel)}" "{";".join(targets)}")\n'
        'list(JOIN out " " shown)\nmessage("RESULT=${shown}")'
    )
    done = run_module(code, tmp_path)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if x.startswith("RESULT="))
    return line.removeprefix("RESULT=").split()


@pytest.mark.parametrize(
    ("kernel", "targets", "kept"),
    [
        # An arch-specific capability serves its base, and is the only one chosen for it.
        (["8.0", "9.0a", "10.0a"], ["9.0a"], ["9.0a"]),
        (["9.0", "9.0a"], ["9.0"], ["9.0a"]),
        (["10.0f"], ["10.0"], ["10.0f"]),
        (["10.0f", "10.0a"], ["10.0a"], ["10.0f", "10.0a"]),
        (["10.0f"], ["10.3"], []),
        (["12.0a"], ["12.1"], []),
        # The highest capability not above the target, of its major.
        (["8.0", "8.6", "8.9"], ["8.7"], ["8.6"]),
        (["8.0", "9.0"], ["8.6", "9.0a"], ["8.0", "9.0"]),
        # SASS does not run across majors; PTX does (the driver compiles it for later GPUs).
        (["8.0"], ["9.0a"], []),
        (["8.0+PTX"], ["9.0"], ["8.0+PTX"]),
        (["7.5", "8.0+PTX", "9.0a"], ["8.6", "12.0"], ["8.0+PTX"]),
        (["12.0", "12.1+PTX"], ["12.1"], ["12.1+PTX"]),
        # A target's +PTX names the same GPU; nothing above any target is chosen.
        (["9.0"], ["9.0+PTX"], ["9.0"]),
        (["9.0a", "10.0f"], ["9.0+PTX", "10.0a+PTX"], ["9.0a", "10.0f"]),
        (["9.0", "10.0"], ["8.9"], []),
        # Majors of two digits: SASS of the target's own major (10.0 for 10.3, not 9.0).
        (["9.0", "10.0", "12.0"], ["10.3", "12.0"], ["10.0", "12.0"]),
        # An arch-specific or family capability that also builds PTX serves its base.
        (["9.0a+PTX", "10.0f+PTX"], ["9.0", "10.0"], ["9.0a+PTX", "10.0f+PTX"]),
    ],
)
def test_cuda_capabilities_are_narrowed_by_the_loose_intersection(
    kernel: list[str], targets: list[str], kept: list[str], tmp_path: Path
) -> None:
    assert result_of("build2cmake_cuda_loose_intersection", kernel, targets, tmp_path) == kept


@pytest.mark.parametrize(
    ("kernel", "targets", "kept"),
    [
        (["gfx90a", "gfx942"], ["gfx942", "gfx1100"], ["gfx942"]),
        (["gfx908"], ["gfx90a"], []),
        # Target features: narrowed to the one configuration asked for; a contradiction serves
        # nothing (code for xnack+ does not load where xnack is off).
        (["gfx90a"], ["gfx90a:xnack-"], ["gfx90a:xnack-"]),
        (["gfx90a:xnack+"], ["gfx90a"], ["gfx90a:xnack+"]),
        (["gfx90a:xnack+"], ["gfx90a:xnack-"], []),
        (["gfx90a:xnack-"], ["gfx90a:xnack-"], ["gfx90a:xnack-"]),
        (["gfx942:sramecc+"], ["gfx942:xnack-"], ["gfx942:sramecc+:xnack-"]),
        (["gfx90a"], ["gfx90a:xnack+", "gfx90a:xnack-"], ["gfx90a:xnack+", "gfx90a:xnack-"]),
    ],
)
def test_rocm_archs_are_narrowed_by_processor_and_target_features(
    kernel: list[str], targets: list[str], kept: list[str], tmp_path: Path
) -> None:
    assert result_of("build2cmake_rocm_intersection", kernel, targets, tmp_path) == kept


LISTS = {
    "cuda": "build2cmake_torch_cuda_arch_list(out origin)",
    "rocm": "build2cmake_pytorch_rocm_arch(out origin)",
}


@pytest.mark.parametrize(
    ("which", "env", "defines", "said"),
    [
        ("cuda", {"TORCH_CUDA_ARCH_LIST": "9.0a 8.6+PTX;8.6+PTX"}, (),
         "RESULT=9.0a;8.6+PTX|TORCH_CUDA_ARCH_LIST from the environment"),
        # The environment wins over -D; -D (a cache entry, kept by the build folder) without it.
        ("cuda", {"TORCH_CUDA_ARCH_LIST": "10.0f"}, ("TORCH_CUDA_ARCH_LIST=8.0",),
         "RESULT=10.0f|TORCH_CUDA_ARCH_LIST from the environment"),
        ("cuda", {}, ("TORCH_CUDA_ARCH_LIST=8.0",),
         "RESULT=8.0|TORCH_CUDA_ARCH_LIST from -DTORCH_CUDA_ARCH_LIST"),
        ("cuda", {}, (), "RESULT=|"),
        # Separators at either end or repeated are no entries.
        ("cuda", {"TORCH_CUDA_ARCH_LIST": " 8.0;;9.0a; "}, (),
         "RESULT=8.0;9.0a|TORCH_CUDA_ARCH_LIST from the environment"),
        # Set but empty: no narrowing (and not -D's list).
        ("cuda", {"TORCH_CUDA_ARCH_LIST": ""}, ("TORCH_CUDA_ARCH_LIST=8.0",),
         "RESULT=|TORCH_CUDA_ARCH_LIST from the environment"),
        ("rocm", {"PYTORCH_ROCM_ARCH": "gfx90a:xnack- gfx942"}, (),
         "RESULT=gfx90a:xnack-;gfx942|PYTORCH_ROCM_ARCH from the environment"),
    ],
)  # fmt: skip
def test_the_gpu_list_is_read_from_the_environment_else_from_the_cache(
    which: str, env: dict[str, str], defines: tuple[str, ...], said: str, tmp_path: Path
) -> None:
    code = LISTS[which] + '\nmessage("RESULT=${out}|${origin}")'
    done = run_module(code, tmp_path, *defines, **env)
    assert done.returncode == 0, done.stderr
    assert said in done.stderr.splitlines()


@pytest.mark.parametrize(
    ("which", "env", "message"),
    [
        ("cuda", {"TORCH_CUDA_ARCH_LIST": "9.0;Hopper"},
         "TORCH_CUDA_ARCH_LIST from the environment: 'Hopper' is not a CUDA capability; "
         "expected capabilities such as 8.0"),
        ("cuda", {"TORCH_CUDA_ARCH_LIST": "9.0a,8.0"}, "holds characters that none of its entries"),
        ("cuda", {"TORCH_CUDA_ARCH_LIST": "90"}, "'90' is not a CUDA capability"),
        ("cuda", {"TORCH_CUDA_ARCH_LIST": "9.0;8.0PTX"}, "'8.0PTX' is not a CUDA capability"),
        # A character no entry has is refused without being shown (a terminal escape).
        ("cuda", {"TORCH_CUDA_ARCH_LIST": "9.0\x1b[31m"},
         "TORCH_CUDA_ARCH_LIST from the environment holds characters that none of its entries "
         "may have"),
        ("cuda", {"TORCH_CUDA_ARCH_LIST": "9.0;" * 300}, "over 1000 characters long"),
        ("rocm", {"PYTORCH_ROCM_ARCH": "gfx90a:xnack"},
         "'gfx90a:xnack' is not an AMD GPU architecture; expected architectures such as"),
        ("rocm", {"PYTORCH_ROCM_ARCH": "gfx90a:foo+"}, "'gfx90a:foo+' is not an AMD GPU"),
        ("rocm", {"PYTORCH_ROCM_ARCH": "sm90"}, "'sm90' is not an AMD GPU architecture"),
    ],
)  # fmt: skip
def test_a_bad_entry_of_the_gpu_list_stops_with_one_message(
    which: str, env: dict[str, str], message: str, tmp_path: Path
) -> None:
    done = run_module(LISTS[which], tmp_path, **env)
    assert done.returncode != 0
    said = " ".join(done.stderr.split())
    assert message in said, said
    assert said.count("build2cmake:") == 1 and "\x1b" not in said


# The generated build: configured, compiled, read back, imported and called.


def configure(
    root: Path, build_dir: Path, backend: str, *defines: str, **env: str
) -> tuple[str, str]:
    """CMake's configure step alone (with -D`defines`); its output and its warnings, each on one
    line."""
    environment = {k: v for k, v in os.environ.items() if k not in ENV_LISTS}
    environment.update(env)
    done = subprocess.run(
        ["cmake", "-S", str(root), "-B", str(build_dir), "-G", "Ninja",
         f"-DBUILD2CMAKE_BACKEND={backend}", "-DBUILD2CMAKE_COMPILER_LAUNCHER=none",
         *(f"-D{d}" for d in defines)],
        capture_output=True, text=True, env=environment, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return " ".join(done.stdout.split()), " ".join(done.stderr.split())


@requires_nvcc
def test_torch_cuda_arch_list_leaves_out_a_kernel_it_leaves_nothing_and_warns_only_when_both_build(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = project("shared_source")
    generate_torch(root / "build.toml")
    said, warned = configure(root, tmp_path / "all", "cuda")
    assert (
        "build2cmake_shared_cuda_1, the sources kernel_fill_sm80, kernel_fill_sm90 list, "
        "compiles once, CUDA for 8.0, 9.0a" in said
    )
    assert (
        "build2cmake: cuda/fill.cu, listed by kernels fill_sm80 and fill_sm90, is compiled once "
        "with both kernels' flags, and they contradict each other: fill_sm80 has "
        "-DSHARED_VARIANT=1, fill_sm90 -DSHARED_VARIANT=2 (the last, fill_sm90's, wins)" in warned
    )
    said, warned = configure(root, tmp_path / "h200", "cuda", TORCH_CUDA_ARCH_LIST="9.0a")
    assert "TORCH_CUDA_ARCH_LIST from the environment is 9.0a" in said
    assert (
        "build2cmake: kernel_fill_sm80 is left out: none of its cuda-capabilities (8.0) serves "
        "TORCH_CUDA_ARCH_LIST from the environment (9.0a); the ops that call into it are missing "
        "from this build" in said
    )
    assert "compiles once, CUDA for 9.0a (for kernel_fill_sm90)" in said
    assert "contradict" not in warned  # one kernel built: nothing to contradict
    # A GPU neither kernel serves: both are left out, and the unit of their sources with them.
    said, warned = configure(root, tmp_path / "t4", "cuda", TORCH_CUDA_ARCH_LIST="7.5")
    assert said.count(" is left out: none of its cuda-capabilities") == 2
    assert (
        "build2cmake_shared_cuda_1, the sources kernel_fill_sm80, kernel_fill_sm90 share, is left "
        "out with them" in said
    )
    assert "compiles once" not in said and "contradict" not in warned


@requires_nvcc
def test_a_kernel_cuda_minver_leaves_out_is_named_by_the_load_check(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    # The check after the link names the kernels this configure left out, whatever left them
    # out: here fill_sm80's cuda-minver, above any toolkit (#59).
    root = project("shared_source")
    toml = root / "build.toml"
    toml.write_text(toml.read_text().replace(
        'cuda-capabilities = ["8.0"]\n', 'cuda-capabilities = ["8.0"]\ncuda-minver = "99.0"\n'
    ))  # fmt: skip
    generate_torch(toml)
    said, _ = configure(root, tmp_path / "b", "cuda")
    assert "build2cmake: kernel_fill_sm80: left out: its cuda-minver is 99.0" in said
    check = next(
        line for line in (tmp_path / "b" / "build.ninja").read_text().splitlines()
        if "build2cmake_symbols.py" in line
    )  # fmt: skip
    assert '--left-out "kernel_fill_sm80: its cuda-minver is 99.0, the toolkit CUDA ' in check


@requires_nvcc
def test_a_cutlass_dependency_of_another_major_release_than_the_headers_found_is_a_warning(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    installed = importlib.metadata.version("nvidia-cutlass")  # scripts/setup.sh: 4.x
    root = project("shared_source")
    _, warned = configure_with(root, tmp_path / "4", "cutlass_4_0")
    assert "another major release" not in warned
    # Found by the bindings first (fill_sm80's dependency reaches them), said once.
    _, warned = configure_with(root, tmp_path / "3", "cutlass_3_9")
    assert warned.count("another major release") == 1
    assert (
        f"depends on cutlass_3_9 (CUTLASS 3.x), and the nvidia-cutlass installed is {installed}, "
        "of another major release, whose API differs. If the build fails in CUTLASS's headers: "
        in warned
    )
    assert "-m pip install --no-deps 'nvidia-cutlass==3.*'" in warned


def configure_with(root: Path, build_dir: Path, dependency: str) -> tuple[str, str]:
    build_toml = root / "build.toml"
    text = re.sub(r'"cutlass_\d+_\d+"', f'"{dependency}"', build_toml.read_text())
    build_toml.write_text(text)
    generate_torch(build_toml, force=True)
    return configure(root, build_dir, "cuda")


@requires_rocm_toolchain
def test_pytorch_rocm_arch_leaves_out_a_kernel_it_leaves_nothing(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = project("shared_source")
    generate_torch(root / "build.toml")
    said, warned = configure(root, tmp_path / "b", "rocm", PYTORCH_ROCM_ARCH="gfx940:xnack-")
    assert (
        "build2cmake: kernel_fill_gfx90a is left out: none of its rocm-archs (gfx90a) is among "
        "PYTORCH_ROCM_ARCH from the environment (gfx940:xnack-)" in said
    )
    assert "compiles once, HIP for gfx940:xnack- (for kernel_fill_gfx940)" in said
    assert "contradict" not in warned
    # BUILD2CMAKE_ROCM_ARCHS (without its override) narrows each kernel's list as well.
    said, _ = configure(root, tmp_path / "d", "rocm", "BUILD2CMAKE_ROCM_ARCHS=gfx940")
    assert (
        "build2cmake: kernel_fill_gfx90a is left out: none of its rocm-archs (gfx90a) is among "
        "BUILD2CMAKE_ROCM_ARCHS (gfx940)" in said
    )
    assert "compiles once, HIP for gfx940 (for kernel_fill_gfx940)" in said


def built_extension(root: Path) -> Path:
    """The CUDA extension pip installed (editable: in the build folder's install tree)."""
    found = [p for p in (root / "build").rglob("_shared_source_cuda_*.so") if "install" in p.parts]
    assert len(found) == 1, found
    return found[0]


def elves(tool: str, path: Path) -> list[str]:
    listing = subprocess.run(
        [tool, "--list-elf", str(path)], capture_output=True, text=True, check=True
    ).stdout
    return sorted(line.rsplit(".", 2)[-2] for line in listing.splitlines() if "ELF file" in line)


def bindings_call_only_sm80(root: Path, guard: str | None = None) -> None:
    """Bindings that call only_sm80.cu's function (under #ifdef `guard`, if given)."""
    call = 'extern "C" int only_sm80_answer();\nint64_t sm80() { return only_sm80_answer(); }\n'
    if guard:
        call = f"#ifdef {guard}\n{call}#endif\n"
    binding = root / "torch-ext" / "torch_binding.cpp"
    binding.write_text(binding.read_text().replace("int64_t answer()", call + "int64_t answer()"))


def stopped_for_only_sm80(said: str, left_out: str) -> bool:
    """The build said it stopped for only_sm80_answer, naming `left_out` (words on one line)."""
    return (
        "would not load: it calls 1 function that no source of this build and no library it "
        "loads defines: only_sm80_answer Left out of this build, whose sources may define them: "
        + left_out
    ) in said


CALL = """
import shared_source
print("variant", shared_source.ops.variant(), "answer", shared_source.ops.answer())
"""


@pytest.mark.compile
@pytest.mark.cuda
@requires_nvcc
def test_cuda_kernels_sharing_sources_link_with_sass_for_both_and_torch_cuda_arch_list_narrows(
    project: Callable[[str], Path], build_env: BuildEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump (pip install nvidia-cuda-cuobjdump)")
    root = project("shared_source")
    generate_torch(root / "build.toml", ops_id="t59")
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    build_env.pip_install(root, "cmake.define.BUILD2CMAKE_BACKEND=cuda")
    # Linked (each shared source once), with SASS for both kernels' capabilities in the one
    # object of the shared source.
    (shared,) = (root / "build").rglob("build2cmake_shared_cuda_1.dir/cuda/fill.cu.o")
    assert elves(tool, shared) == ["sm_80", "sm_90a"]
    assert set(elves(tool, built_extension(root))) == {"sm_80", "sm_90a"}
    called = build_env.run(CALL)
    assert called.returncode == 0, called.stderr
    # Compiled with both kernels' flags, fill_sm90's last; host.cpp (C++) once too.
    assert "variant 2 answer 42" in called.stdout

    # As a developer on an H200 narrows it, in the same build folder: the environment of this
    # configure decides.
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0a")
    build_env.pip_install(root, "cmake.define.BUILD2CMAKE_BACKEND=cuda")
    assert elves(tool, shared) == ["sm_90a"]
    library = built_extension(root)
    assert elves(tool, library) == ["sm_90a"]
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout
    assert " shared_fill_variant" in symbols and "only_sm80_answer" not in symbols
    called = build_env.run(CALL)
    assert "variant 2 answer 42" in called.stdout, called.stderr

    # Bindings that call the left-out kernel's function unguarded (kernels-community's
    # sage-attention at 9.0a): the build stops after its link, naming the function and the
    # kernel (cmake/build2cmake_symbols.py), where kernel-builder's would fail at `import`.
    bindings_call_only_sm80(root)
    failed = build_env.pip(root, "cmake.define.BUILD2CMAKE_BACKEND=cuda")
    said = " ".join((failed.stdout + failed.stderr).split())
    assert failed.returncode != 0
    assert stopped_for_only_sm80(
        said, "kernel_fill_sm80: none of its cuda-capabilities (8.0) serves TORCH_CUDA_ARCH_LIST "
        "from the environment (9.0a)"
    ), said[-3000:]  # fmt: skip
    # Built all the same when asked: the import fails as the check said.
    build_env.pip_install(
        root, "cmake.define.BUILD2CMAKE_BACKEND=cuda", "cmake.define.BUILD2CMAKE_CHECK_SYMBOLS=OFF"
    )
    called = build_env.run(CALL)
    assert "undefined symbol: only_sm80_answer" in called.stderr, called.stdout + called.stderr


@pytest.mark.compile
@pytest.mark.rocm
@requires_rocm_toolchain
def test_rocm_kernels_sharing_a_source_hipify_it_once_and_carry_code_objects_for_both(
    project: Callable[[str], Path],
) -> None:
    root = project("shared_source")
    result = run_cli("build", root / "build.toml", "--backend", "rocm", "-j", "2")
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    assert log.count("Hipifying cuda/fill.cu") == 1
    (shared,) = (root / "build").rglob("build2cmake_shared_rocm_1.dir/**/fill.hip.o")
    assert sorted(rocm_targets(shared)) == ["gfx90a", "gfx940"]
    (variant,) = (root / "build").glob("torch*-rocm*")
    (library,) = variant.glob("_shared_source_rocm_*.so")
    assert sorted(rocm_targets(library)) == ["gfx90a", "gfx940"]


@pytest.mark.compile
@pytest.mark.rocm
@requires_rocm_toolchain
def test_rocm_bindings_calling_a_kernel_pytorch_rocm_arch_leaves_out_stop_the_build(
    project: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ROCm twin of the CUDA case above: fill_gfx90a gets a source of its own, which the
    # bindings call; PYTORCH_ROCM_ARCH=gfx940 leaves the kernel, and with it the function, out.
    root = project("shared_source")
    toml = root / "build.toml"
    listed = '[kernel.fill_gfx90a]\nbackend = "rocm"\nrocm-archs = ["gfx90a"]\n'
    text = toml.read_text()
    assert listed in text
    start = text.index(listed)
    end = text.index("\n\n", start)
    own = text[start:end].replace('"cuda/fill.h"]', '"cuda/fill.h", "cuda/only_sm80.cu"]')
    toml.write_text(text[:start] + own + text[end:])
    bindings_call_only_sm80(root, guard="ROCM_KERNEL")
    monkeypatch.setenv("PYTORCH_ROCM_ARCH", "gfx940")
    result = run_cli("build", toml, "--backend", "rocm", "-j", "2")
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2, said[-3000:]
    assert stopped_for_only_sm80(
        said, "kernel_fill_gfx90a: none of its rocm-archs (gfx90a) is among PYTORCH_ROCM_ARCH "
        "from the environment (gfx940)"
    ), said[-3000:]  # fmt: skip
    assert not [p for p in (root / "build").iterdir() if p.name.startswith("torch")]
