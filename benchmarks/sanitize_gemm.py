"""Calls gemm at awkward shapes for compute-sanitizer (memcheck, racecheck) to watch.

compute-sanitizer --tool memcheck python benchmarks/sanitize_gemm.py
"""

from __future__ import annotations

import os

import gemm
import torch
from gemm.reference import gemm_reference

# M = 1, M not a multiple of any tile, K = one scale block, N one and several tiles.
SHAPES = [(1, 128, 128), (37, 256, 384), (130, 384, 256), (129, 128, 1024)]

for kernel in ("default", "mma"):  # on an H100: the CUTLASS kernel, then our mma.sync one
    if kernel == "mma":
        os.environ["GEMM_CUDA_KERNEL"] = "mma"
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(k, n, device="cuda").to(torch.float8_e4m3fn)
        sa = torch.rand(k // 128, m, device="cuda") + 0.5
        sb = torch.rand(k // 128, n // 128, device="cuda") + 0.5
        out = gemm.gemm(a, b, sa, sb)
        torch.cuda.synchronize()
        ref = gemm_reference(a, b, sa, sb)
        error = ((out.double() - ref).norm() / ref.norm()).item()
        print(f"{kernel} {m}x{n}x{k}: relative error {error:.2e}")
        assert error < 1e-2
print("sanitize_gemm: done")
