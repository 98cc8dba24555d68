#!/usr/bin/env bash
# Builds real kernel-builder projects with build2cmake on a CUDA machine and runs their own test
# suites: the H100 check of the real-kernels issue (benchmarks/README.md has the last results).
#
#   bash benchmarks/device_corpus.sh CORPUS_DIR OUT_DIR PROJECT...
#
# CORPUS_DIR holds copies of the projects (e.g. $BUILD2CMAKE_CORPUS/kernels-community, which
# scripts/fetch-corpus.sh fills with huggingface/kernels-community's folders). Each
# project is copied to a temporary folder, generated, installed with
# `pip install --no-build-isolation -e` (its tests import the package) or, for projects whose
# tests load the Hub layout through `kernels`, built with `build2cmake build` and pointed at with
# LOCAL_KERNELS. Capabilities: sm_90a only (the H100), through the override variables, to keep
# the compile short. Needs torch with CUDA, nvcc, cmake, ninja, scikit-build-core, tomlkit and
# (for LOCAL_KERNELS projects) kernels. Prints one line per project and writes OUT_DIR/<name>.log.
set -uo pipefail
corpus=$1
out=$2
shift 2
repo=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
capabilities=(-C cmake.define.BUILD2CMAKE_CUDA_CAPABILITIES=9.0a
              -C cmake.define.BUILD2CMAKE_CUDA_CAPABILITIES_OVERRIDE=ON)
mkdir -p "$out"
printf '%-16s %-8s %-8s %s\n' project build seconds tests | tee "$out/summary.txt"
for name in "$@"; do
  work=$(mktemp -d)/$name
  cp -r "$corpus/$name" "$work"
  log=$out/$name.log
  start=$SECONDS
  # A project may ship other files generate writes: then replace them in the copy (--force).
  python3 -m build2cmake generate-torch "$work/build.toml" >"$log" 2>&1 \
    || python3 -m build2cmake generate-torch "$work/build.toml" --force >>"$log" 2>&1
  # Tests that load the kernel from the Hub by its repo id get this build instead (LOCAL_KERNELS).
  repo_id=$(grep -rhoE "kernels\.get_kernel\(\"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+\"" "$work/tests" \
    2>/dev/null | head -1 | sed -E 's/.*\("([^"]+)"/\1/')
  if [ -n "$repo_id" ]; then
    python3 -m build2cmake build "$work/build.toml" --backend cuda \
      -D BUILD2CMAKE_CUDA_CAPABILITIES=9.0a -D BUILD2CMAKE_CUDA_CAPABILITIES_OVERRIDE=ON >>"$log" 2>&1
    built=$?
    export LOCAL_KERNELS="$repo_id=$work"
  else
    python3 -m pip install -q --no-build-isolation --no-deps -e "$work" "${capabilities[@]}" \
      >>"$log" 2>&1
    built=$?
    unset LOCAL_KERNELS
  fi
  build_time=$((SECONDS - start))
  result="-"
  if [ "$built" -eq 0 ]; then
    (cd "$work" && timeout 900 python3 -m pytest -q -p no:cacheprovider tests) >>"$log" 2>&1
    result=$(grep -E "^[0-9]+ (passed|failed)|passed|failed|error" "$log" | tail -1)
  fi
  printf '%-16s %-8s %-8s %s\n' "$name" "$([ "$built" -eq 0 ] && echo ok || echo FAILED)" \
    "$build_time" "$result" | tee -a "$out/summary.txt"
done
