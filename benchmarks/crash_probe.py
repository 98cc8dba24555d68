"""Each bad-argument call of kernels/gemm's tests, one by one, to find one that crashes."""

from __future__ import annotations

import gemm
import torch

fp8 = torch.float8_e4m3fn
a = torch.randn(4, 256, device="cuda").to(fp8)
b = torch.randn(256, 256, device="cuda").to(fp8)
sa, sb = torch.ones(2, 4, device="cuda"), torch.ones(2, 2, device="cuda")
out = torch.zeros(4, 256, dtype=torch.bfloat16, device="cuda")
cases = {
    "a float32": (out, a.float(), b, sa, sb),
    "b e5m2": (out, a, b.view(torch.float8_e5m2), sa, sb),
    "K 200": (out, a[:, :200], b, sa, sb),
    "out float": (out.float(), a, b, sa, sb),
    "M 0": (out, a[:0], b, sa[:, :0], sb),
    "a 3-D": (out, a.unsqueeze(0), b, sa, sb),
}
for name, args in cases.items():
    print(name, "...", flush=True)
    try:
        gemm.ops.gemm(*args)
        print("  no error!", flush=True)
    except RuntimeError as error:
        print("  raised:", str(error).splitlines()[0], flush=True)
