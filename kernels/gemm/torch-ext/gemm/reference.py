"""What gemm computes, written plainly in float64: the reference tests and benchmarks compare to."""

from __future__ import annotations

import torch


def dequantize(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor):
    """a * a_scale (1 x 128 blocks) and b * b_scale (128 x 128 blocks, the last column of blocks
    part full where N % 128 != 0), in float64."""
    a64 = a.double() * a_scale.double().t().repeat_interleave(128, dim=1)
    b_full = b_scale.double().repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)
    return a64, b.double() * b_full[:, : b.shape[1]]


def gemm_reference(
    a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor
) -> torch.Tensor:
    """out[m, n] = sum_kb (a_scale[kb, m] b_scale[kb, n // 128]) sum_{k in kb} a[m, k] b[k, n].

    The scales multiply each 128-wide block's partial sum, as every backend's kernel does. With
    finite scales this equals dequantising first (``dequantize(...)`` then a matmul); with an
    infinite scale it does not: a finite block sum times inf is +-inf (NaN when the block sum is
    0, or when +inf and -inf terms meet), where the dequantised form would give NaN whenever a
    row holds a zero or both signs.
    """
    k_blocks = a.shape[1] // 128
    a64, b64 = a.double(), b.double()
    # (K/128, N): b_scale has ceil(N/128) columns, the last one covering N % 128 columns or 128.
    b_scale64 = b_scale.double().repeat_interleave(128, dim=1)[:, : b.shape[1]]
    out = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64, device=a.device)
    for kb in range(k_blocks):
        block = slice(kb * 128, (kb + 1) * 128)
        scale = a_scale[kb].double()[:, None] * b_scale64[kb][None, :]
        out += scale * (a64[:, block] @ b64[block])
    return out
