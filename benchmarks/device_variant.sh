#!/usr/bin/env bash
# On a CUDA machine (an H100 without network): build kernels/gemm through
# `build2cmake build --variants` for the variant of the torch installed there, then load it with
# kernels.get_local_kernel as a Hub user would and run it against the float64 reference.
# Run from the repository root. Wheels the machine lacks travel in .whl/ (not committed), e.g.
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp -d .whl \
#     tomlkit==0.15.2 nvidia-cutlass==4.2.0.0 kernels==0.17.2 huggingface_hub hf-xet
# (kernels and what it imports only where the machine does not have them).
set -euo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PIP_ROOT_USER_ACTION=ignore
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD
# The variant kernels looks for with this torch: torch<major>.<minor>-cu<torch.version.cuda>.
VARIANT=$(python3 -c "import torch; t = torch.__version__.split('.'); c = torch.version.cuda.split('.'); print(f'torch{t[0]}.{t[1]}-cu{c[0]}{c[1]}')")
echo "torch variant: $VARIANT; nvcc: $(nvcc --version | tail -1)"

rm -rf /tmp/gemm && cp -r kernels/gemm /tmp/gemm && rm -rf /tmp/gemm/build
start=$SECONDS
python3 -m build2cmake build /tmp/gemm/build.toml --variants "$VARIANT" --no-isolation \
  -j "$(nproc)" 2>&1 | tee "$OUT/variant.log"
echo "cold build: $((SECONDS - start)) s"
start=$SECONDS
python3 -m build2cmake build /tmp/gemm/build.toml --variants "$VARIANT" --no-isolation \
  -j "$(nproc)" | tail -3
echo "warm build: $((SECONDS - start)) s"
ls /tmp/gemm/build
cp /tmp/gemm/build/cmake-"$VARIANT".log "$OUT/" || true

cd /
python3 - <<'EOF'
import importlib
import time
from pathlib import Path

import torch
from kernels import get_local_kernel

gemm = get_local_kernel(Path("/tmp/gemm"))
print("loaded", Path(gemm.__file__).parent.name, "backend", gemm.backend, gemm.ops.__name__)
m, n, k = 1024, 1536, 7168
g = torch.Generator().manual_seed(0)
a = (torch.randn(m, k, generator=g) * 4).to(torch.float8_e4m3fn)
b = (torch.randn(k, n, generator=g) * 4).to(torch.float8_e4m3fn)
a_scale = torch.exp(torch.randn(k // 128, m, generator=g))
b_scale = torch.exp(torch.randn(k // 128, n // 128, generator=g))
inputs = [t.cuda() for t in (a, b, a_scale, b_scale)]
out = gemm.gemm(*inputs)
torch.cuda.synchronize()
start = time.perf_counter()
for _ in range(10):
    gemm.gemm(*inputs, out=out)
torch.cuda.synchronize()
seconds = (time.perf_counter() - start) / 10
# The variant's own reference module, under the name kernels imported the package as.
reference = importlib.import_module(gemm.__name__ + ".reference")
ref = reference.gemm_reference(a, b, a_scale, b_scale)
diff = out.cpu().double() - ref
rel = (diff.norm() / ref.norm()).item()
print(f"{m}x{n}x{k}: rel. Frobenius error {rel:.3e}, {seconds * 1e3:.3f} ms, "
      f"{2 * m * n * k / seconds / 1e12:.1f} TFLOP/s")
assert rel < 1e-2, rel
EOF
