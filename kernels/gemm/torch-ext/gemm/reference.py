"""What gemm computes, written plainly in float64: the reference tests and benchmarks compare to."""

from __future__ import annotations

import torch


def dequantize(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor):
    """a * a_scale (1 x 128 blocks) and b * b_scale (128 x 128 blocks), in float64."""
    a64 = a.double() * a_scale.double().t().repeat_interleave(128, dim=1)
    b_full = b_scale.double().repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)
    return a64, b.double() * b_full


def gemm_reference(
    a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor
) -> torch.Tensor:
    """out[m, n] = sum_k a[m, k] b[k, n] a_scale[k // 128, m] b_scale[k // 128, n // 128]."""
    a64, b64 = dequantize(a, a_scale, b, b_scale)
    return a64 @ b64
