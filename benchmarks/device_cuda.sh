#!/usr/bin/env bash
# One batch on a CUDA machine (the device tool's H100): build kernels/gemm with build2cmake,
# run its tests, the benchmark and compute-sanitizer. Writes logs and RESULTS.md under $OUT.
# Run from the repository root; wheels missing there travel in .whl/ (not committed):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     -d .whl tomlkit==0.15.2 nvidia-cutlass==4.2.0.0
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PIP_ROOT_USER_ACTION=ignore
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, scikit_build_core, cmake; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'skbuild-core', scikit_build_core.__version__)"
nvcc --version | tail -1

rm -rf /tmp/gemm && cp -r kernels/gemm /tmp/gemm && rm -rf /tmp/gemm/build
python3 -m build2cmake generate-torch /tmp/gemm/build.toml
start=$SECONDS
python3 -m pip install -q --no-build-isolation --no-deps -e /tmp/gemm > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; exit 1; }
echo "cold build: $((SECONDS - start)) s"
cuobjdump --list-elf --list-ptx /tmp/gemm/build/cmake/install/platlib/gemm/*.so
# Toolchain facts for the notes (host compiler; whether libstdc++ got into the extension).
echo "g++: $(g++ --version | head -1) at $(command -v g++); LDFLAGS='${LDFLAGS:-}' CXXFLAGS='${CXXFLAGS:-}'"
echo "libstdc++ symbols defined in the extension: $(nm -D -C --defined-only /tmp/gemm/build/cmake/install/platlib/gemm/*.so | grep -c 'std::basic_ostream')"
grep -m1 -o "LINK_FLAGS = .*" /tmp/gemm/build/cmake/build.ninja
grep -A1 "CXX_MODULE_LIBRARY_LINKER__" /tmp/gemm/build/cmake/CMakeFiles/rules.ninja | grep -m1 command
python3 -c "import torch, re; maps = open('/proc/self/maps').read(); print('process libstdc++:', sorted(set(re.findall(r'\S*libstdc\+\+\S*', maps))))"

python3 -m pytest -q -p no:cacheprovider -rs /tmp/gemm/tests 2>&1 | tee "$OUT/tests.log" | tail -8
if [ "${PIPESTATUS[0]}" -ne 0 ]; then
  echo "== kernel tests failed: bad-argument calls one by one, under cuda-gdb for a backtrace"
  cuda-gdb -batch -ex run -ex bt --args python3 benchmarks/crash_probe.py 2>&1 \
    | grep -vE "^\[(New|Thread|Detaching)" | tail -40
fi
python3 benchmarks/gemm_cuda.py --out "$OUT/RESULTS.md" 2>&1 | tee "$OUT/bench.log" | tail -12
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 7 python3 benchmarks/sanitize_gemm.py \
    > "$OUT/sanitizer-$tool.log" 2>&1
  echo "compute-sanitizer $tool: exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer-$tool.log") clean summaries)"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|relative error" "$OUT/sanitizer-$tool.log" | tail -5
done
