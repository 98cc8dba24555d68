#!/usr/bin/env bash
# A Debian chroot with a newer ROCm than the host's (Debian 12 ships ROCm 5.2, which cannot compile
# gfx942): Debian sid's ROCm 6.4 (hipcc 7, clang-21), sid's CPU python3-torch, and the Python
# packages a generated project builds with. Made once per machine and kept under
# /var/cache/build2cmake (CI runs on the same machine, so later runs reuse it).
#
#   scripts/rocm-chroot.sh ensure [SUITE]     make the chroot unless a good one is cached; print
#                                             its folder and which suite/ROCm it holds
#   scripts/rocm-chroot.sh info [SUITE]       the same for the cached one; exit 1 if there is none
#   scripts/rocm-chroot.sh run [--suite SUITE] [--bind DIR]... [--] COMMAND...
#                                             run COMMAND in the chroot, in the current folder, with
#                                             this repository (and each DIR) mounted at the same path
#   scripts/rocm-chroot.sh remove             delete the cached chroot(s)
#
# Needs root (chroot, mount). The suite is sid; when sid cannot be installed (it moves), trixie
# (ROCm 5.7.1, clang-17) is used instead, and `ensure` says so. B2C_ROCM_SUITE=trixie chooses it.
# SUITE rocm72 (or B2C_ROCM_SUITE=rocm72) is sid with experimental's ROCm 7.2 (hipcc, clang-22,
# rocThrust, hipBLASLt, hipSPARSELt, rocWMMA) and no torch: `build2cmake build --variants` puts
# each variant's torch into a uv environment there (uv is in the chroot's venv).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
CACHE_ROOT=${B2C_ROCM_CHROOT_CACHE:-/var/cache/build2cmake}
MIRROR=${B2C_DEBIAN_MIRROR:-http://deb.debian.org/debian}

# What goes into the chroot. Changing any of it changes the stamp, so a cached chroot made from an
# older list is re-created. hipcc pulls in its clang-N, llvm-N (llvm-objdump), clang-tools-N
# (clang-offload-bundler) and rocm-device-libs-N; libtorch-dev holds torch's CMake package, which
# Debian keeps out of python3-torch. librocthrust-dev (with librocprim-dev) and libhipcub-dev are
# the headers a ROCm build of torch ships with: torch's headeronly/util/complex.h includes
# <thrust/complex.h> when compiled by a HIP compiler, so any HIP source including torch needs them.
# hipBLASLt (sid: 7.1.1, built against ROCm 6) and rocWMMA (headers only, no dependencies;
# Debian has it in experimental alone) are libraries kernels link or include. hipSPARSELt is only
# in experimental, built against ROCm 7's runtime, so only rocm72 has it; rocSHMEM is in no suite.
ROCM_LIBRARIES="librocthrust-dev librocprim-dev libhipcub-dev libhipblaslt-dev librocwmma-dev"
APT_PACKAGES="hipcc libamdhip64-dev libamd-comgr-dev libhsa-runtime-dev python3-torch libtorch-dev \
$ROCM_LIBRARIES python3-dev python3-venv g++ ccache ca-certificates"
# rocm72: no Debian torch (sid's is another release than the variants'; uv installs those).
# g++-15: where PyPI's torch (a CUDA build) stands in for a ROCm one, torch's CMake package has
# nvcc 13.0 compile CMake's CUDA probe, and nvcc 13.0 refuses sid's g++ 16 headers; chroot_env
# points it at g++-15.
APT_PACKAGES_ROCM72="hipcc libamdhip64-dev libamd-comgr-dev libhsa-runtime-dev \
$ROCM_LIBRARIES libhipsparselt-dev python3-dev python3-venv g++ g++-15 ccache ca-certificates"
# Pinned: what generated projects build with (scikit-build-core, cmake, ninja), what
# build2cmake imports, and uv (build --variants). Installed into a venv that also sees the
# suite's torch.
PIP_PACKAGES="scikit-build-core==0.11.6 cmake==3.31.6 ninja==1.11.1.4 tomlkit==0.13.2 jinja2==3.1.6 \
pytest==8.3.5 uv==0.13.9"
# The ROCm (libamdhip64-dev) version each suite is expected to hold, checked after installing.
declare -A EXPECT_ROCM=([sid]="6.4" [trixie]="5.7" [rocm72]="7.2")
VENV=/opt/b2c-venv

known_suite() {
  [ -n "${EXPECT_ROCM[$1]:-}" ] || die "unknown suite '$1' (known: sid, trixie, rocm72)"
}

debian_suite() {  # the Debian suite a chroot is made from
  case "$1" in rocm72) echo sid ;; *) echo "$1" ;; esac
}

apt_packages() {
  case "$1" in rocm72) echo "$APT_PACKAGES_ROCM72" ;; *) echo "$APT_PACKAGES" ;; esac
}

# APT preferences: which packages come from experimental (priority 990; every other package of
# experimental stays at its default 1, never installed). The ROCm 7.2 stack for rocm72; rocWMMA,
# which no other suite has, for sid.
apt_pins() {
  local packages
  case "$1" in
    rocm72) packages="hipcc libamdhip64* libhiprtc* libamd-comgr* libhsa-runtime* rocm-* \
librocthrust* librocprim* libhipcub* libhipblaslt* libhipsparselt* librocwmma* libroctx64*" ;;
    sid) packages="librocwmma-dev" ;;
    *) return 0 ;;
  esac
  printf 'Package: %s\nPin: release a=experimental\nPin-Priority: 990\n' "$packages"
}

# Extra dpkg options. experimental's libhipsparselt-dev and libhipblaslt-dev (7.2.4) both ship
# /usr/include/origami/*.hpp, the same headers of the same upstream (hipBLASLt's origami): dpkg
# is told to let the second overwrite the first rather than refuse the whole install.
dpkg_options() {
  case "$1" in rocm72) echo "--dpkgopt=force-overwrite" ;; esac
}

chroot_env() {  # extra variables of commands run in the chroot
  case "$1" in rocm72) echo "CUDAHOSTCXX=/usr/bin/g++-15" ;; esac
}

has_torch() {  # whether the suite's own torch is in the chroot
  case " $(apt_packages "$1") " in *" python3-torch "*) return 0 ;; *) return 1 ;; esac
}

die() { echo "rocm-chroot: $*" >&2; exit 2; }

stamp_text() {  # the recipe a chroot was made from
  printf 'suite=%s\napt=%s\npip=%s\ndpkg=%s\n' "$1" "$(apt_packages "$1")" "$PIP_PACKAGES" \
    "$(dpkg_options "$1")"
  apt_pins "$1"
}

chroot_dir() { echo "$CACHE_ROOT/rocm-chroot-$1"; }

# A cached chroot is good when it was made from this recipe and its tools are all there: the HIP
# compiler (which needs /proc, so only its presence is checked here) and the venv's Python
# importing what generated builds need.
is_good() {
  local dir torch=True
  dir=$(chroot_dir "$1")
  has_torch "$1" && torch="u.find_spec('torch')"
  [ -f "$dir/.b2c-stamp" ] && [ "$(cat "$dir/.b2c-stamp")" = "$(stamp_text "$1")" ] \
    && [ -x "$dir/usr/bin/hipcc" ] && [ -x "$dir$VENV/bin/cmake" ] && [ -x "$dir$VENV/bin/uv" ] \
    && chroot "$dir" "$VENV/bin/python" -c "import jinja2, tomlkit, scikit_build_core, importlib.util as u; assert $torch" \
      >/dev/null 2>&1
}

require_root() {
  [ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap, chroot and mount); run it with sudo"
}

# Builds the chroot for $1 in a temporary folder next to the cache and renames it into place, so
# a chroot at the final path is always complete (an interrupted build leaves only a *.tmp.* that
# the next run deletes).
create() {
  local suite=$1 final tmp started debian pins
  final=$(chroot_dir "$suite")
  debian=$(debian_suite "$suite")
  tmp="$final.tmp.$$"
  rm -rf "$final".tmp.*
  command -v mmdebstrap >/dev/null || {
    echo "rocm-chroot: installing mmdebstrap (apt)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null
  }
  started=$SECONDS
  echo "rocm-chroot: creating the $suite chroot in $final" >&2
  # The mirror's Release files may be older than their Valid-Until (a frozen mirror); the
  # signatures are still checked.
  # force-unsafe-io: no fsync per file (a chroot that is cut off half-way is thrown away anyway).
  # The pins go in before the first apt-get install (setup hook), and stay for later apt runs.
  pins="$CACHE_ROOT/rocm-chroot-$suite.pref"
  apt_pins "$suite" >"$pins"
  local mirrors=("$MIRROR")
  [ -s "$pins" ] && mirrors=("deb $MIRROR $debian main" "deb $MIRROR experimental main")
  if ! mmdebstrap --variant=apt --aptopt='Acquire::Check-Valid-Until "false"' \
      --dpkgopt=force-unsafe-io $(dpkg_options "$suite") \
      --include="$(apt_packages "$suite" | tr -s ' ' ',')" \
      --setup-hook="mkdir -p \"\$1/etc/apt/preferences.d\" && cp '$pins' \"\$1/etc/apt/preferences.d/build2cmake\"" \
      --customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*' \
      "$debian" "$tmp" "${mirrors[@]}" >"$CACHE_ROOT/rocm-chroot-$suite.log" 2>&1; then
    echo "rocm-chroot: mmdebstrap $suite failed (log: $CACHE_ROOT/rocm-chroot-$suite.log)" >&2
    rm -rf "$tmp"
    return 1
  fi
  local hip
  hip=$(chroot "$tmp" dpkg-query -W -f='${Version}' libamdhip64-dev 2>/dev/null || true)
  case "$hip" in
    "${EXPECT_ROCM[$suite]}".*) ;;
    *) echo "rocm-chroot: $suite holds libamdhip64-dev '$hip', expected ${EXPECT_ROCM[$suite]}.x" >&2
       rm -rf "$tmp"; return 1 ;;
  esac
  # Certificate authorities this machine added locally (a company proxy in front of PyPI, say)
  # are trusted in the chroot too; pip there uses the system store.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$tmp/usr/local/share/ca-certificates/"
    chroot "$tmp" update-ca-certificates >>"$CACHE_ROOT/rocm-chroot-$suite.log" 2>&1
  fi
  if ! in_chroot "$tmp" / -- sh -c "python3 -m venv --system-site-packages $VENV && \
      PIP_CERT=/etc/ssl/certs/ca-certificates.crt $VENV/bin/pip install -q \
      --disable-pip-version-check --no-cache-dir $PIP_PACKAGES" \
      >>"$CACHE_ROOT/rocm-chroot-$suite.log" 2>&1; then
    echo "rocm-chroot: pip install in the $suite chroot failed" \
         "(log: $CACHE_ROOT/rocm-chroot-$suite.log)" >&2
    rm -rf "$tmp"
    return 1
  fi
  stamp_text "$suite" >"$tmp/.b2c-stamp"
  echo "$hip" >"$tmp/.b2c-rocm-version"
  if [ -e "$final" ]; then
    mv "$final" "$final.old.$$"
    rm -rf "$final.old.$$"
  fi
  mv "$tmp" "$final"
  echo "rocm-chroot: $suite chroot made in $((SECONDS - started)) s," \
       "$(du -sh "$final" | cut -f1) on disk" >&2
}

# in_chroot DIR WORKDIR [--bind D]... -- COMMAND...: runs COMMAND in a private mount namespace
# (every mount disappears with it, even if it is killed), with /proc, /dev, /sys, a fresh /tmp,
# the repository and each --bind folder mounted at their host paths. Compiles go through the
# chroot's ccache; CCACHE_BASEDIR makes builds in different temporary folders (tests) share it.
# SSL_CERT_FILE: uv (build --variants) trusts the chroot's store, which holds this machine's
# local authorities too, as pip does.
in_chroot() {
  local dir=$1 workdir=$2
  shift 2
  local binds=("$REPO")
  while [ $# -gt 0 ]; do
    case "$1" in
      --bind) binds+=("$(cd "$2" && pwd)"); shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  [ $# -gt 0 ] || die "run: no command given"
  local scratch
  scratch=$(mktemp -d /tmp/b2c-chroot-tmp.XXXXXX)
  local status=0
  # shellcheck disable=SC2016  # expanded by the inner shell
  unshare --mount --propagation private -- /bin/bash -c '
    set -e
    dir=$1 scratch=$2 workdir=$3 nbinds=$4
    shift 4
    mount -t proc proc "$dir/proc"
    mount --rbind /dev "$dir/dev"
    mount --rbind /sys "$dir/sys"
    mount --bind "$scratch" "$dir/tmp"
    for ((i = 0; i < nbinds; i++)); do
      mkdir -p "$dir$1"
      mount --bind "$1" "$dir$1"
      shift
    done
    cp -L /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
    exec chroot "$dir" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
      PATH='"$VENV"'/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
      PIP_ROOT_USER_ACTION=ignore PYTHONPATH="${B2C_PYTHONPATH}" \
      PYTHONDONTWRITEBYTECODE=1 CCACHE_DIR=/var/cache/ccache CCACHE_BASEDIR=/tmp \
      SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt ${B2C_CHROOT_ENV:-} \
      /bin/sh -c "cd \"\$1\" && shift && exec \"\$@\"" sh "$workdir" "$@"
  ' bash "$dir" "$scratch" "$workdir" "${#binds[@]}" "${binds[@]}" "$@" || status=$?
  rm -rf "$scratch"
  return "$status"
}

pick_suite() {  # the suite `run`/`info` use: the requested one, else sid, else trixie
  if [ -n "${1:-}" ]; then known_suite "$1"; echo "$1"; return; fi
  if [ -n "${B2C_ROCM_SUITE:-}" ]; then known_suite "$B2C_ROCM_SUITE"; echo "$B2C_ROCM_SUITE"; return; fi
  local suite
  for suite in sid trixie; do
    if is_good "$suite"; then echo "$suite"; return; fi
  done
  echo sid
}

describe() {
  local dir
  dir=$(chroot_dir "$1")
  echo "$dir ($1, ROCm $(cat "$dir/.b2c-rocm-version"))"
}

command=${1:-}
[ $# -gt 0 ] && shift
case "$command" in
  ensure)
    require_root
    mkdir -p "$CACHE_ROOT"
    suites=(sid trixie)
    [ -n "${B2C_ROCM_SUITE:-}" ] && suites=("$B2C_ROCM_SUITE")
    [ -n "${1:-}" ] && suites=("$1")
    for suite in "${suites[@]}"; do
      known_suite "$suite"
      # One creator of a chroot at a time: CI and a developer (or two test sessions) may start
      # together. A lock per chroot: making rocm72 does not hold up a lookup of sid's.
      exec 9>"$CACHE_ROOT/rocm-chroot-$suite.lock"
      flock 9
      if is_good "$suite" || create "$suite"; then
        [ "$suite" != trixie ] || echo "rocm-chroot: using $suite (ROCm 5.7), not sid" >&2
        describe "$suite"
        exit 0
      fi
      rm -rf "$(chroot_dir "$suite")"  # stale or broken: not used again
      exec 9>&-
    done
    die "no chroot could be made (tried ${suites[*]}); see $CACHE_ROOT/rocm-chroot-*.log"
    ;;
  info)
    suite=$(pick_suite "${1:-}")
    is_good "$suite" || { echo "rocm-chroot: no usable $suite chroot; run: $0 ensure" >&2; exit 1; }
    describe "$suite"
    ;;
  run)
    require_root
    requested=""
    binds=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --suite) [ $# -ge 2 ] || die "run: --suite needs a name"; requested=$2; shift 2 ;;
        --bind) [ $# -ge 2 ] || die "run: --bind needs a folder"; binds+=(--bind "$2"); shift 2 ;;
        --) shift; break ;;
        *) break ;;
      esac
    done
    suite=$(pick_suite "$requested")
    is_good "$suite" || die "no usable $suite chroot; run: $0 ensure $suite"
    B2C_CHROOT_ENV=$(chroot_env "$suite") B2C_PYTHONPATH=$REPO in_chroot "$(chroot_dir "$suite")" "$PWD" "${binds[@]}" -- "$@"
    ;;
  remove)
    require_root
    rm -rf "$CACHE_ROOT"/rocm-chroot-sid "$CACHE_ROOT"/rocm-chroot-trixie \
      "$CACHE_ROOT"/rocm-chroot-rocm72
    ;;
  *)
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
    [ -z "$command" ] || [ "$command" = -h ] || [ "$command" = --help ] || exit 2
    ;;
esac
