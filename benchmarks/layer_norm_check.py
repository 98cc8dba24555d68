"""kernels-community's layer-norm, built by build2cmake, loaded through `kernels` and checked
against torch's LayerNorm at every hidden size its instantiation files register (issue #61:
its registrars fill a map that ln_api.cpp defines, at load, in link order; the project has no
tests of its own, so this is the check that the objects link in build.toml's order).

    python benchmarks/layer_norm_check.py PROJECT_DIR   # the folder holding build/<variant>/

Prints one line per hidden size and dtype (largest absolute difference) and exits 1 on a miss.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

import kernels

HIDDEN = (256, 512, 768, 1024, 1280, 1536, 2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192)


def main(project: Path) -> int:
    layer_norm = kernels.get_local_kernel(project)
    print("loaded through kernels:", layer_norm.__name__, flush=True)
    torch.manual_seed(0)
    failed = 0
    for dtype in (torch.float16, torch.bfloat16):
        for hidden in HIDDEN:
            x = torch.randn(64, hidden, device="cuda", dtype=dtype)
            gamma = torch.randn(hidden, device="cuda", dtype=dtype)
            beta = torch.randn(hidden, device="cuda", dtype=dtype)
            expected = torch.nn.functional.layer_norm(
                x.float(), (hidden,), gamma.float(), beta.float(), 1e-5
            )
            out = layer_norm.dropout_add_ln_fwd(
                input=x,
                gamma=gamma,
                beta=beta,
                rowscale=None,
                colscale=None,
                x0_subset=None,
                z_subset=None,
                dropout_p=0.0,
                epsilon=1e-5,
                rowscale_const=1.0,
                z_numrows=0,
                gen=None,
                residual_in_fp32=False,
                is_rms_norm=False,
            )[0]
            error = (out.float() - expected).abs().max().item()
            # Four units in the last place of the output's type, at its largest magnitude.
            ok = error <= 4 * torch.finfo(dtype).eps * max(1.0, expected.abs().max().item())
            failed += not ok
            print(f"{dtype!s:15} hidden {hidden:5}: max |diff| {error:.2e}", "ok" if ok else "MISS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
