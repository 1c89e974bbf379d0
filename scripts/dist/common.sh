# Sourced by the scripts of scripts/dist (make dist / test-dist / install): paths, the one
# version, the target, the pinned packaging tools and the zig link environment.
# shellcheck shell=bash
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dist_scripts=$root/scripts/dist
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
target=$CARGO_TARGET_DIR
DIST=${DIST:-$root/dist}

# The one version: [workspace.package] version of the workspace Cargo.toml.
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$root/Cargo.toml")
[ -n "$version" ] || { echo "dist: no [workspace.package] version in Cargo.toml" >&2; exit 1; }
major=${version%%.*}; rest=${version#*.}; minor=${rest%%.*}
# ABI of the C library: MAJOR, or 0.MINOR while MAJOR is 0 (as ffi-c/build.rs names the SONAME).
if [ "$major" = 0 ]; then abi=0.$minor; else abi=$major; fi
soname=libsentinel_recovery.so.$abi

# What every shipped binary is built for and checked against.
TRIPLE=x86_64-unknown-linux-gnu
GLIBC_BASELINE=2.17               # manylinux2014; zig links against glibc 2.17's symbol versions
MANYLINUX=manylinux2014
PLATFORM=x86_64-linux-gnu         # in artifact names
NPM_PLATFORM=linux-x64-gnu        # napi-rs platform name
PROFILE=dist                      # [profile.dist] of the workspace Cargo.toml
build_dir=$target/$TRIPLE/$PROFILE
stage=$target/dist-stage

# Packaging tools, pinned, in their own venv (PyPI): maturin, zig (ziglang), cargo-zigbuild,
# auditwheel, wheel.
tools=$target/dist-tools
TOOL_PINS=(maturin==1.16.0 ziglang==0.17.1 cargo-zigbuild==0.24.1 auditwheel==6.8.2 wheel==0.48.0)

step() { printf '\n== %s\n' "$*"; }
die() { echo "dist: $*" >&2; exit 1; }

size_of() { stat -c %s "$1"; }
# The one abi3 wheel build.sh leaves in $DIST; dies when there is none.
dist_wheel() {
  local whl
  whl=$(ls "$DIST"/sentinel_recovery-"$version"-*.whl 2>/dev/null) || die "no wheel in $DIST: run make dist first"
  echo "$whl"
}
human() { numfmt --to=iec-i --suffix=B --format='%.1f' "$1"; }

# The machine's own tools (apt), only where missing: cmake for the CMake consumer, nuget (Mono)
# for the local feed, mono/mcs, binutils (objcopy, strip, objdump).
apt_need() {
  local need=() sudo_cmd=()
  command -v cmake >/dev/null 2>&1 || need+=(cmake)
  command -v nuget >/dev/null 2>&1 || need+=(nuget)
  command -v mcs >/dev/null 2>&1 || need+=(mono-mcs)
  command -v mono >/dev/null 2>&1 || need+=(mono-runtime)
  command -v objcopy >/dev/null 2>&1 || need+=(binutils)
  command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
  command -v make >/dev/null 2>&1 || need+=(make)
  [ ${#need[@]} -eq 0 ] && return 0
  echo "dist: installing ${need[*]} (apt)"
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  local log=/tmp/sr-apt-dist.log
  if ! DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${need[@]}" >"$log" 2>&1; then
    "${sudo_cmd[@]}" apt-get update >>"$log" 2>&1
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${need[@]}" >>"$log" 2>&1 \
      || die "apt-get failed, see $log"
  fi
}

ensure_tools() {
  if [ ! -x "$tools/bin/python" ]; then
    python3 -m venv "$tools"
  fi
  local have
  have=$("$tools/bin/python" -m pip freeze --all 2>/dev/null | tr 'A-Z_' 'a-z-' || true)
  local pin missing=()
  for pin in "${TOOL_PINS[@]}"; do
    grep -qx "$pin" <<<"$have" || missing+=("$pin")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "dist: installing ${missing[*]} into $tools"
    "$tools/bin/python" -m pip install -q --disable-pip-version-check "${missing[@]}"
  fi
  export PATH=$tools/bin:$PATH
  export CARGO_ZIGBUILD_CACHE_DIR=$tools/zigbuild-cache
  export ZIG_GLOBAL_CACHE_DIR=$tools/zig-cache
}

# The zig link environment of cargo-zigbuild (CC/CXX/AR/RANLIB and the linker of $TRIPLE, set to
# its `zig cc -target x86_64-linux-gnu.2.17` wrappers), captured once and exported, so that
# cargo-zigbuild, maturin and the napi CLI all build with the very same environment: the three
# share one build of the core in $build_dir instead of rebuilding it for each other.
zig_env() {
  ensure_tools
  local capture
  capture=$(CARGO="$dist_scripts/print-zig-env.sh" cargo-zigbuild zigbuild --target "$TRIPLE.$GLIBC_BASELINE")
  eval "$capture"
  [ -n "${CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER:-}" ] || die "cargo-zigbuild did not set a linker"
}
