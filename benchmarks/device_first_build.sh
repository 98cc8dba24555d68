#!/usr/bin/env bash
# Issue #61 on a CUDA machine: a project's first build, ordered by the record its author made on
# another machine (benchmarks/first_build/<project>.tsv, made on the CI machine), against the same
# build ordered by this machine's own recorded seconds (benchmarks/README.md, "The first build").
#
#   bash benchmarks/device_first_build.sh MODE PROJECT:CORES ...
#
# MODE: first     the project as a fresh clone carrying the author's record, no costs of this
#                 machine (each project's costs folder emptied first); records this machine's
#       recorded  the same build again, ordered by what `first` recorded (no record in the clone)
#       size      no record anywhere: the cold estimate's order
# Projects named together build at once, each pinned (taskset) to CORES cores of its own, counted
# from core 0 in the order given. Each build: TORCH_CUDA_ARCH_LIST=9.0a (an H200's build), no
# compiler cache, `build2cmake build` through benchmarks/big_kernels.py (wall, floor, top steps).
# This machine's costs are kept under $COSTS (default .fb/costs, an ignored folder of the
# checkout) and copied to $OUT/costs, so that a later call on a fresh machine can carry them.
# A project with a check of its own (benchmarks/<name>_check.py: layer-norm's) is checked on
# the GPU after it is built. Projects come from $CORPUS (default .corpus: copies of kernels-community's folders); wheels the
# machine lacks (tomlkit, nvidia-cutlass) from .whl, as device_cuda.sh says.
set -uo pipefail
MODE=${1:?MODE: first, recorded or size}
shift
OUT=${OUT:-/tmp/out}
COSTS=${COSTS:-$PWD/.fb/costs}
CORPUS=${CORPUS:-.corpus}
mkdir -p "$OUT" "$COSTS"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nproc
first=0
pids=()
for spec in "$@"; do
  IFS=: read -r name cores <<<"$spec"
  last=$((first + cores - 1))
  args=(benchmarks/big_kernels.py "$CORPUS/$name" --capability '' -D TORCH_CUDA_ARCH_LIST=9.0a
        --jobs "$cores" --cores "$cores" --top 12 --timeout "${TIMEOUT:-570}"
        --work "/tmp/fb-work/$name-$MODE"
        --json "$OUT/$name-$MODE.json" --markdown "$OUT/$name-$MODE.md")
  case $MODE in
    first) rm -rf "${COSTS:?}/$name"
           args+=(--costs-dir "$COSTS/$name" --carried "benchmarks/first_build/$name.tsv") ;;
    recorded) args+=(--costs-dir "$COSTS/$name") ;;
    size) args+=(--costs-dir "/tmp/size-costs-$name-$$") ;;
    *) echo "unknown MODE $MODE" >&2; exit 2 ;;
  esac
  rm -rf "/tmp/fb-work/$name-$MODE"
  echo "$name on cores $first-$last: python3 ${args[*]}"
  taskset -c "$first-$last" python3 "${args[@]}" > "$OUT/$name-$MODE.log" 2>&1 &
  pids+=($!)
  first=$((last + 1))
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
cp -r "$COSTS" "$OUT/costs"
for spec in "$@"; do
  name=${spec%%:*}
  # A project's own check of what it built, where benchmarks/ has one (layer_norm_check.py).
  check="benchmarks/$(basename "$name" | tr - _)_check.py"
  if [ -f "$check" ] && [ "$MODE" != size ]; then
    python3 "$check" "/tmp/fb-work/$name-$MODE/$(basename "$name")" > "$OUT/$name-$MODE-check.log" 2>&1
    echo "$check: exit $?"; tail -3 "$OUT/$name-$MODE-check.log"
  fi
  grep -a -h "longest first" "/tmp/fb-work/$name-$MODE/$(basename "$name").log" | head -4
  tail -4 "$OUT/$name-$MODE.log"
done
exit $status
