"""Calls gemm at awkward shapes for compute-sanitizer (memcheck, racecheck, synccheck, initcheck).

compute-sanitizer --tool memcheck python benchmarks/sanitize_gemm.py [KERNEL ...]

KERNEL is "default" (what the dispatch table picks), "mma" (our mma.sync kernel), "portable" (the
kernel every GPU runs) or the name of a configuration (GEMM_SM90_CONFIG); without any: default and
mma. Every shape runs with b column-major (read as it is) and row-major (through our transpose
kernel); N that is not a multiple of 128 (the last two shapes) on all kernels but CUTLASS's.
"""

from __future__ import annotations

import os
import sys

import gemm
import torch
from gemm.reference import gemm_reference

# M = 1, M not a multiple of any tile, K = one scale block, K past the pipeline's stages (the
# smem ring wraps), N one and several tiles; 160, a last 64-row block half full (our kernel's
# 64-row tiles move its tile back to end at M, the 128-row ones theirs, a quarter full); the
# last, about two tiles per SM of every configuration, so that a persistent CTA moves on to a
# next tile (ping-pong: the other math warpgroup's) with K past the stages. Then N past its last
# whole scale block: 48 (less than any tile), 2112 (64 past 2048, DeepSeek-V3's q_a/kv_a).
SHAPES = [
    (1, 128, 128),
    (37, 256, 384),
    (130, 384, 256),
    (129, 128, 1024),
    (160, 384, 512),
    (200, 256, 2048),
    (600, 4608, 640),
    (37, 48, 384),
    (300, 2112, 1024),
]

kernels = sys.argv[1:] or ["default", "mma"]
for kernel in kernels:
    os.environ.pop("GEMM_CUDA_KERNEL", None)
    os.environ.pop("GEMM_SM90_CONFIG", None)
    if kernel in ("mma", "portable"):
        os.environ["GEMM_CUDA_KERNEL"] = kernel
    elif kernel != "default":
        os.environ["GEMM_SM90_CONFIG"] = kernel
    cutlass = kernel not in ("default", "mma", "portable") and not kernel.startswith("own_")
    for m, n, k in SHAPES:
        if cutlass and n % 128 != 0:
            continue
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        sa = torch.rand(k // 128, m, device="cuda") + 0.5
        sb = torch.rand(k // 128, -(-n // 128), device="cuda") + 0.5
        ref = gemm_reference(a, w.t(), sa, sb)
        for layout, b in (("b column-major", w.t()), ("b row-major", w.t().contiguous())):
            # out starts as NaN written by an ordinary kernel: every element the GEMM leaves
            # unwritten stays NaN. (initcheck does not see the CUTLASS epilogue's TMA stores as
            # writes; with out from torch.empty it flags the reads of out afterwards.)
            out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
            gemm.gemm(a, b, sa, sb, out=out)
            torch.cuda.synchronize()
            assert not out.isnan().any(), f"{kernel} {m}x{n}x{k}: elements left unwritten"
            error = ((out.double() - ref).norm() / ref.norm()).item()
            print(f"{kernel} {m}x{n}x{k} {layout}: relative error {error:.2e}", flush=True)
            assert error < 1e-2
print("sanitize_gemm: done")
