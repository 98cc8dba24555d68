#!/bin/bash
# Build the harness: every tile configuration in its own translation unit, in parallel.
# usage: build.sh <cutlass source dir> <output binary>
set -euo pipefail
CUT=$1; OUTBIN=$2
FLAGS="-std=c++17 -O3 -DNDEBUG -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr --expt-extended-lambda -I$CUT/include -I$CUT/tools/util/include -Xptxas -v"
cd "$(dirname "$0")"
OBJ=$(mktemp -d)
pids=()
for f in gemm_sm90_own_*x*.cu gemm_sm90_own.cu; do
  nvcc $FLAGS -c "$f" -o "$OBJ/${f%.cu}.o" > "$OBJ/${f%.cu}.log" 2>&1 &
  pids+=($!)
done
# WITH_OLD=1: also build kernels/gemm's CUTLASS path (read in place, not edited) as the baseline.
MAIN_FLAGS=""
if [ "${WITH_OLD:-0}" = 1 ]; then
  OLD=../../kernels/gemm/gemm_cuda
  MAIN_FLAGS="-DWITH_OLD -I$OLD"
  for f in $OLD/gemm_sm90*.cu; do
    b=$(basename "$f" .cu)
    nvcc $FLAGS -c "$f" -o "$OBJ/old_$b.o" > "$OBJ/old_$b.log" 2>&1 &
    pids+=($!)
  done
fi
nvcc $FLAGS $MAIN_FLAGS -c main.cu -o "$OBJ/main.o" > "$OBJ/main.log" 2>&1 &
pids+=($!)
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
grep -h "registers\|spill\|error" "$OBJ"/*.log | grep -v "^$" | sort | uniq -c || true
[ $rc -eq 0 ] || { cat "$OBJ"/*.log; exit 1; }
nvcc -gencode arch=compute_90a,code=sm_90a "$OBJ"/*.o -o "$OUTBIN"
