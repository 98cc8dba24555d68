"""Tests of the gemm op against a float64 reference, on whichever backend this build has.

Run after building: pip install --no-build-isolation -e kernels/gemm && pytest kernels/gemm/tests
"""

from __future__ import annotations

import re
from pathlib import Path

import gemm
import pytest
import torch
from gemm.reference import dequantize
from gemm.reference import gemm_reference as reference

FP8_FORMATS = [torch.float8_e4m3fnuz, torch.float8_e4m3fn]
# Our own sm_90a kernel's configurations, each tested by name: the "own_" entries of the list the
# build compiles (gemm_cuda/gemm_sm90_configs.h), read from it so that a new one is tested too.
_CONFIGS_H = Path(__file__).resolve().parent.parent / "gemm_cuda" / "gemm_sm90_configs.h"
OWN_KERNELS = re.findall(r"^\s*X\((own_\w+)\)", _CONFIGS_H.read_text(), flags=re.MULTILINE)


def _device() -> str:
    if gemm.backend == "cpu":
        return "cpu"
    if not torch.cuda.is_available():
        kind = "ROCm" if gemm.backend == "rocm" else "CUDA"
        pytest.skip(f"this is the {gemm.backend} build of gemm and no {kind} device is present")
    if gemm.backend == "rocm" and not torch.version.hip:
        pytest.skip("the rocm build of gemm needs a ROCm build of torch to run")
    return "cuda"


@pytest.fixture
def device() -> str:
    return _device()


def use_cuda_kernel(kernel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Points the op at one of the CUDA build's kernels: "default" (what the dispatch table
    picks), "mma" or "portable" (GEMM_CUDA_KERNEL; the portable kernel is also the one ROCm
    builds run off MI300) or a configuration of gemm_sm90_configs.h (GEMM_SM90_CONFIG, sm_90a
    only); skips where that kernel is not there."""
    if kernel == "default":
        return
    if gemm.backend != "cuda":
        pytest.skip("GEMM_CUDA_KERNEL chooses between the CUDA build's kernels")
    if kernel in ("mma", "portable"):
        monkeypatch.setenv("GEMM_CUDA_KERNEL", kernel)
    elif torch.cuda.get_device_capability() != (9, 0):
        pytest.skip(f"{kernel} is an sm_90a (H100/H200) kernel")
    else:
        monkeypatch.setenv("GEMM_SM90_CONFIG", kernel)


def supported(fp8: torch.dtype) -> bool:
    # NVIDIA GPUs take only the OCP format; the CPU and ROCm paths take both.
    return not (gemm.backend == "cuda" and fp8 == torch.float8_e4m3fnuz)


def make_inputs(m: int, n: int, k: int, fp8: torch.dtype, device: str, seed: int):
    """Random fp8 operands spanning the format's range, and non-trivial positive scales."""
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(m, k, generator=g) * 4).clamp(-200, 200).to(fp8)
    b = (torch.randn(k, n, generator=g) * 4).clamp(-200, 200).to(fp8)
    a_scale = torch.exp(torch.randn(k // 128, m, generator=g))
    b_scale = torch.exp(torch.randn(k // 128, -(-n // 128), generator=g))
    return [t.to(device) for t in (a, b, a_scale, b_scale)]


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref).norm() / ref.norm()).item()


SHAPES = [  # M, N, K
    (1, 128, 128),
    (37, 256, 384),
    (64, 128, 1024),
    (130, 384, 128),
    (255, 640, 512),
    (1, 1536, 7168),
]


@pytest.mark.kernels_ci
@pytest.mark.parametrize("fp8", FP8_FORMATS, ids=["e4m3fnuz", "e4m3fn"])
@pytest.mark.parametrize(("m", "n", "k"), SHAPES)
def test_gemm_matches_float64_reference(device: str, fp8: torch.dtype, m: int, n: int, k: int):
    if not supported(fp8):
        pytest.skip(f"{fp8} is not supported by the {gemm.backend} build")
    a, b, a_scale, b_scale = make_inputs(m, n, k, fp8, device, seed=m * 7919 + n * 31 + k)
    out = gemm.gemm(a, b, a_scale, b_scale)
    assert out.shape == (m, n) and out.dtype == torch.bfloat16
    ref = reference(a.cpu(), b.cpu(), a_scale.cpu(), b_scale.cpu())
    assert ref.abs().max() > 0
    assert relative_error(out.cpu(), ref) < 1e-2


@pytest.mark.parametrize("fp8", FP8_FORMATS, ids=["e4m3fnuz", "e4m3fn"])
@pytest.mark.parametrize(
    ("m", "n", "k"), [(1024, 1536, 7168), (6144, 7168, 2304), (64, 4096, 2048)]
)
def test_gemm_matches_reference_at_the_seed_shapes(device, fp8, m, n, k):
    if not supported(fp8):
        pytest.skip(f"{fp8} is not supported by the {gemm.backend} build")
    a, b, a_scale, b_scale = make_inputs(m, n, k, fp8, device, seed=k)
    out = torch.empty(m, n, dtype=torch.bfloat16, device=device)
    assert gemm.gemm(a, b, a_scale, b_scale, out=out) is out
    ref = reference(a.cpu(), b.cpu(), a_scale.cpu(), b_scale.cpu())
    assert relative_error(out.cpu(), ref) < 1e-2


@pytest.mark.parametrize("fp8", FP8_FORMATS, ids=["e4m3fnuz", "e4m3fn"])
def test_every_fp8_value_decodes_exactly(device: str, fp8: torch.dtype):
    """Row m of a holds byte m in column 0 (zeros elsewhere) and b's row 0 is ones, so every
    column of out row m must equal byte m's value exactly (NaN for the NaN encodings)."""
    if not supported(fp8):
        pytest.skip(f"{fp8} is not supported by the {gemm.backend} build")
    a_bytes = torch.zeros(256, 128, dtype=torch.uint8)
    a_bytes[:, 0] = torch.arange(256, dtype=torch.uint8)
    a = a_bytes.view(fp8)
    b = torch.zeros(128, 128)
    b[0] = 1
    b = b.to(fp8)
    out = gemm.gemm(*(t.to(device) for t in (a, b, torch.ones(1, 256), torch.ones(1, 1))))
    out = out.cpu().float()
    expected = a[:, :1].float().expand(256, 128)
    assert torch.equal(out.isnan(), expected.isnan())
    assert expected.isnan().any() and not expected.isnan().all()
    finite = ~expected.isnan()
    assert torch.equal(out[finite], expected[finite])


def test_bad_arguments_raise_before_running(device: str):
    fp8 = torch.float8_e4m3fn
    a, b, sa, sb = make_inputs(4, 256, 256, fp8, device, seed=1)
    out = torch.full((4, 256), 7.0, dtype=torch.bfloat16, device=device)
    cases = [
        (
            (out, a.float(), b, sa, sb),
            "gemm: a must be float8_e4m3fnuz or float8_e4m3fn, got Float",
        ),
        ((out, a, b.view(torch.float8_e5m2), sa, sb), "gemm: b must have a's dtype"),
        ((out, a[:, :200], b, sa, sb), "gemm: K = a.size(1) must be a positive multiple of 128"),
        (
            (out[:, :200], a, b[:, :200], sa, sb[:, :2]),
            "gemm: N = b.size(1) must be a positive multiple of 16",
        ),
        ((out, a, b[:128], sa, sb), "gemm: b must have shape (K, N)"),
        ((out, a, b, sa.t(), sb), "gemm: a_scale must have shape (K/128, M)"),
        ((out, a, b, sa, sb.double()), "gemm: b_scale must be float32"),
        ((out, a, b, sa, sb[:, :1]), "gemm: b_scale must have shape (K/128, ceil(N/128))"),
        (
            (out[:, :208].contiguous(), a, b[:, :208].contiguous(), sa, sb[:, :1].contiguous()),
            "gemm: b_scale must have shape (K/128, ceil(N/128))",
        ),
        ((out.float(), a, b, sa, sb), "gemm: out must be bfloat16"),
        ((out[:2], a, b, sa, sb), "gemm: out must have shape (M, N)"),
        ((out, a[:0], b, sa[:, :0], sb), "gemm: a must have at least one row"),
        ((out, a.unsqueeze(0), b, sa, sb), "gemm: a must be 2-D"),
        (
            (out, a, torch.cat([b, b], dim=1)[:, :256], sa, sb),
            "gemm: b must be contiguous (row-major, strides (N, 1)) or column-major",
        ),
        ((out, a, b, sa, sb.t().contiguous().t()), "gemm: b_scale must be contiguous"),
    ]
    for args, message in cases:
        before = out.clone()
        with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
            gemm.ops.gemm(*args)
        assert torch.equal(out, before), message


def test_column_major_b_gives_the_row_major_result(device: str):
    """b = w.t() for w stored (N, K) (what cuBLAS and DeepGEMM take) is read without a copy on
    the tensor-core paths; it must compute exactly what the row-major b does."""
    a, b, sa, sb = make_inputs(70, 384, 640, torch.float8_e4m3fn, device, seed=4)
    b_col = b.t().contiguous().t()
    assert b_col.stride() == (1, 640) and torch.equal(b_col.view(torch.uint8), b.view(torch.uint8))
    row = gemm.gemm(a, b, sa, sb)
    col = gemm.gemm(a, b_col, sa, sb)
    assert torch.equal(row, col)
    ref = reference(a.cpu(), b.cpu(), sa.cpu(), sb.cpu())
    assert relative_error(col.cpu(), ref) < 1e-2


def unaligned(t: torch.Tensor) -> torch.Tensor:
    """A copy of t whose data starts one element past a 16-byte boundary."""
    flat = torch.empty(t.numel() + 16, dtype=t.dtype, device=t.device)
    view = flat[1 : 1 + t.numel()].view(t.shape)
    view.copy_(t)
    assert view.data_ptr() % 16 != 0 and view.is_contiguous()
    return view


@pytest.mark.parametrize("name", ["a", "b", "a_scale", "b_scale", "out"])
def test_unaligned_data_pointer_is_refused_on_every_backend(device: str, name: str):
    """The GPU kernels load 16 bytes at a time; a contiguous view at an unaligned storage offset
    gets one clear error (on the CPU build too, so code that runs there runs on a GPU)."""
    a, b, sa, sb = make_inputs(8, 128, 256, torch.float8_e4m3fn, device, seed=5)
    out = torch.full((8, 128), 7.0, dtype=torch.bfloat16, device=device)
    args = dict(out=out, a=a, b=b, a_scale=sa, b_scale=sb)
    args[name] = unaligned(args[name])
    before = args["out"].clone()
    with pytest.raises(RuntimeError, match=f"gemm: {name}'s data must start at a 16-byte aligned"):
        gemm.ops.gemm(args["out"], args["a"], args["b"], args["a_scale"], args["b_scale"])
    assert torch.equal(args["out"], before)
    # The error names the way out, and it works.
    args[name] = args[name].clone()
    gemm.ops.gemm(args["out"], args["a"], args["b"], args["a_scale"], args["b_scale"])
    assert not torch.equal(args["out"], before)


MAX_M = 65535 * 64  # fp8gemm::kMaxM


def test_m_above_the_limit_is_refused_by_the_binding(device: str):
    m = MAX_M + 1
    a = torch.empty(m, 128, dtype=torch.float8_e4m3fn, device=device)
    b = torch.ones(128, 128, device=device).to(torch.float8_e4m3fn)
    out = torch.empty(m, 128, dtype=torch.bfloat16, device=device)
    sa, sb = torch.ones(1, m, device=device), torch.ones(1, 1, device=device)
    with pytest.raises(RuntimeError, match=f"gemm: M = a.size\\(0\\) must be at most {MAX_M}"):
        gemm.ops.gemm(out, a, b, sa, sb)


@pytest.mark.parametrize("kernel", ["default", "mma", *OWN_KERNELS])
def test_m_at_the_limit_runs_on_the_gpu(device: str, kernel: str, monkeypatch: pytest.MonkeyPatch):
    """The binding's limit is the launchers' limit: the largest M it accepts runs, on every CUDA
    kernel (before, the HIP launcher refused the last 64 sizes the binding let through)."""
    if device == "cpu":
        pytest.skip("M = 4194240 takes seconds on the CPU; the limit is about the GPU grids")
    use_cuda_kernel(kernel, monkeypatch)
    fp8 = torch.float8_e4m3fn if gemm.backend == "cuda" else torch.float8_e4m3fnuz
    a, b, sa, sb = make_inputs(MAX_M, 128, 128, fp8, device, seed=6)
    out = gemm.gemm(a, b, sa, sb)
    for rows in (slice(0, 256), slice(MAX_M - 256, MAX_M)):
        ref = reference(a[rows].cpu(), b.cpu(), sa[:, rows].cpu(), sb.cpu())
        assert relative_error(out[rows].cpu(), ref) < 1e-2


@pytest.mark.parametrize("kernel", ["default", "mma"])
def test_infinite_scales_follow_the_block_sum_definition(
    device: str, kernel: str, monkeypatch: pytest.MonkeyPatch
):
    """Scales multiply each 128-wide block's partial sum (gemm.reference): an infinite scale turns
    a finite block sum into +-inf, a zero block sum into NaN; the same on every backend."""
    use_cuda_kernel(kernel, monkeypatch)
    fp8 = torch.float8_e4m3fn
    a, b, sa, sb = (t.cpu() for t in make_inputs(8, 384, 384, fp8, device, seed=7))
    a_bytes = a.view(torch.uint8)
    a_bytes[3, 128:256] = 0  # row 3's second block sums to 0 ...
    sa[1, 3] = float("inf")  # ... and meets an infinite scale: NaN
    sa[0, 2] = float("inf")  # row 2: +-inf by the sign of each block sum
    sa[2, 5] = -float("inf")  # row 5: the opposite signs
    sb[1, 2] = float("inf")  # columns 256..383, every row
    out = gemm.gemm(*(t.to(device) for t in (a, b, sa, sb))).cpu().double()
    ref = reference(a, b, sa, sb)
    assert ref[3].isnan().all() and ref[2, :256].isinf().all() and ref[5, :256].isinf().all()
    assert ref[:, 256:].isinf().any() and ref[0, :256].isfinite().all()
    assert torch.equal(out.isnan(), ref.isnan())
    infinite = ref.isinf()
    assert torch.equal(out.isinf(), infinite)
    assert torch.equal(out[infinite], ref[infinite])
    finite = ref.isfinite()
    assert relative_error(out[finite], ref[finite]) < 1e-2


def test_wrapper_allocates_out_and_rejects_1d_inputs(device: str):
    a, b, sa, sb = make_inputs(3, 128, 128, torch.float8_e4m3fn, device, seed=2)
    assert gemm.gemm(a, b, sa, sb).shape == (3, 128)
    with pytest.raises(ValueError, match="a and b must be 2-D"):
        gemm.gemm(a[0], b, sa, sb)


def test_torch_compile_traces_the_op(device: str):
    fp8 = torch.float8_e4m3fn
    a, b, sa, sb = make_inputs(16, 256, 256, fp8, device, seed=3)

    def scaled_relu_gemm(a, b, sa, sb):
        return torch.relu(gemm.gemm(a, b, sa, sb)) * 2

    compiled = torch.compile(scaled_relu_gemm, fullgraph=True)
    expected = scaled_relu_gemm(a, b, sa, sb)
    assert torch.equal(compiled(a, b, sa, sb), expected)
    assert expected.abs().max() > 0


hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

# Scales from tiny to large (finite ones kept below 1e14 so float32 accumulation cannot overflow
# where float64 does not), exact zeros and infinities.
SCALES = [0.0, 1e-30, 1e-3, 1.0, 7.5, 1e14, float("inf"), -float("inf"), -2.0]
NAN_CODES = {torch.float8_e4m3fn: [0x7F, 0xFF], torch.float8_e4m3fnuz: [0x80]}


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(
    m=st.integers(1, 40),
    n=st.sampled_from([128, 256]),
    k=st.sampled_from([128, 256, 384]),
    fp8=st.sampled_from(FP8_FORMATS),
    seed=st.integers(0, 2**31 - 1),
    special_scales=st.lists(st.sampled_from(SCALES), max_size=4),
    nan_count=st.integers(0, 3),
)
def test_cpu_property_extreme_scales_zeros_nan_inf_propagate_like_the_reference(
    m, n, k, fp8, seed, special_scales, nan_count
):
    """On the CPU path: random valid shapes, scales spanning 60 decades plus 0 and +-inf, and
    NaN codes in the inputs; NaN/inf land where the float64 reference puts them and finite values
    agree within bf16 rounding plus a float32 accumulation bound."""
    if gemm.backend != "cpu":
        pytest.skip("the property test covers the CPU path")
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(m, k, generator=g) * 8).to(fp8)
    b = (torch.randn(k, n, generator=g) * 8).to(fp8)
    a_scale = torch.exp(torch.randn(k // 128, m, generator=g) * 3)
    b_scale = torch.exp(torch.randn(k // 128, n // 128, generator=g) * 3)
    for i, value in enumerate(special_scales):  # put the special values at seeded places
        target = a_scale if i % 2 == 0 else b_scale
        flat = target.view(-1)
        flat[int(torch.randint(flat.numel(), (1,), generator=g))] = value
    for _ in range(nan_count):
        operand = a if torch.rand(1, generator=g) < 0.5 else b
        raw = operand.view(torch.uint8).view(-1)
        code = NAN_CODES[fp8][int(torch.randint(len(NAN_CODES[fp8]), (1,), generator=g))]
        raw[int(torch.randint(raw.numel(), (1,), generator=g))] = code

    out = gemm.gemm(a, b, a_scale, b_scale).double()
    ref = reference(a, b, a_scale, b_scale)
    a64, b64 = dequantize(a, a_scale, b, b_scale)
    magnitude = a64.abs() @ b64.abs()

    assert torch.equal(out.isnan(), ref.isnan())
    infinite = ref.isinf()
    assert torch.equal(out.isinf(), infinite)
    assert torch.equal(out[infinite], ref[infinite])
    finite = ~(ref.isnan() | infinite)
    bound = 2.0**-8 * ref[finite].abs() + 1e-4 * magnitude[finite] + 1e-38
    assert bool(((out[finite] - ref[finite]).abs() <= bound).all())


@pytest.mark.parametrize("kernel", ["default", "mma", *OWN_KERNELS])
def test_cuda_kernels_match_the_reference_at_random_shapes(
    device: str, kernel: str, monkeypatch: pytest.MonkeyPatch
):
    """On an H100 "default" is what the dispatch table picks, "mma" our mma.sync kernel,
    "own_128x192" (and "_d2", its double-buffered output) and "own_128x96" (each also "_shortk", its
    k-block loops not unrolled, launched with programmatic dependent launch; "own_128x96_pipe" its k
    blocks pipelined) our TMA + wgmma kernel, with "own_128x256" (two 128-column waves per k block),
    "own_128x160", "own_128x112_pipe" and "own_128x128_pipe" (and "_pdl"), "own_128x64" (and "_x2",
    two CTAs per SM), "own_128x32" and the 64-row tiles (one math warpgroup; "_pdl", launched with
    programmatic dependent launch; "_x2", two CTAs per SM) and the swapped "own_swap_" tiles (the
    output stored transposed, a scale per tile column): its 256-, 192-, 160-, 112- and 96-column
    tiles straddle b's 128-column scale blocks and overhang N at most of these N, and most M leave
    64-row tiles and the swapped tiles' last column block part empty."""
    if gemm.backend != "cuda":  # "default" too: the shapes are about the CUDA kernels' tiles
        pytest.skip("GEMM_CUDA_KERNEL chooses between the CUDA build's kernels")
    use_cuda_kernel(kernel, monkeypatch)
    g = torch.Generator().manual_seed(20261122)
    for _ in range(12):
        m = int(torch.randint(1, 2000, (1,), generator=g))
        n = 128 * int(torch.randint(1, 12, (1,), generator=g))
        k = 128 * int(torch.randint(1, 24, (1,), generator=g))
        a, b, a_scale, b_scale = make_inputs(m, n, k, torch.float8_e4m3fn, device, seed=m + n + k)
        out = gemm.gemm(a, b, a_scale, b_scale)
        ref = reference(a.cpu(), b.cpu(), a_scale.cpu(), b_scale.cpu())
        assert relative_error(out.cpu(), ref) < 1e-2, (kernel, m, n, k)


# N past the last whole 128-column scale block, by every remainder a 16-column step leaves that
# the tiles treat differently: 16 and 48 (less than one tile of any width), 2112 (DeepSeek-V3's
# fused q_a/kv_a projection: 64 past 2048), 720 (80 past 640), 1136 (112 past 1024), 1040 (16).
PART_BLOCK_SHAPES = [  # M, N, K
    (1, 16, 128),
    (37, 48, 384),
    (129, 2112, 1024),
    (300, 720, 640),
    (64, 1136, 2048),
    (1000, 1040, 256),
]


@pytest.mark.parametrize("kernel", ["default", "mma", "portable", *OWN_KERNELS])
def test_n_that_is_not_a_multiple_of_128(device: str, kernel: str, monkeypatch: pytest.MonkeyPatch):
    """N any multiple of 16: b_scale's last column covers the N % 128 columns left over. Every
    kernel, b row-major and column-major, against the reference; and nothing is written past out
    (it is the front of a larger buffer whose tail must keep its fill), where tiles overhang N."""
    use_cuda_kernel(kernel, monkeypatch)
    for m, n, k in PART_BLOCK_SHAPES:
        a, b, a_scale, b_scale = make_inputs(m, n, k, torch.float8_e4m3fn, device, seed=m + n)
        assert b_scale.shape == (k // 128, (n + 127) // 128)
        ref = reference(a.cpu(), b.cpu(), a_scale.cpu(), b_scale.cpu())
        for b_operand in (b, b.t().contiguous().t()):
            buffer = torch.full((m * n + 4096,), 3.0, dtype=torch.bfloat16, device=device)
            out = buffer[: m * n].view(m, n)
            gemm.ops.gemm(out, a, b_operand, a_scale, b_scale)
            assert relative_error(out.cpu(), ref) < 1e-2, (kernel, m, n, k, b_operand.stride())
            assert bool((buffer[m * n :] == 3.0).all()), (kernel, m, n, k, "written past out")


def test_cutlass_configurations_refuse_n_that_is_not_a_multiple_of_128(
    device: str, monkeypatch: pytest.MonkeyPatch
):
    """CUTLASS's block-scaled mainloop reads whole scale blocks: named for such an N, one clear
    error, nothing launched."""
    cutlass = [name for name in re.findall(r"^\s*X\((\w+)\)", _CONFIGS_H.read_text(), re.M)
               if not name.startswith("own_")]  # fmt: skip
    use_cuda_kernel(cutlass[0], monkeypatch)
    a, b, a_scale, b_scale = make_inputs(64, 2112, 256, torch.float8_e4m3fn, device, seed=3)
    with pytest.raises(RuntimeError, match="take N a multiple of 128; got N = 2112"):
        gemm.gemm(a, b, a_scale, b_scale)


@pytest.mark.parametrize(
    "kernel",
    ["own_128x128_pipe", "own_128x160", "own_128x96_pipe", "own_128x192", "own_128x64_x2",
     "own_64x128", "own_64x64_x2", "own_swap_144x128"],
)  # fmt: skip
def test_own_kernels_give_the_same_bits_wherever_the_last_row_block_tile_sits(
    device: str, kernel: str, monkeypatch: pytest.MonkeyPatch
):
    """GEMM_SM90_SHIFT places the tile of a last row block that runs past M: in its row block (0),
    moved back to end at row M where that block is less than half full (64-row tiles: wherever
    it is part full; 1, the default), or wherever it is part full (2). 1 and 2 also move the tile
    of a last column block that runs past N back to end at N (at most of these N for the 96-,
    160- and 192-wide tiles), and trim A's boxes to M rows where M is less than one row block,
    the stage's other rows keeping stale data (rows of an earlier k block or tile, or whatever
    shared memory held). A moved tile recomputes rows (columns) of the block before it, and both
    tiles store them: the output must not change by a bit, and must match the reference.
    M = 388: 4 rows in the last 128-row block, 4 in the last 64-row one; 389 and 131: the moved
    tile starts on a multiple of 4, a_scale's TMA alignment, and overhangs M by 3 rows; 100: one
    128-row block, never moved but trimmed, and 36 rows in the last 64-row block (moved by 1
    for 64-row tiles); 160: 32 rows in the last 64-row block, half full; 37 and 77 x 16384, less
    than one block, trimmed, the latter with several tiles per CTA; 1000: 104 of 128, moved
    only by 2 in 128-row tiles; 131 and 4000 with several tiles per CTA. The swapped tiles
    never move (their rows are b's columns). A value outside 0-2 is refused."""
    use_cuda_kernel(kernel, monkeypatch)
    for m, n, k in [(388, 640, 512), (389, 640, 512), (100, 384, 256), (37, 896, 640),
                    (77, 16384, 256), (1000, 1152, 384), (160, 1152, 512), (131, 3072, 1024),
                    (4000, 2048, 256)]:  # fmt: skip
        a, b, a_scale, b_scale = make_inputs(m, n, k, torch.float8_e4m3fn, device, seed=m + n)
        outs = []
        for shift in ("0", "1", "2"):
            monkeypatch.setenv("GEMM_SM90_SHIFT", shift)
            outs.append(gemm.gemm(a, b, a_scale, b_scale))
        ref = reference(a.cpu(), b.cpu(), a_scale.cpu(), b_scale.cpu())
        assert relative_error(outs[0].cpu(), ref) < 1e-2, (kernel, m, n, k)
        assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2]), (kernel, m, n, k)
    monkeypatch.setenv("GEMM_SM90_SHIFT", "3")
    with pytest.raises(RuntimeError, match="GEMM_SM90_SHIFT must be 0, 1 or 2"):
        gemm.gemm(a, b, a_scale, b_scale)


@pytest.mark.parametrize("kernel", OWN_KERNELS)
@pytest.mark.parametrize(
    ("m", "n", "k"), [(1024, 7168, 256), (1000, 4608, 1280), (2999, 2944, 640)]
)
def test_own_kernels_with_several_tiles_per_sm(
    device: str, kernel: str, m: int, n: int, k: int, monkeypatch: pytest.MonkeyPatch
):
    """Our persistent kernel with up to six tiles per CTA (the random shapes above are mostly
    one wave), K up to past its pipeline's stages: the stage ring and its barrier phases carry
    over from tile to tile. A ping-pong variant tried on 2026-11-23 (run 13 of the gemm tuning
    log, `git show c631808:benchmarks/RESULTS.md`) passed the random shapes and crashed at such
    a shape (1024 x 7168 x 512) in the benchmark."""
    use_cuda_kernel(kernel, monkeypatch)
    a, b, a_scale, b_scale = make_inputs(m, n, k, torch.float8_e4m3fn, device, seed=m + n + k)
    out = gemm.gemm(a, b, a_scale, b_scale)
    ref = reference(a.cpu(), b.cpu(), a_scale.cpu(), b_scale.cpu())
    assert relative_error(out.cpu(), ref) < 1e-2, (kernel, m, n, k)


@pytest.mark.parametrize(
    "kernel",
    [
        "default",
        "own_128x192_shortk",
        "own_128x96_shortk",
        "own_64x64_pdl",
        "own_64x64_x2",
        "own_64x96_x2",
        "own_128x112_pipe_pdl",
        "own_128x96_pipe_pdl",
        "own_128x64_x2",
        "own_128x128_pipe_pdl",
    ],
)
def test_back_to_back_calls_wait_for_the_kernels_before_them(
    device: str, kernel: str, monkeypatch: pytest.MonkeyPatch
):
    """The short-K configurations, the _pdl ones and the _x2 ones launch with programmatic dependent
    launch (the _x2 ones also two CTAs per SM, 2-4 tiles each here): a call's CTAs may start while
    the kernel before it in the stream is still finishing, and must not touch memory until it is
    done (griddepcontrol.wait). Here, with no synchronization in between, each call reads an `a`
    that torch's kernels compute from the previous call's output just before it, and the last two
    calls write the same output; every result is checked afterwards."""
    if device != "cuda" or gemm.backend != "cuda":
        pytest.skip("programmatic dependent launch: the CUDA build on a CUDA device")
    use_cuda_kernel(kernel, monkeypatch)
    m, n, k = 512, 7168, 256  # short K; 1-4 tiles per SM (CTA)
    fp8 = torch.float8_e4m3fn

    def next_a(out: torch.Tensor) -> torch.Tensor:
        """The next call's a: the previous output's first k columns, scaled into fp8's range."""
        previous = out[:, :k].float()
        return (previous * (200 / previous.abs().amax().clamp_min(1))).to(fp8)

    a, b, a_scale, b_scale = make_inputs(m, n, k, fp8, device, seed=77)
    steps = [(a, gemm.gemm(a, b, a_scale, b_scale))]
    for _ in range(4):
        a = next_a(steps[-1][1])
        steps.append((a, gemm.gemm(a, b, a_scale, b_scale)))
    shared = torch.empty(m, n, dtype=torch.bfloat16, device=device)
    other = make_inputs(m, n, k, fp8, device, seed=78)
    gemm.gemm(*other, out=shared)
    gemm.gemm(a, b, a_scale, b_scale, out=shared)
    torch.cuda.synchronize()

    b, a_scale, b_scale = b.cpu(), a_scale.cpu(), b_scale.cpu()
    for i, (a_i, out_i) in enumerate(steps):
        if i > 0:  # the input torch derived from the call before, recomputed on the CPU
            expected_a = next_a(steps[i - 1][1].cpu())
            assert torch.equal(a_i.cpu().view(torch.uint8), expected_a.view(torch.uint8)), i
        ref = reference(a_i.cpu(), b, a_scale, b_scale)
        assert relative_error(out_i.cpu(), ref) < 1e-2, (kernel, i)
    assert torch.equal(shared.cpu(), steps[-1][1].cpu()), kernel


@pytest.mark.parametrize(
    ("m", "n", "k"),
    # On an H100 these take each branch of gemm_sm90.cu's table: at short K two CTAs per SM of
    # 64 x 96 tiles (M = 130 also pads a_scale) and of 128 x 64 (256 x 7168 x 512), and our own
    # 192-wide tiles, all with programmatic dependent launch; at longer K the 192-wide ones without
    # and with the unrolled turns, the 96-wide ones pipelined (three waves) and unrolled (four or
    # more, 4676 x 2304, where our 128 x 128 tiles' waves would hold more columns; at 6144 x 1024
    # those take over), our 128 x 128 tiles in one wave and in several (with programmatic dependent
    # launch below K = 2048 and in one wave to K = 3072, without it at 1024 x 2048 x 4096), the
    # 128 x 256 tiles, and for small M the few-tiles rule's 64 x 32 (M = 32 and 128), 128 x 64,
    # 64 x 16, 64 x 64, 64 x 128, 64 x 48, 64 x 96, 128 x 192 (one wave of them, where the 192-wide
    # rule below wants fuller waves) and 128 x 160; our 128 x 112 tiles in one full wave (with
    # programmatic dependent launch, 256 x 7168 x 2048) and in two (the few-tiles rule) and in three
    # (768 x 7168, where 128 x 128 tiles would be three less full waves), 128 x 160 in three where
    # 128 x 128 tiles make four, 64 x 96 at M = 192 (no 128-row tiles there) and 64 x 64 in two CTAs
    # per SM at M = 64 with short K. At M <= 64 the 64-row tiles launch with programmatic dependent
    # launch (their _pdl configurations): the last eight shapes take 64 x 16 and 64 x 128 without it
    # (M = 192) and 64 x 48, 64 x 64 and 64 x 96 with it, two CTAs per SM of 64 x 64 at M = 48 (a
    # part-empty row block) and, with short K, 128 x 64 in two CTAs per SM at 512 x 7168 (the
    # fullest waves) and the 96-wide 128-row tiles at 768 x 7168 (three waves or more); 64 x 64 at
    # 136 x 2560 x 1664 (the few-tiles rule's 64-row tiles below K = 2048); the 96-wide 128-row
    # tiles with programmatic dependent launch at 100 x 9984 (M <= 128, A's boxes trimmed to its
    # 100 rows). The last five take the
    # swapped tiles, 80 to 192 output rows wide, the output stored transposed (M = 65, 147 and 177
    # also pad a_scale).
    [
        (130, 384, 512),
        (2048, 4608, 512),
        (256, 7168, 512),
        (6144, 1536, 1024),
        (6144, 1536, 2048),
        (256, 1024, 1024),
        (1024, 2048, 1024),
        (1024, 7168, 1024),
        (1024, 2048, 4096),
        (3072, 4096, 2048),
        (1024, 4608, 2048),
        (6144, 1024, 2048),
        (4676, 2304, 2048),
        (32, 4096, 2048),
        (128, 2048, 4096),
        (256, 4096, 4096),
        (64, 2048, 4096),
        (96, 4096, 4096),
        (64, 16384, 2048),
        (192, 2048, 4096),
        (320, 2048, 4096),
        (320, 7168, 2048),
        (512, 5120, 2048),
        (256, 7168, 2048),
        (768, 4608, 2048),
        (768, 7168, 2048),
        (1024, 7168, 2048),
        (192, 6144, 2048),
        (64, 16384, 512),
        (192, 256, 4096),
        (192, 16384, 2048),
        (64, 4608, 2048),
        (64, 7168, 512),
        (48, 24576, 512),
        (48, 12288, 2048),
        (512, 7168, 256),
        (768, 7168, 256),
        (136, 2560, 1664),
        (100, 9984, 2048),
        (65, 14848, 2048),
        (130, 12672, 2048),
        (147, 12928, 2048),
        (514, 5120, 2048),
        (177, 25600, 2048),
    ],
)
def test_cuda_graph_replays_the_op_on_new_inputs(device: str, m: int, n: int, k: int):
    """Inference engines capture the op into a CUDA graph and replay it on new data written into
    the same tensors: every launch, workspace and scale copy must be captured, none done once."""
    if device != "cuda" or gemm.backend != "cuda":
        pytest.skip("CUDA graphs: the CUDA build on a CUDA device")
    fp8 = torch.float8_e4m3fn
    inputs = make_inputs(m, n, k, fp8, device, seed=m + k)
    out = torch.empty(m, n, dtype=torch.bfloat16, device=device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture, as torch asks
        gemm.ops.gemm(out, *inputs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemm.ops.gemm(out, *inputs)
    for seed in (1, 2):
        fresh = make_inputs(m, n, k, fp8, device, seed=seed)
        for captured, new in zip(inputs, fresh, strict=True):
            captured.copy_(new)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref = reference(*(t.cpu() for t in fresh))
        assert relative_error(out.cpu(), ref) < 1e-2, (m, n, k, seed)
