#!/usr/bin/env bash
# The ROCm toolchains of `build2cmake toolchain` (build2cmake/toolchains/), by the verbs and
# suite names scripts and tests of this repository use: sid is the rocm-6.4 toolchain (Debian
# sid: ROCm 6.4, hipcc 7, clang-21, CPU python3-torch), rocm72 is rocm-7.2 (sid + experimental's
# ROCm 7.2, clang-22, no torch), trixie is rocm-5.7 (ROCm 5.7.1, clang-17). This checkout's
# build2cmake does the work; the toolchains live where `build2cmake toolchain list` says
# (/var/cache/build2cmake as root).
#
#   scripts/rocm-chroot.sh ensure [SUITE]     install the toolchain unless a good one is there;
#                                             print its folder and which suite/ROCm it holds
#   scripts/rocm-chroot.sh info [SUITE]       the same for the installed one; exit 1 if none
#   scripts/rocm-chroot.sh run [--suite SUITE] [--bind DIR]... [--] COMMAND...
#                                             run COMMAND inside, in the current folder, with
#                                             this repository (and each DIR) mounted at its path
#   scripts/rocm-chroot.sh remove             remove the sid, trixie and rocm72 toolchains
#
# SUITE defaults to $B2C_ROCM_SUITE, else sid, falling back to trixie when sid cannot be
# installed. B2C_ROCM_CHROOT_CACHE moves the store ($BUILD2CMAKE_TOOLCHAINS), B2C_DEBIAN_MIRROR
# the mirror ($BUILD2CMAKE_DEBIAN_MIRROR).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
if [ -n "${B2C_ROCM_CHROOT_CACHE:-}" ]; then export BUILD2CMAKE_TOOLCHAINS=$B2C_ROCM_CHROOT_CACHE; fi
if [ -n "${B2C_DEBIAN_MIRROR:-}" ]; then export BUILD2CMAKE_DEBIAN_MIRROR=$B2C_DEBIAN_MIRROR; fi

die() { echo "rocm-chroot: $*" >&2; exit 2; }

toolchain() {  # this checkout's build2cmake (-P: never a build2cmake/ of the current folder)
  PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -P -m build2cmake toolchain "$@"
}

name_of() {
  case "$1" in
    sid) echo rocm-6.4 ;;
    rocm72) echo rocm-7.2 ;;
    trixie) echo rocm-5.7 ;;
    *) die "unknown suite '$1' (known: sid, trixie, rocm72)" ;;
  esac
}

describe() {  # FOLDER (SUITE, ROCm VERSION); fails when it is not installed
  local dir
  dir=$(toolchain path "$(name_of "$1")") || return 1
  echo "$dir ($1, ROCm $(cat "$dir/.b2c-rocm-version"))"
}

pick_suite() {  # the requested suite, else the first installed of sid and trixie, else sid
  if [ -n "${1:-}" ]; then name_of "$1" >/dev/null; echo "$1"; return; fi
  if [ -n "${B2C_ROCM_SUITE:-}" ]; then name_of "$B2C_ROCM_SUITE" >/dev/null; echo "$B2C_ROCM_SUITE"; return; fi
  local suite
  for suite in sid trixie; do
    if toolchain path "$(name_of "$suite")" >/dev/null 2>&1; then echo "$suite"; return; fi
  done
  echo sid
}

command=${1:-}
[ $# -gt 0 ] && shift
case "$command" in
  ensure)
    suites=(sid trixie)
    [ -n "${B2C_ROCM_SUITE:-}" ] && suites=("$B2C_ROCM_SUITE")
    [ -n "${1:-}" ] && suites=("$1")
    for suite in "${suites[@]}"; do
      if toolchain install "$(name_of "$suite")" >&2; then
        [ "$suite" != trixie ] || echo "rocm-chroot: using $suite (ROCm 5.7), not sid" >&2
        describe "$suite"
        exit 0
      fi
    done
    die "no toolchain could be made (tried ${suites[*]}); see the lines above"
    ;;
  info)
    suite=$(pick_suite "${1:-}")
    describe "$suite" 2>/dev/null || { echo "rocm-chroot: no usable $suite toolchain; run: $0 ensure $suite" >&2; exit 1; }
    ;;
  run)
    requested=""
    binds=(--bind "$REPO")
    while [ $# -gt 0 ]; do
      case "$1" in
        --suite) [ $# -ge 2 ] || die "run: --suite needs a name"; requested=$2; shift 2 ;;
        --bind) [ $# -ge 2 ] || die "run: --bind needs a folder"; binds+=(--bind "$2"); shift 2 ;;
        --) shift; break ;;
        *) break ;;
      esac
    done
    [ $# -gt 0 ] || die "run: no command given"
    suite=$(pick_suite "$requested")
    exec env PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -P -m build2cmake toolchain \
      run "${binds[@]}" "$(name_of "$suite")" -- "$@"
    ;;
  remove)
    for suite in sid trixie rocm72; do toolchain remove "$(name_of "$suite")"; done
    ;;
  *)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    [ -z "$command" ] || [ "$command" = -h ] || [ "$command" = --help ] || exit 2
    ;;
esac
