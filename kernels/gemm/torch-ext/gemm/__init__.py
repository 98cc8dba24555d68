"""FP8 block-scaled GEMM: out = (a * a_scale) @ (b * b_scale) in bfloat16.

Scaling is per 128-wide block of K: a_scale[k // 128, m] for a's row m (1 x 128 blocks), and
b_scale[k // 128, n // 128] for b (128 x 128 blocks); products accumulate in float32. The scales
multiply each block's partial sum (see gemm.reference), so an infinite scale gives +-inf, or NaN
where the block sum is 0.
"""

from __future__ import annotations

import torch

from ._ops import add_op_namespace_prefix, backend, ops

__all__ = ["backend", "gemm", "ops"]

# gemm.reference.gemm_reference: the same computation in float64, for tests and benchmarks.


def gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    a_scale: torch.Tensor,
    b_scale: torch.Tensor,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """out[m, n] = sum_k a[m, k] b[k, n] a_scale[k // 128, m] b_scale[k // 128, n // 128].

    a: (M, K) and b: (K, N) float8_e4m3fnuz or float8_e4m3fn; a_scale: (K/128, M) and
    b_scale: (K/128, ceil(N/128)) float32 (the last column of b's scale blocks covers the
    N % 128 columns left over, if any); out: (M, N) bfloat16, allocated when not given.
    K must be a multiple of 128, N of 16, 1 <= M <= 4194240. b may be row-major or column-major
    (w.t() for w stored (N, K): no copy on the GPU tensor-core paths); every tensor's data must
    start 16-byte aligned.
    """
    if out is None:
        if a.dim() != 2 or b.dim() != 2:
            raise ValueError(f"gemm: a and b must be 2-D, got shapes {a.shape} and {b.shape}")
        out = torch.empty((a.shape[0], b.shape[1]), dtype=torch.bfloat16, device=a.device)
    ops.gemm(out, a, b, a_scale, b_scale)
    return out


@torch.library.register_fake(add_op_namespace_prefix("gemm"))
def _gemm_fake(
    out: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    a_scale: torch.Tensor,
    b_scale: torch.Tensor,
) -> None:
    # The op writes into `out` and returns nothing; tracing only needs the shapes to agree.
    torch._check(out.shape == (a.shape[0], b.shape[1]), lambda: "gemm: out must be (M, N)")
    torch._check(out.dtype == torch.bfloat16, lambda: "gemm: out must be bfloat16")
