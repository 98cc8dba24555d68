#!/usr/bin/env bash
# The main job: set up, generate kernels/gemm's build with build2cmake, compile its ROCm backend
# (when a ROCm toolchain is installed: code objects per arch, no GPU needed) and its CPU backend,
# then run the op at a seed shape and report backend, archs, error and time per call.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export PIP_ROOT_USER_ACTION=ignore
bash scripts/setup.sh

echo "== build2cmake generate-torch kernels/gemm/build.toml"
"$PYTHON" -m build2cmake generate-torch kernels/gemm/build.toml

if command -v hipconfig >/dev/null || [ -x /opt/rocm/bin/hipconfig ]; then
  hipconfig=$(command -v hipconfig || echo /opt/rocm/bin/hipconfig)
  rocm_version=$("$hipconfig" --version 2>/dev/null | cut -d- -f1)
  # Each kernel gets the archs of its rocm-archs this compiler supports (gfx942 needs ROCm >= 5.7;
  # Debian 12's 5.2 builds gfx90a and gfx940); configure names the ones it leaves out.
  echo "== compiling the rocm backend (ROCm $rocm_version): pip wheel --no-build-isolation"
  start=$SECONDS
  "$PYTHON" -m pip wheel -v --no-build-isolation --no-deps kernels/gemm -w kernels/gemm/build/wheels \
    -C cmake.define.BUILD2CMAKE_BACKEND=rocm -C build-dir=build/cmake-rocm 2>&1 \
    | { grep -E "build2cmake: (kernel_|ROCm)" || true; } | sed 's/^ */   /' 
  echo "   built in $((SECONDS - start)) s"
  "$PYTHON" - <<'PY'
import pathlib, tempfile, zipfile
from build2cmake.toolchains.offload import rocm_targets
wheel = max(pathlib.Path("kernels/gemm/build/wheels").glob("gemm-*.whl"), key=lambda p: p.stat().st_mtime)
with zipfile.ZipFile(wheel) as z, tempfile.TemporaryDirectory() as tmp:
    (name,) = [n for n in z.namelist() if n.endswith(".so")]
    so = pathlib.Path(z.extract(name, tmp))
    print(f"   {wheel.name}: {name} carries code objects for {', '.join(rocm_targets(so))}")
PY
  echo "   (no ROCm GPU here to run it; the CPU backend runs below)"
else
  echo "== no ROCm toolchain found (hipconfig): skipping the rocm backend, building the CPU path"
  rocm_version=0
fi

# gfx942 with ROCm 6.4: when this machine's ROCm is older than 5.7, build every arch of
# build.toml in the Debian sid chroot of scripts/rocm-chroot.sh (made once per machine, cached;
# B2C_ROCM_CHROOT=0 skips it).
if [ "$(printf '%s\n5.7\n' "$rocm_version" | sort -V | head -1)" != "5.7" ] \
    && [ "${B2C_ROCM_CHROOT:-1}" != 0 ] && [ "$(id -u)" -eq 0 ]; then
  start=$SECONDS
  if chroot_info=$(bash scripts/rocm-chroot.sh ensure); then
    echo "== compiling the rocm backend, gfx942 included, in the chroot"
    echo "   $chroot_info, made or found in $((SECONDS - start)) s"
    start=$SECONDS
    bash scripts/rocm-chroot.sh run -- python -m pip wheel -q --no-build-isolation --no-deps \
      kernels/gemm -w kernels/gemm/build/wheels-chroot -C cmake.define.BUILD2CMAKE_BACKEND=rocm \
      -C build-dir=build/cmake-rocm-chroot
    echo "   built in $((SECONDS - start)) s"
    bash scripts/rocm-chroot.sh run -- python - <<'PY'
import pathlib, tempfile, zipfile
from build2cmake.toolchains.offload import hip_bundles
wheel = max(pathlib.Path("kernels/gemm/build/wheels-chroot").glob("gemm-*.whl"), key=lambda p: p.stat().st_mtime)
with zipfile.ZipFile(wheel) as z, tempfile.TemporaryDirectory() as tmp:
    (name,) = [n for n in z.namelist() if n.endswith(".so")]
    bundles = hip_bundles(pathlib.Path(z.extract(name, tmp)))
ids = sorted(c.bundle_id for b in bundles for c in b.code_objects)
packed = "compressed (--offload-compress)" if all(b.compressed for b in bundles) else "uncompressed"
print(f"   {wheel.name}: code objects {', '.join(ids)}; {packed}")
PY
  else
    echo "== no ROCm chroot could be made (see above): gfx942 was not built"
  fi
fi

echo "== compiling the cpu backend: pip install --no-build-isolation -e kernels/gemm"
start=$SECONDS
"$PYTHON" -m pip install -q --no-build-isolation --no-deps -e kernels/gemm
echo "   built in $((SECONDS - start)) s"
echo "== running gemm"
"$PYTHON" kernels/gemm/example.py
