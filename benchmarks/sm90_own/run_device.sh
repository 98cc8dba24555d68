#!/bin/bash
# One device session: build, correctness, benchmark, memcheck at small shapes, a short ncu.
# Run on the device (its folder is benchmarks/sm90_own); writes logs under $OUT. The CUTLASS
# headers come from the nvidia-cutlass wheel in $WHL_DIR (default: the repository's .whl).
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site "${WHL_DIR:-../../.whl}"/nvidia_cutlass-*.whl 2>&1 | tail -2
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
time ./build.sh /tmp/site/cutlass_library/source /tmp/t > "$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; exit 1; }
cat "$OUT/build.log"
# PRETEST=1: the small-shape correctness tests before the requested run.
if [ "${PRETEST:-0}" = 1 ]; then
  timeout 100 /tmp/t --small > "$OUT/pretest.log" 2>&1; echo "pretest rc=$?"; tail -1 "$OUT/pretest.log"
fi
timeout 200 /tmp/t "$@" 2>&1 | tee "$OUT/run.log" | grep -v "^  ok"
echo "run rc=${PIPESTATUS[0]}"
if [ "${SANITIZE:-1}" = 1 ]; then
  for tool in memcheck synccheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool /tmp/t --small > "$OUT/$tool.log" 2>&1
    echo "$tool rc=$?"; tail -2 "$OUT/$tool.log"
  done
fi
# NCU="BM BN M N K" (several separated by ';'): profile one launch of each.
IFS=';' read -ra PROFS <<< "${NCU:-}"
i=0
for prof in "${PROFS[@]}"; do
  i=$((i+1))
  timeout 90 ncu --set full -k regex:gemm_kernel -c 1 -s 2 -o "$OUT/prof$i" /tmp/t --one $prof > "$OUT/ncu$i.log" 2>&1; echo "ncu $prof rc=$?"
  ncu --import "$OUT/prof$i.ncu-rep" --page details --print-details all > "$OUT/ncu_details$i.txt" 2>&1
  ncu --import "$OUT/prof$i.ncu-rep" --page raw > "$OUT/ncu_raw$i.txt" 2>&1
  grep -E "Duration|Issue Slots|Eligible Warps|L2 Cache Throughput|SM Frequency" "$OUT/ncu_details$i.txt" | head -8
  grep -E "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed" "$OUT/ncu_raw$i.txt"
  ncu --import "$OUT/prof$i.ncu-rep" --page source --csv --print-source sass > "$OUT/sass$i.csv" 2>&1
  rm -f "$OUT/prof$i.ncu-rep"
done
