"""Where the host's time per gemm call goes on a CUDA GPU: CPU microseconds per call of the op
and of the pieces around it, each timed over enough calls that the GPU runs behind.

Run (after `pip install --no-build-isolation -e kernels/gemm` with a CUDA torch):
    python benchmarks/host_overhead.py [M,N,K]

Rows: torch.empty of the output; a native op through torch.ops (aten.add_ on two small tensors:
the cost of any op call from Python); our op through the packet (`ops.gemm`) and through its
overload (`ops.gemm.default`); our mma.sync kernel (GEMM_CUDA_KERNEL=mma: a plain <<<>>>
launch, no CUTLASS parameters), and each CUTLASS configuration (TMA descriptors, cluster launch).
The differences between rows are the costs of the layers.
"""

from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Callable

import gemm
import torch
from gemm_cuda import host_us  # this folder: run as python benchmarks/host_overhead.py


def cpu_us(call: Callable[[], object], count: int = 300, rounds: int = 5) -> float:
    """Median over `rounds` of gemm_cuda.host_us (the queue of launches stays short enough that
    the host never waits for the GPU: the GPU work per call is at most a few us)."""
    return statistics.median(host_us([call], count) for _ in range(rounds))


def main() -> None:
    m, n, k = (int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "128,256,256").split(","))
    assert gemm.backend == "cuda" and torch.cuda.is_available(), "needs the cuda build and a GPU"
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda", generator=g).to(torch.float8_e4m3fn).t()
    a_scale = torch.rand(k // 128, m, device="cuda", generator=g) + 0.5
    b_scale = torch.rand(k // 128, -(-n // 128), device="cuda", generator=g) + 0.5
    out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    x, y = torch.ones(16, device="cuda"), torch.ones(16, device="cuda")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {m} x {n} x {k}")
    rows: list[tuple[str, Callable[[], object]]] = [
        ("torch.empty (M, N) bf16", lambda: torch.empty(m, n, dtype=torch.bfloat16, device="cuda")),
        ("torch.ops.aten.add_ (16 floats)", lambda: torch.ops.aten.add_(x, y)),
        ("ops.gemm (packet), table's choice", lambda: gemm.ops.gemm(out, a, b, a_scale, b_scale)),
        ("ops.gemm.default (overload)", lambda: gemm.ops.gemm.default(out, a, b, a_scale, b_scale)),
        ("gemm.gemm (wrapper, allocates out)", lambda: gemm.gemm(a, b, a_scale, b_scale)),
    ]
    for name, call in rows:
        print(f"{name:<48} {cpu_us(call):6.1f} us")
    os.environ["GEMM_CUDA_KERNEL"] = "mma"
    print(f"{'ops.gemm, GEMM_CUDA_KERNEL=mma (<<<>>> launch)':<48} "
          f"{cpu_us(lambda: gemm.ops.gemm(out, a, b, a_scale, b_scale)):6.1f} us")  # fmt: skip
    del os.environ["GEMM_CUDA_KERNEL"]
    configs = os.environ.get("CONFIGS", "").split()
    for config in configs:
        os.environ["GEMM_SM90_CONFIG"] = config
        print(f"{'ops.gemm, ' + config:<48} "
              f"{cpu_us(lambda: gemm.ops.gemm(out, a, b, a_scale, b_scale)):6.1f} us")  # fmt: skip
    os.environ.pop("GEMM_SM90_CONFIG", None)


if __name__ == "__main__":
    main()
