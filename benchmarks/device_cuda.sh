#!/usr/bin/env bash
# One batch on a CUDA machine (an H100 without network): build kernels/gemm with build2cmake, run
# its tests (SKIP_TESTS=1: not), then the stages MODE (first argument) names, or $STAGES
# (space-separated):
#   final    = sanitize bench: compute-sanitizer's memcheck, racecheck, synccheck and initcheck
#              ($SANITIZE_TOOLS to choose), on $SANITIZE_KERNELS (default: the table's choice,
#              mma and every own_ configuration, up to ~8 minutes per tool: one or two tools per
#              10-minute run), then the benchmark (ours, cuBLAS, and DeepGEMM when DEEPGEMM names
#              its source; $BENCH_ARGS to choose shapes, at most $BENCH_TIMEOUT s, default 330)
#   explore  = explore ncu race: every configuration and tile order at every shape
#              ($EXPLORE_SHAPES: M,N,K;... to choose them; $EXPLORE_CONFIGS, EXPLORE_ORDERS=0:
#              see benchmarks/gemm_cuda.py), ncu profiles, the racecheck
#              reproduction (benchmarks/racecheck_repro.cu) and racecheck per configuration
#   pair     = ncu (full set) of ours and DeepGEMM at $PAIR_SHAPE (default 6144,1536,7168), with
#              DeepGEMM's configuration choice (DG_PRINT_CONFIGS); needs DEEPGEMM
#   host     = where the host's time per call goes (benchmarks/host_overhead.py; nsys's CUDA API
#              summary of it when nsys is installed)
#   times    = time per call against the kernels' own durations in graph replays
#              (benchmarks/kernel_times.py; $TIMES_SHAPES, $TIMES_CONFIGS to choose)
#   sustained= the SM clock and power draw while each configuration runs back to back
#              (benchmarks/sustained.py; $SUSTAINED_SHAPES, $SUSTAINED_CONFIGS, $SUSTAINED_SECONDS)
#   stamps   = where a call of our 128 x 128 kernel spends its time, phase by phase
#              (benchmarks/phase_stamps.cu, built here; $STAMPS_SHAPES: "M,N,K M,N,K ...")
#   cfgncu   = ncu (throughputs, memory, warp stalls) of each configuration $NCU_CONFIGS names
#              ("cuBLAS": its blockwise scaled_mm) at the shapes $NCU_SHAPES (M,N,K;...), one call
#              per shape, b column-major; $NCU_METRICS: more metrics (comma-separated, regex:
#              allowed)
# Writes logs and tables under $OUT (at most 8 files, to keep what a run brings back small).
# Tests: at most $TESTS_TIMEOUT s (default 300), $TESTS_ARGS passed to pytest (-k to choose).
# Run from the repository root; wheels missing there travel in $WHL_DIR (default .whl, not
# committed):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     -d .whl tomlkit==0.15.2 nvidia-cutlass==4.2.0.0
set -uo pipefail
MODE=${1:-final}
OUT=${OUT:-/tmp/out}
WHL_DIR=${WHL_DIR:-.whl}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PIP_ROOT_USER_ACTION=ignore
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$WHL_DIR"/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
CUTLASS_INCLUDE=/tmp/site/cutlass_library/source/include  # from the nvidia-cutlass wheel above
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
python3 -c "import torch, scikit_build_core, cmake; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'skbuild-core', scikit_build_core.__version__)"
nvcc --version | tail -1

# DeepGEMM (DEEPGEMM=path to kernels-community's deep-gemm) builds in the background meanwhile,
# then compiles (its JIT) the kernel of every benchmark shape once; the benchmark times it.
rm -f /tmp/gemm-installed
if [ -n "${DEEPGEMM:-}" ]; then
  export DG_CUTLASS_INCLUDE=$CUTLASS_INCLUDE
  (
    set -e
    rm -rf /tmp/deep-gemm && cp -r "$DEEPGEMM" /tmp/deep-gemm && rm -rf /tmp/deep-gemm/build
    python3 -m build2cmake generate-torch /tmp/deep-gemm/build.toml
    start=$SECONDS
    CMAKE_BUILD_PARALLEL_LEVEL=8 python3 -m pip install -q --no-build-isolation --no-deps \
      -e /tmp/deep-gemm
    echo "DeepGEMM cold build: $((SECONDS - start)) s"
    # The warm-up imports gemm (benchmarks/gemm_cuda.py): wait for its install below.
    while [ ! -e /tmp/gemm-installed ]; do sleep 2; done
    python3 benchmarks/gemm_cuda.py --deepgemm-warmup
  ) > "$OUT/deepgemm.log" 2>&1 &
  deepgemm_pid=$!
fi
# Waits (at most $DEEPGEMM_WAIT s) for DeepGEMM's background build and warm-up, if one runs.
wait_for_deepgemm() {
  [ -n "${deepgemm_pid:-}" ] || return 0
  for _ in $(seq 1 "${DEEPGEMM_WAIT:-240}"); do kill -0 "$deepgemm_pid" 2>/dev/null || break; sleep 1; done
}

# A machine still warm from the previous call keeps /tmp: the build of the same sources is reused.
src_hash=$(tar -c --sort=name --mtime=@0 --exclude=build kernels/gemm build2cmake cmake_templates \
  torch-ext 2>/dev/null | md5sum | cut -c1-32)
if [ "$(cat /tmp/gemm.src-hash 2>/dev/null)" = "$src_hash" ]; then
  echo "build: reused (same sources as the previous call's)" | tee "$OUT/build.log"
else
  rm -rf /tmp/gemm /tmp/gemm.src-hash && cp -r kernels/gemm /tmp/gemm && rm -rf /tmp/gemm/build
  python3 -m build2cmake generate-torch /tmp/gemm/build.toml || exit 1
  start=$SECONDS
  python3 -m pip install -q --no-build-isolation --no-deps -e /tmp/gemm > "$OUT/build.log" 2>&1 \
    || { tail -60 "$OUT/build.log"; exit 1; }
  echo "cold build: $((SECONDS - start)) s"
  echo "$src_hash" > /tmp/gemm.src-hash
fi
touch /tmp/gemm-installed
so=$(ls /tmp/gemm/build/cmake/install/platlib/gemm/*.so)
cuobjdump --list-elf "$so"
# Registers and spills of each CUTLASS configuration (the resource usage of every kernel).
cuobjdump --dump-resource-usage "$so" 2>/dev/null | grep -E "Function|REG" | sed -E 's/Function ([^:]{0,90}).*/Function \1.../' >> "$OUT/build.log"

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout "${TESTS_TIMEOUT:-300}" python3 -m pytest -q -p no:cacheprovider -rs ${TESTS_ARGS:-} \
    /tmp/gemm/tests 2>&1 | tee "$OUT/tests.log" | tail -15
fi

case "$MODE" in
  final) STAGES=${STAGES:-"bench sanitize"} ;;
  explore) STAGES=${STAGES:-"explore ncu race"} ;;
  *) STAGES=${STAGES:-$MODE} ;;
esac
has() { [[ " $STAGES " == *" $1 "* ]]; }

if has sanitize; then
  # The first import after an install runs the editable install's rebuild check (cmake and ninja
  # as child processes): outside the sanitizer, which otherwise found no process to attach to
  # within its launch timeout when racecheck came first (2026-11-24: run 17 of the tuning log,
  # git show c631808:benchmarks/RESULTS.md).
  python3 -c "import gemm" || exit 1
  # By default the table's choice, our mma.sync kernel and every configuration of our own sm_90a
  # kernel (the "own_" entries of gemm_sm90_configs.h); about 25 s per kernel and tool (racecheck,
  # the slowest: 12 calls in 20-22 s, run 17).
  kernels=${SANITIZE_KERNELS:-"default mma $(sed -nE 's/^\s*X\((own_\w+)\).*/\1/p' \
    kernels/gemm/gemm_cuda/gemm_sm90_configs.h | tr '\n' ' ')"}
  limit=$((60 + 25 * $(wc -w <<< "$kernels")))
  echo "sanitizers on: ${kernels% } (at most $limit s per tool)"
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
    timeout $limit compute-sanitizer --tool $tool --launch-timeout 60 --error-exitcode 7 \
      python3 benchmarks/sanitize_gemm.py $kernels > /tmp/sanitizer-$tool.log 2>&1
    echo "compute-sanitizer $tool: exit $?," \
      "$(grep -c 'relative error' /tmp/sanitizer-$tool.log) checked calls;" \
      "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|sanitize_gemm: done' /tmp/sanitizer-$tool.log | tr '\n' ' ')"
    { echo "===== $tool"; cat /tmp/sanitizer-$tool.log; } >> "$OUT/sanitizers.log"
  done
fi
if has bench; then
  if [ -n "${deepgemm_pid:-}" ]; then
    wait_for_deepgemm
    echo "== DeepGEMM build and warm-up:"; tail -15 "$OUT/deepgemm.log"
    BENCH_ARGS="${BENCH_ARGS:-} --deepgemm"
  fi
  timeout "${BENCH_TIMEOUT:-330}" python3 benchmarks/gemm_cuda.py ${BENCH_ARGS:-} \
    --out "$OUT/bench.md" 2>&1 | tee "$OUT/bench.log" | tail -16
fi
if has explore; then
  # Its own log and table: a bench stage in the same run keeps bench.log and bench.md.
  timeout 300 python3 benchmarks/gemm_cuda.py --explore "$OUT/explore.md" \
    --out "$OUT/explore-results.md" ${EXPLORE_SHAPES:+--shapes "$EXPLORE_SHAPES"} \
    > "$OUT/explore.log" 2>&1
  echo "explore: exit $?"; cat "$OUT/explore.md"; tail -16 "$OUT/explore.log"
fi
if has times; then
  timeout 240 python3 benchmarks/kernel_times.py ${TIMES_SHAPES:+--shapes "$TIMES_SHAPES"} \
    ${TIMES_CONFIGS:+--configs "$TIMES_CONFIGS"} > "$OUT/times.md" 2>&1
  echo "kernel times: exit $?"; cat "$OUT/times.md"
fi
if has sustained; then
  timeout 400 python3 benchmarks/sustained.py ${SUSTAINED_SHAPES:+--shapes "$SUSTAINED_SHAPES"} \
    ${SUSTAINED_SECONDS:+--seconds "$SUSTAINED_SECONDS"} \
    ${SUSTAINED_CONFIGS:+--configs "$SUSTAINED_CONFIGS"} > "$OUT/sustained.md" 2>&1
  echo "sustained: exit $?"; cat "$OUT/sustained.md"
fi
if has stamps; then
  nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr \
    -I"$CUTLASS_INCLUDE" -Ikernels/gemm/gemm_cuda -o /tmp/phase_stamps \
    benchmarks/phase_stamps.cu > "$OUT/stamps.md" 2>&1 &&
    timeout 120 /tmp/phase_stamps ${STAMPS_SHAPES:-256,8192,2048 256,16384,1024 256,8192,4096} \
      >> "$OUT/stamps.md" 2>&1
  echo "phase stamps: exit $?"; cat "$OUT/stamps.md"
fi
if has pair; then
  wait_for_deepgemm
  shape=${PAIR_SHAPE:-6144,1536,7168}
  DG_PRINT_CONFIGS=1 timeout 120 python3 benchmarks/gemm_cuda.py --profile-pair --shapes "$shape" \
    > "$OUT/pair-configs.log" 2>&1
  echo "configs: exit $?"; tail -8 "$OUT/pair-configs.log"
  # Both calls of each (a JIT load happens before DeepGEMM's first launch, not inside it):
  # CUTLASS's kernels are device_kernel, ours gemm_kernel, DeepGEMM's sm90_fp8_gemm_*.
  DG_PRINT_CONFIGS=0 timeout 240 ncu --set full -k regex:"device_kernel|gemm_kernel|sm90_fp8_gemm" -c 4 \
    -o /tmp/pair -f python3 benchmarks/gemm_cuda.py --profile-pair --shapes "$shape" \
    > "$OUT/pair-ncu.log" 2>&1
  echo "ncu: exit $?"
  ncu --import /tmp/pair.ncu-rep --page details --print-details all > "$OUT/pair-details.txt" 2>&1
  ncu --import /tmp/pair.ncu-rep --page raw --csv > "$OUT/pair-raw.csv" 2>&1
  grep -E "^  [a-z_:0-9<>, ]*(device_kernel|gemm_kernel|sm90_fp8_gemm)|Duration|Registers Per|Dynamic Shared|Grid Size|Block Size|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|Issue Slots Busy|No Eligible|Eligible Warps|Achieved Occupancy|Warp Cycles Per Issued" \
    "$OUT/pair-details.txt" | cut -c1-160 | head -60
fi
if has host; then
  configs=$(python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import gemm_cuda; print(*gemm_cuda.sm90_configs())")
  CONFIGS="$configs" timeout 120 python3 benchmarks/host_overhead.py 2>&1 | tee "$OUT/host.log"
  if command -v nsys >/dev/null; then
    timeout 150 nsys profile -q -t cuda,osrt -o /tmp/host -f true python3 benchmarks/host_overhead.py \
      > /dev/null 2>&1
    timeout 120 nsys stats -q -r cuda_api_sum /tmp/host.nsys-rep 2>&1 | head -40 | tee -a "$OUT/host.log"
  else
    echo "nsys: not installed" | tee -a "$OUT/host.log"
  fi
fi
if has ncu; then
  # Where each shape loses: the table's choice, one call per shape (b column-major, then
  # row-major: the second profile of each pair is the transpose kernel + the same GEMM).
  timeout 150 ncu -k regex:"device_kernel|transpose_bytes" \
    --section SpeedOfLight --section LaunchStats --section Occupancy \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    python3 benchmarks/gemm_cuda.py --profile > "$OUT/ncu.log" 2>&1
  echo "ncu: exit $?"
fi
if has cfgncu; then
  # The editable install's rebuild check runs on the first import after an install: not under ncu.
  python3 -c "import gemm" || exit 1
  for config in ${NCU_CONFIGS:-default}; do
    echo "===== $config"
    # "cuBLAS": its blockwise scaled_mm (nvjet kernels); CUTLASS's configurations: device_kernel.
    calls=--profile
    [ "$config" = cuBLAS ] && calls=--profile-cublas
    GEMM_SM90_CONFIG=$([ "$config" = default ] || [ "$config" = cuBLAS ] || echo "$config") \
      timeout 150 ncu -k regex:"gemm_kernel|device_kernel|nvjet" --section SpeedOfLight \
      --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis \
      --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
      --metrics "${NCU_METRICS:-lts__t_sectors.sum}" \
      python3 benchmarks/gemm_cuda.py $calls --column-major-only \
      --shapes "${NCU_SHAPES:-904,1664,7680}" 2>&1
    echo "ncu $config: exit $?"
  done > "$OUT/cfgncu.log"
  grep -E "^=====|^  (gemm_kernel|device_kernel|nvjet)|Duration|Grid Size|Cluster Size|dram__bytes|hit_rate|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy|No Eligible|lts__t_sectors.sum|issue_stalled|inst_executed|bank_conflicts|Registers Per|profiled" \
    "$OUT/cfgncu.log" | cut -c1-150 | head -120
fi
if has race; then
  {
    echo "== racecheck reproduction (benchmarks/racecheck_repro.cu)"
    nvcc -gencode arch=compute_90a,code=sm_90a -o /tmp/repro benchmarks/racecheck_repro.cu
    for mode in 0 1 2 3 4; do
      timeout 60 compute-sanitizer --tool racecheck --racecheck-report hazard /tmp/repro $mode \
        > /tmp/repro-$mode.log 2>&1
      echo "mode $mode: exit $?, $(grep -c 'Potential WAR hazard' /tmp/repro-$mode.log) WAR hazard lines;" \
        "$(grep -E 'sum ok|wrong|RACECHECK SUMMARY' /tmp/repro-$mode.log | tr '\n' ' ')"
    done
    echo "== racecheck per CUTLASS configuration"
    for config in ${RACE_CONFIGS:-coop_128x128_c1x2 coop_128x128_c1x1 coop_128x128_c1x1_streamk pingpong_64x128_c1x1}; do
      timeout 90 compute-sanitizer --tool racecheck --racecheck-report hazard \
        python3 benchmarks/sanitize_gemm.py $config > /tmp/race-$config.log 2>&1
      echo "-- $config: exit $?, $(grep -c 'relative error' /tmp/race-$config.log) checked calls," \
        "$(grep -c 'Potential WAR hazard' /tmp/race-$config.log) WAR hazard lines;" \
        "$(grep -E 'RACECHECK SUMMARY' /tmp/race-$config.log | tr '\n' ' ')"
    done
  } > "$OUT/race.log" 2>&1
  cat "$OUT/race.log"
fi
