"""Tests of the gemm op against a float64 reference, on whichever backend this build has.

Run after building: pip install --no-build-isolation -e kernels/gemm && pytest kernels/gemm/tests
"""

from __future__ import annotations

import gemm
import pytest
import torch
from gemm.reference import dequantize
from gemm.reference import gemm_reference as reference

FP8_FORMATS = [torch.float8_e4m3fnuz, torch.float8_e4m3fn]


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


def supported(fp8: torch.dtype) -> bool:
    # NVIDIA GPUs take only the OCP format; the CPU and ROCm paths take both.
    return not (gemm.backend == "cuda" and fp8 == torch.float8_e4m3fnuz)


def make_inputs(m: int, n: int, k: int, fp8: torch.dtype, device: str, seed: int):
    """Random fp8 operands spanning the format's range, and non-trivial positive scales."""
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(m, k, generator=g) * 4).clamp(-200, 200).to(fp8)
    b = (torch.randn(k, n, generator=g) * 4).clamp(-200, 200).to(fp8)
    a_scale = torch.exp(torch.randn(k // 128, m, generator=g))
    b_scale = torch.exp(torch.randn(k // 128, n // 128, generator=g))
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
@pytest.mark.parametrize(("m", "n", "k"), [(1024, 1536, 7168), (6144, 7168, 2304)])
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
            (out[:, :200], a, b[:, :200], sa, sb[:, :1]),
            "gemm: N = b.size(1) must be a positive multiple of 128",
        ),
        ((out, a, b[:128], sa, sb), "gemm: b must have shape (K, N)"),
        ((out, a, b, sa.t(), sb), "gemm: a_scale must have shape (K/128, M)"),
        ((out, a, b, sa, sb.double()), "gemm: b_scale must be float32"),
        ((out, a, b, sa, sb[:, :1]), "gemm: b_scale must have shape (K/128, N/128)"),
        ((out.float(), a, b, sa, sb), "gemm: out must be bfloat16"),
        ((out[:2], a, b, sa, sb), "gemm: out must have shape (M, N)"),
        ((out, a[:0], b, sa[:, :0], sb), "gemm: a must have at least one row"),
        ((out, a.unsqueeze(0), b, sa, sb), "gemm: a must be 2-D"),
        ((out, a, b.t().contiguous().t(), sa, sb), "gemm: b must be contiguous"),
    ]
    for args, message in cases:
        before = out.clone()
        with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
            gemm.ops.gemm(*args)
        assert torch.equal(out, before), message


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


@pytest.mark.parametrize("kernel", ["default", "mma"])
def test_cuda_kernels_match_the_reference_at_random_shapes(
    device: str, kernel: str, monkeypatch: pytest.MonkeyPatch
):
    """On an H100 "default" is the CUTLASS (TMA + wgmma) kernel, "mma" our mma.sync kernel."""
    if gemm.backend != "cuda":
        pytest.skip("GEMM_CUDA_KERNEL chooses between the CUDA build's kernels")
    if kernel == "mma":
        monkeypatch.setenv("GEMM_CUDA_KERNEL", "mma")
    g = torch.Generator().manual_seed(20261122)
    for _ in range(12):
        m = int(torch.randint(1, 2000, (1,), generator=g))
        n = 128 * int(torch.randint(1, 12, (1,), generator=g))
        k = 128 * int(torch.randint(1, 24, (1,), generator=g))
        a, b, a_scale, b_scale = make_inputs(m, n, k, torch.float8_e4m3fn, device, seed=m + n + k)
        out = gemm.gemm(a, b, a_scale, b_scale)
        ref = reference(a.cpu(), b.cpu(), a_scale.cpu(), b_scale.cpu())
        assert relative_error(out.cpu(), ref) < 1e-2, (kernel, m, n, k)
