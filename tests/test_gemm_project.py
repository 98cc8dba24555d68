"""kernels/gemm, the example project: generated, built and tested like a user would.

Run numbers (tuning log 28, 29a) cite the gemm tuning log, the journal of the dispatch table's
measurements: `git show c631808:benchmarks/RESULTS.md`."""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from build2cmake.api import generate_torch
from build2cmake.toolchains.offload import hip_bundles
from tests.conftest import (
    NVCC,
    REPO,
    BuildEnv,
    cuobjdump,
    load_script,
    requires_nvcc,
    requires_rocm_toolchain,
)

pytestmark = pytest.mark.compile

GEMM = REPO / "kernels" / "gemm"


def sm90_configs() -> list[str]:
    """The configurations the sm_90a build compiles: the X(name) entries of gemm_sm90_configs.h."""
    text = (GEMM / "gemm_cuda" / "gemm_sm90_configs.h").read_text()
    return re.findall(r"^\s*X\((\w+)\)", text, flags=re.MULTILINE)


def copy_gemm(tmp_path: Path) -> Path:
    root = tmp_path / "gemm"
    ignore = shutil.ignore_patterns(
        "build",
        "CMakeLists.txt",
        "cmake",
        "pyproject.toml",
        "_ops.py",
        "registration.h",
        ".build2cmake-manifest.json",
        "__pycache__",
    )
    shutil.copytree(GEMM, root, ignore=ignore)
    return root


def run_kernel_tests(env: BuildEnv, root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(env.python),
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            str(root / "tests"),
        ],
        capture_output=True,
        text=True,
        cwd=root,
        check=False,
    )


def summary(output: str) -> dict[str, int]:
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|error)", output)}


def test_gemm_cpu_build_passes_the_kernels_own_tests(tmp_path: Path, build_env: BuildEnv) -> None:
    root = copy_gemm(tmp_path)
    generate_torch(root / "build.toml")
    build_env.pip_install(root)
    result = run_kernel_tests(build_env, root)
    counts = summary(result.stdout.splitlines()[-1])
    assert result.returncode == 0, result.stdout[-3000:]
    assert counts.get("failed", 0) == 0, result.stdout[-3000:]
    # Everything runs on the CPU but what is about the GPU: every skip gives one of these reasons
    # (pytest -rs: "SKIPPED [count] file:line: reason"), and they add up to all the skips.
    skips: dict[str, int] = {}
    for n, reason in re.findall(r"^SKIPPED \[(\d+)\] [^:]+:\d+: (.+)$", result.stdout, re.M):
        skips[reason] = skips.get(reason, 0) + int(n)
    assert sum(skips.values()) == counts.get("skipped", 0), result.stdout[-3000:]
    own = [c for c in sm90_configs() if c.startswith("own_")]
    assert len(own) >= 2, own
    # The CUDA-kernel choice: the random shapes for "default", "mma" and each of our own sm_90a
    # kernel's configurations, three shapes with several tiles per SM for each of those, the eight
    # configurations of the last-row-block test (GEMM_SM90_SHIFT), and "mma" with infinite
    # scales; "mma", "portable" and each at N that is not a multiple of 128, and the CUTLASS
    # configuration refusing such an N; the run at the largest M for "default", "mma" and each;
    # the back-to-back calls of programmatic dependent launch (ten kernels); the CUDA-graph shapes.
    choice = "GEMM_CUDA_KERNEL chooses between the CUDA build's kernels"
    largest_m = "M = 4194240 takes seconds on the CPU; the limit is about the GPU grids"
    pdl = "programmatic dependent launch: the CUDA build on a CUDA device"
    graphs = skips.pop("CUDA graphs: the CUDA build on a CUDA device", 0)
    assert graphs >= 1, result.stdout[-3000:]
    expected = {
        choice: (2 + len(own)) + 3 * len(own) + 8 + 1 + (2 + len(own)) + 1,
        largest_m: 2 + len(own),
        pdl: 10,
    }
    assert skips == expected, result.stdout[-3000:]
    assert counts["passed"] >= 20


@requires_rocm_toolchain
def test_gemm_rocm_build_carries_matrix_core_code_for_gfx940_and_imports(
    tmp_path: Path, build_env: BuildEnv
) -> None:
    root = copy_gemm(tmp_path)
    generate_torch(root / "build.toml")
    # The Debian ROCm 5.2 compiler cannot target gfx942; build the archs it can.
    build_env.pip_install(
        root,
        "cmake.define.BUILD2CMAKE_BACKEND=rocm",
        "cmake.define.BUILD2CMAKE_ROCM_ARCHS=gfx90a;gfx940",
    )
    (so,) = [p for p in (root / "build" / "cmake").rglob("_gemm_rocm_*.so") if "install" in p.parts]
    (bundle,) = hip_bundles(so)
    objects = {c.target: set(c.kernels) for c in bundle.code_objects}
    assert sorted(objects) == ["gfx90a", "gfx940"]
    mfma = "_ZN7fp8gemm21gemm_mfma_fnuz_kernelEPtPKhS2_PKfS4_iii"
    portable = "_ZN7fp8gemm20gemm_portable_kernelILNS_9Fp8FormatE1EEEvPtPKhS4_PKfS6_iii"
    assert mfma in objects["gfx940"] and portable in objects["gfx940"]
    assert portable in objects["gfx90a"]

    result = run_kernel_tests(build_env, root)
    assert result.returncode == 0, result.stdout[-3000:]
    counts = summary(result.stdout.splitlines()[-1])
    assert counts.get("passed", 0) == 0 and counts["skipped"] >= 20
    assert "this is the rocm build of gemm and no ROCm device is present" in result.stdout


@requires_nvcc
def test_gemm_cuda_build_has_the_cutlass_kernel_for_sm90a_only_and_imports(
    tmp_path: Path, build_env: BuildEnv
) -> None:
    tool = cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump (pip install nvidia-cuda-cuobjdump)")
    cutlass_include()  # skips without the headers, which the build below finds itself
    root = copy_gemm(tmp_path)
    generate_torch(root / "build.toml")
    build_env.pip_install(root, "cmake.define.BUILD2CMAKE_BACKEND=cuda")
    (so,) = [p for p in (root / "build" / "cmake").rglob("_gemm_cuda_*.so") if "install" in p.parts]

    # One "Fatbin elf code" block per cubin: its arch, then its kernel (ENTRY) symbols.
    dump = subprocess.run([tool, "-symbols", str(so)], capture_output=True, text=True, check=True)
    cubins = []
    for block in dump.stdout.split("Fatbin elf code:")[1:]:
        arch = re.search(r"arch = (\S+)", block)
        assert arch, block
        cubins.append((arch.group(1), set(re.findall(r"ENTRY\s+(\S+)", block))))
    cutlass = [arch for arch, names in cubins if any("GemmUniversal" in n for n in names)]
    mma = [arch for arch, names in cubins if any("gemm_tensor_core_kernel" in n for n in names)]
    own = [
        (arch, sum("sm90_own11gemm_kernel" in n for n in names))
        for arch, names in cubins
        if any("sm90_own" in n for n in names)
    ]
    # gemm_cuda (our mma.sync kernel) for 8.9 and 9.0a; gemm_sm90 (CUTLASS, one translation unit
    # per configuration; our own kernel's, one translation unit per tile width) for 9.0a alone.
    configs = sm90_configs()
    ours = [c for c in configs if c.startswith("own_")]
    assert len(configs) - len(ours) >= 2 and ours, configs
    assert sorted(mma) == ["sm_89", "sm_90a"], cubins
    assert cutlass == ["sm_90a"] * (len(configs) - len(ours)), cubins
    # One kernel per configuration of our own, but the _pdl ones: their twin's kernel, launched
    # with programmatic dependent launch.
    kernels = len([c for c in ours if not c.endswith("_pdl")])
    assert {arch for arch, _ in own} == {"sm_90a"} and sum(n for _, n in own) == kernels, cubins

    # (the editable install's rebuild check may print first)
    result = build_env.run("import gemm; print(gemm.backend)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "cuda", result.stdout


def cutlass_include() -> Path:
    """The CUTLASS headers of the nvidia-cutlass wheel; the test skips without them."""
    if importlib.util.find_spec("cutlass_library") is None:
        pytest.skip("no CUTLASS headers (pip install --no-deps nvidia-cutlass)")
    import cutlass_library

    return Path(cutlass_library.__file__).parent / "source" / "include"


@requires_nvcc
@pytest.mark.parametrize(
    "unit", sorted(p.name for p in (GEMM / "gemm_cuda").glob("gemm_sm90_own_*.cu"))
)
def test_ptxas_keeps_our_own_kernels_wgmma_asynchronous(unit: str, tmp_path: Path) -> None:
    """ptxas serializes every wgmma of a kernel (its note C7514, only in its verbose report) where
    it cannot tell that no other instruction reads a wgmma result still being written. That would
    silently take back what the pipelined k-block loop of gemm_sm90_own_kernel.cuh gains (up to
    40 % at small M, tuning log run 17); the loop is shaped so that ptxas can tell. Each
    translation unit of our own kernel compiled for sm_90a, as the build compiles it."""
    cutlass = cutlass_include()
    source = GEMM / "gemm_cuda" / unit
    result = subprocess.run(
        [NVCC, "-cubin", "-arch=sm_90a", "-O3", "-std=c++17", "--expt-relaxed-constexpr",
         f"-I{cutlass}", f"-I{source.parent}", f"-I{GEMM}", "-Xptxas=-v", str(source),
         "-o", str(tmp_path / "unit.cubin")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    kernels = re.findall(r"Compiling entry function '(\w+)'", result.stderr)
    assert kernels, result.stderr[-3000:]  # the report this test reads is there
    assert "C7514" not in result.stderr and "C7517" not in result.stderr, result.stderr[-3000:]


@requires_nvcc
def test_phase_stamps_build_on_the_kernel_and_stay_out_of_the_extension(tmp_path: Path) -> None:
    """benchmarks/phase_stamps.cu compiles our 128 x 128 kernel with its FP8GEMM_OWN_STAMP hooks
    reading %globaltimer; the extension's translation unit of that kernel has no timer read (the
    hooks are empty there), and the stamped kernel keeps its wgmma asynchronous."""
    cutlass = cutlass_include()
    flags = ["-O3", "-std=c++17", "--expt-relaxed-constexpr", f"-I{cutlass}",
             f"-I{GEMM / 'gemm_cuda'}", f"-I{GEMM}"]  # fmt: skip
    stamped = subprocess.run(
        [NVCC, "-cubin", "-arch=sm_90a", *flags, "-Xptxas=-v", "--keep",
         f"--keep-dir={tmp_path}", str(REPO / "benchmarks" / "phase_stamps.cu"),
         "-o", str(tmp_path / "stamps.cubin")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert stamped.returncode == 0, stamped.stderr[-3000:]
    assert "C7514" not in stamped.stderr and "C7517" not in stamped.stderr, stamped.stderr[-3000:]
    ptx = next(tmp_path.glob("phase_stamps*.ptx")).read_text()
    entry = ptx[ptx.index(".entry _ZN7fp8gemm8sm90_own11gemm_kernel") :].split(".entry")[1]
    assert entry.count("%globaltimer") == 7, "a timer read per phase, inlined into the kernel"

    plain = subprocess.run(
        [NVCC, "-ptx", "-arch=sm_90a", *flags,
         str(GEMM / "gemm_cuda" / "gemm_sm90_own_128x128.cu"), "-o", str(tmp_path / "own.ptx")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr[-3000:]
    own = (tmp_path / "own.ptx").read_text()
    assert ".entry _ZN7fp8gemm8sm90_own11gemm_kernel" in own and "globaltimer" not in own


def host_table(tmp_path: Path) -> Callable[[list[tuple[int, int, int]]], list[str]]:
    """gemm_sm90.cu's dispatch table compiled for the host with stand-ins for the kernels
    (benchmarks/host_table.py; no device: the H100's 132 SMs): a function from shapes to the
    configurations it chooses."""
    tool = load_script(REPO / "benchmarks" / "host_table.py")
    program = tool.build(GEMM / "gemm_cuda", tmp_path)
    return lambda shapes: tool.ask(program, shapes)


def assert_table_chooses(tmp_path: Path, expected: dict[tuple[int, int, int], str]) -> None:
    """The host table (host_table) chooses expected[shape] at every shape."""
    assert host_table(tmp_path)(list(expected)) == list(expected.values())


@requires_nvcc
def test_sm90_table_sends_the_graph_shapes_down_every_branch(tmp_path: Path) -> None:
    """The CUDA-graph test of the kernel project (kernels/gemm/tests/test_gemm.py) says its shapes
    take each branch of gemm_sm90.cu's table on an H100, so that every configuration the table
    can return is captured and replayed there. Checked here without a GPU: the table compiled for
    the host with stand-ins for the kernels (no device: the H100's 132 SMs), asked for each graph
    shape, must return every configuration named in the table's body."""
    gemm_cuda = GEMM / "gemm_cuda"
    tree = ast.parse((GEMM / "tests" / "test_gemm.py").read_text())
    graph_test = next(
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and node.name == "test_cuda_graph_replays_the_op_on_new_inputs"
    )
    parametrize = graph_test.decorator_list[0]
    assert isinstance(parametrize, ast.Call)
    shapes = ast.literal_eval(parametrize.args[1])
    source = (gemm_cuda / "gemm_sm90.cu").read_text()
    start, end = source.index("int gemm_sm90_choose("), source.index("gemm_sm90_workspace_bytes")
    table = source[start:end]
    returnable = set(re.findall(r'"(\w+)"', table)) & set(sm90_configs())
    assert len(returnable) >= 10, returnable  # the pattern still finds the table's names

    chosen = host_table(tmp_path)(shapes)
    assert returnable <= set(chosen), sorted(returnable - set(chosen))


@requires_nvcc
def test_sm90_table_takes_96_and_112_wide_tiles_over_a_moved_last_row_block(tmp_path: Path) -> None:
    """Until our kernel moved the tile of a last 128-row block at most half full back to end at M
    (tuning log 28), the few-tiles rule kept 128 x 96 tiles off such blocks, and 128 x 112 ones
    at M <= 320. Since then it takes them (+8.4 % at 44 random shapes, tuning log 29a, 29c, 29d)
    but for 112-wide tiles over a block exactly half full (not moved; 320 x 4864) and 96-wide ones
    at N <= 640 (2212 x 640, 2732 x 512), where the 128 x 128 tiles stayed ahead. At
    64 < M <= 128 the 96- and 112-wide tiles launch with programmatic dependent launch (29a)."""
    assert_table_chooses(
        tmp_path,
        {
            (680, 1920, 7168): "own_128x96_pipe",
            (428, 2944, 8192): "own_128x96_pipe",
            (308, 8960, 7168): "own_128x112_pipe",
            (320, 4864, 3584): "own_128x128_pipe",
            (2212, 640, 5632): "own_128x128_pipe",
            (2732, 512, 3072): "own_128x128_pipe",
            (92, 10880, 2048): "own_128x96_pipe_pdl",
            (88, 14080, 2560): "own_128x112_pipe_pdl",
        },
    )


@requires_nvcc
def test_sm90_table_sends_many_waves_over_a_half_empty_last_row_block_to_our_128x128(
    tmp_path: Path,
) -> None:
    """Where the last 128-row block is at most half full and 96-wide tiles would make four waves
    or more, the 192-wide rule's choice (128 x 256 mostly) gave way to the fallback's, our
    128 x 128 mostly, once our kernel moved such a block's tile back to end at M: +3.3 % at 24
    fresh shapes, behind cuBLAS at none of 20 instead of 4 (tuning log 28i)."""
    assert_table_chooses(
        tmp_path,
        {
            (1808, 3328, 7680): "own_128x128_pipe",
            (6436, 1408, 6144): "own_128x128_pipe",
            (2060, 2944, 7680): "own_128x128_pipe",
            (1852, 3328, 1536): "own_128x128_pipe_pdl",
            (6932, 1152, 1024): "own_128x128_pipe_pdl",
        },
    )


@requires_nvcc
def test_sm90_table_takes_128x192_at_long_k_where_its_waves_hold_fewer_columns(
    tmp_path: Path,
) -> None:
    """Where neither the few-tiles nor the wide rules decide, our 128 x 192 over our 128 x 128
    where its waves hold fewer columns, at long K too: +15 % (geometric mean) at 15 shapes,
    among them DeepSeek-V3's N = 2112 (tuning log 31b); short K keeps its _shortk build."""
    assert_table_chooses(
        tmp_path,
        {
            (4096, 2112, 7168): "own_128x192",
            (3072, 2112, 7168): "own_128x192",
            (7496, 1152, 4096): "own_128x192",
            (324, 22656, 7168): "own_128x192",
            (4096, 2048, 7168): "own_128x128_pipe",  # 16 whole columns of 128: no fewer
        },
    )


@requires_nvcc
def test_sm90_table_takes_128_wide_tiles_for_many_waves_of_no_more_columns(tmp_path: Path) -> None:
    """In four waves or more, 128 x 96 tiles gave way to our 128 x 128 where its waves hold no
    more columns: +9 % to +39 % at 27 random shapes (tuning log 24j). Where theirs hold fewer,
    the 96-wide tiles stay."""
    fewer_or_as_many = [(6244, 1664, 7040), (7504, 1408, 5120), (868, 7168, 6144)]
    more = [(4676, 2304, 2048), (492, 21760, 3072), (1128, 9600, 5376)]
    chosen = host_table(tmp_path)([*fewer_or_as_many, (3836, 2816, 1024), *more])
    assert chosen == ["own_128x128_pipe"] * 3 + ["own_128x128_pipe_pdl"] + ["own_128x96"] * 3


@requires_nvcc
def test_sm90_table_takes_128x160_where_its_waves_hold_far_fewer_columns(tmp_path: Path) -> None:
    """Where 192- or 256-wide tiles make many waves, our 128 x 160 takes their place if its waves
    hold at most 0.9 of their columns (five waves of 160 against five of 192 whose last is 4 %
    full at 1292 x 9600): +20 % at 20 random shapes (tuning log 29f). Where the columns differ by
    a few per cent the 192- and 256-wide tiles stay (29e)."""
    assert_table_chooses(
        tmp_path,
        {
            (1292, 9600, 5632): "own_128x160",
            (6984, 1920, 5120): "own_128x160",
            (396, 25856, 6144): "own_128x160",
            (3552, 14464, 4608): "own_128x192",
            (5928, 22656, 3584): "own_128x256",
            (6144, 4608, 7168): "own_128x192",
        },
    )


@requires_nvcc
def test_sm90_table_takes_128x256_over_128x192_from_20_waves(tmp_path: Path) -> None:
    """Where the 192-wide rule chose between our 128 x 192 and 128 x 256 by the columns their
    waves hold, 128 x 256 ran ahead wherever the 192-wide tiles made 20 waves or more, though its
    waves held up to 4.3 % more columns: +4.5 % at 19 random shapes (tuning log 30a), +5.4 % at
    24 fresh ones (30b). In fewer waves the columns decide as before: 128 x 192 at 14 waves of
    6144 x 7168 x 2048 (1083 vs 1030) and at 19 of 6412 x 9344 x 7168; and below K = 2048, where
    the 20-wave rule lost 1.4 % at 20 random shapes (30g): 128 x 192 at 4172 x 16512 x 1152."""
    assert_table_chooses(
        tmp_path,
        {
            (6400, 32384, 6144): "own_128x256",
            (5452, 30848, 6656): "own_128x256",
            (5604, 26368, 7680): "own_128x256",
            (4024, 16256, 4608): "own_128x256",
            (6144, 7168, 2048): "own_128x192",
            (6412, 9344, 7168): "own_128x192",
            (4096, 4096, 7168): "own_128x256",
            (4172, 16512, 1152): "own_128x192",
        },
    )


@requires_nvcc
def test_sm90_table_takes_64x128_over_128x64_and_128x112_only_past_n_2048(tmp_path: Path) -> None:
    """Where 128 x 64 and 64 x 128 tiles cost the same, 64 x 128 was ahead at all 24 random shapes
    measured (+18 %, tuning log 27a), and at 96 < M <= 256 from K = 1664 it no longer hands the
    choice on to the short-K rules (+6 %, 27b). At N <= 2048 our 128 x 128 in place of 128 x 112
    (+7 % and +2 %, 27a and 27b; with programmatic dependent launch below K = 2048); past N = 2048
    the 112-wide tiles stay, as level there (27a)."""
    assert_table_chooses(
        tmp_path,
        {
            (424, 2048, 7168): "own_64x128",
            (316, 2688, 7168): "own_64x128",
            (80, 7296, 5632): "own_64x128",
            (217, 3584, 1664): "own_64x128",
            (3068, 1152, 6144): "own_128x128_pipe",
            (904, 1664, 7680): "own_128x128_pipe",
            (3252, 1024, 6144): "own_128x128_pipe",
            (1608, 1024, 1152): "own_128x128_pipe_pdl",
            (852, 3584, 6144): "own_128x112_pipe",
            (476, 3200, 6144): "own_128x112_pipe",
        },
    )


@requires_nvcc
def test_sm90_table_swaps_a_and_b_where_the_unswapped_rows_stay_empty(tmp_path: Path) -> None:
    """Swapped tiles (M the tile's wide side, the output stored transposed) where the unswapped
    choice's last row block is largely empty: +14 % and +15 % (geometric mean) over the unswapped
    choice at 45 and 16 random shapes out of sample (tuning log 25d, 25e). Not where they lost in
    25a-25c: 64-row tiles nearly full (M = 188, 192), a cost ratio of exactly 6/5 (M = 316), fewer
    tiles than three quarters of a wave (160 x 2432, 364 x 2048), nor where M is a multiple of
    128."""
    swapped = {
        (156, 21376, 4608): "own_swap_80x128",
        (136, 31744, 4608): "own_swap_144x128",
        (152, 27392, 6144): "own_swap_160x128",
        (524, 5632, 6656): "own_swap_176x128",
        (180, 32384, 7680): "own_swap_192x128",
    }
    lost = [(188, 15360, 6144), (192, 16384, 2048), (316, 24576, 8192), (160, 2432, 4096),
            (364, 2048, 5632), (256, 21376, 4608)]  # fmt: skip
    chosen = host_table(tmp_path)([*swapped, *lost])
    assert chosen[: len(swapped)] == list(swapped.values()), chosen
    assert not any(c.startswith("own_swap") for c in chosen[len(swapped) :]), chosen
