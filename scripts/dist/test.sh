#!/usr/bin/env bash
# `make test-dist` (after `make dist`): installs every artifact of dist/ the way its users do, in
# clean environments without a Rust toolchain, and runs a smoke program of each through one
# kill -9 failover of a real topology (the testkit's sr-topology):
#
#   python   fresh venv, `pip install --no-index dist/*.whl`               scripts/dist/smoke/smoke.py
#   node     empty folder, `npm install --offline` of the two tarballs     smoke.mjs (ESM) + smoke.cjs (CJS)
#   dotnet   fresh consumer folder with a packages.config, `nuget install` from a local feed
#            (Debian's nuget 2.8 on Mono), compiled by mcs against the package only   Smoke.cs
#   c        the SDK tarball unpacked: pkg-config shared + static, CMake find_package shared +
#            static; and `make install PREFIX=...`, pkg-config shared             smoke.c
#   cli      the CLI tarball: --version, exec SET/GET, watch --json              smoke/cli.sh
#
# Every consumer runs under `env -i` with PATH=/usr/bin:/bin (plus the venv's bin for Python),
# a HOME of its own, and no cargo or rustc reachable. All of them are started against one
# topology; once each printed READY (connected, SET, GET done, listening for events) the primary
# is killed with SIGKILL, and each must see primary_changed and GET its value again.
# Before that: check-versions.sh (sources and artifacts) and check-artifacts.sh.
source "$(dirname "$0")/common.sh"
started=$SECONDS
smoke=$dist_scripts/smoke
topology_bin=${SR_TOPOLOGY_BIN:-$target/debug/sr-topology}
[ -x "$topology_bin" ] || die "no $topology_bin: cargo build -p sentinel-recovery-testkit --bins"
apt_need

step "versions"
"$dist_scripts/check-versions.sh" sources
"$dist_scripts/check-versions.sh" artifacts
"$dist_scripts/check-artifacts.sh"

work=$(mktemp -d /tmp/sr-test-dist.XXXXXX)
topo_pid=
cleanup() {
  local pid
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  if [ -n "$topo_pid" ]; then
    { echo down >&"${TOPO[1]}"; } 2>/dev/null || true
    wait "$topo_pid" 2>/dev/null || true
  fi
  if [ "${SR_KEEP_TEST_DIST:-0}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
mkdir -p "$work/home"
CLEAN_PATH=/usr/bin:/bin
# clean CMD...: CMD with nothing of this environment but a minimal PATH and a HOME of its own.
clean() { env -i PATH="$CLEAN_PATH" HOME="$work/home" LANG=C.UTF-8 TMPDIR=/tmp "$@"; }

step "the clean environment has no Rust toolchain"
if clean sh -c 'command -v cargo || command -v rustc || command -v rustup'; then
  die "cargo/rustc reachable from PATH=$CLEAN_PATH"
fi
echo "PATH=$CLEAN_PATH: no cargo, rustc or rustup"

whl=$(dist_wheel)
t0=$SECONDS
step "python: fresh venv, pip install $(basename "$whl")"
# The system's Python if it can make venvs (Debian: python3-venv), else the one on PATH.
host_python=/usr/bin/python3
if ! clean "$host_python" -c 'import venv, ensurepip' 2>/dev/null; then
  host_python=$(python3 -c 'import sys; print(sys.executable)')
fi
echo "interpreter: $host_python ($(clean "$host_python" --version))"
clean "$host_python" -m venv "$work/py"
env -i PATH="$work/py/bin:$CLEAN_PATH" HOME="$work/home" "$work/py/bin/python" -m pip install \
  --no-index --no-cache-dir --disable-pip-version-check -q "$whl"
env -i PATH="$work/py/bin:$CLEAN_PATH" HOME="$work/home" "$work/py/bin/python" -m pip list 2>/dev/null | grep -i sentinel
echo "python: $(( SECONDS - t0 )) s"

t0=$SECONDS
step "node: empty folder, npm install of the two tarballs (offline)"
mkdir -p "$work/node"
cp "$smoke/smoke.mjs" "$smoke/smoke.cjs" "$work/node/"
(cd "$work/node" && clean npm install --offline --no-audit --no-fund --no-update-notifier --loglevel=error \
  --cache "$work/npm-cache" "$DIST/sentinel-recovery-$version.tgz" "$DIST/sentinel-recovery-$NPM_PLATFORM-$version.tgz")
(cd "$work/node" && clean npm ls --all --no-update-notifier)
(cd "$work/node" && clean node smoke.cjs "$version")
echo "node: $(( SECONDS - t0 )) s"

t0=$SECONDS
step "dotnet: nuget install from a local feed into a fresh consumer, mcs against the package"
mkdir -p "$work/feed" "$work/dotnet"
cp "$DIST/SentinelRecovery.$version.nupkg" "$work/feed/"
sed "s/@VERSION@/$version/" "$smoke/packages.config" > "$work/dotnet/packages.config"
cp "$smoke/Smoke.cs" "$work/dotnet/"
(cd "$work/dotnet" && clean nuget install packages.config -Source "$work/feed" -OutputDirectory packages -NonInteractive)
dn_lib=$work/dotnet/packages/SentinelRecovery.$version/lib/netstandard2.0
[ -f "$dn_lib/SentinelRecovery.dll" ] || die "nuget did not install lib/netstandard2.0/SentinelRecovery.dll"
(cd "$work/dotnet" && clean mcs -nologo -langversion:7.2 -r:"$dn_lib/SentinelRecovery.dll" -out:smoke.exe Smoke.cs)
echo "dotnet: $(( SECONDS - t0 )) s"

t0=$SECONDS
step "c: SDK tarball (pkg-config and CMake, shared and static) and make install"
mkdir -p "$work/c"
tar -C "$work/c" -xzf "$DIST/sentinel-recovery-c-$version-$PLATFORM.tar.gz"
sdk=$work/c/sentinel-recovery-c-$version-$PLATFORM
cp "$smoke/smoke.c" "$smoke/CMakeLists.txt" "$work/c/"
strict='-std=c11 -Wall -Wextra -Werror -pedantic'
(cd "$work/c" && clean PKG_CONFIG_PATH="$sdk/lib/pkgconfig" sh -ec "
  cc $strict smoke.c \$(pkg-config --cflags --libs sentinel_recovery) \
     -Wl,-rpath,\$(pkg-config --variable=libdir sentinel_recovery) -o smoke_pc_shared
  cc $strict smoke.c \$(pkg-config --cflags --libs sentinel_recovery_static) -o smoke_pc_static
  echo \"pkg-config: sentinel_recovery \$(pkg-config --modversion sentinel_recovery), static \$(pkg-config --modversion sentinel_recovery_static)\"")
(cd "$work/c" && clean cmake -S . -B build -DCMAKE_PREFIX_PATH="$sdk" -DSR_VERSION="$version" >"$work/c/cmake.log" \
   || { cat "$work/c/cmake.log"; exit 1; }) && grep -E "SentinelRecovery" "$work/c/cmake.log"
(cd "$work/c" && clean cmake --build build -- -s >/dev/null)
prefix=$work/c/prefix
PREFIX=$prefix "$dist_scripts/install.sh"
diff <(cd "$sdk" && find . | sort) <(cd "$prefix" && find . ! -path './bin*' | sort) \
  || die "make install laid out other files than the SDK tarball"
echo "make install PREFIX=$prefix: the SDK tarball's layout, plus bin/sentinel-recovery"
(cd "$work/c" && clean PKG_CONFIG_PATH="$prefix/lib/pkgconfig" sh -ec "
  cc $strict smoke.c \$(pkg-config --cflags --libs sentinel_recovery) -Wl,-rpath,$prefix/lib -o smoke_prefix_shared")
c_bins=(smoke_pc_shared smoke_pc_static build/smoke_cmake_shared build/smoke_cmake_static smoke_prefix_shared)
for b in "${c_bins[@]}"; do
  needed=$(readelf -d "$work/c/$b" | sed -n 's/.*(NEEDED).*\[\(libsentinel.*\)\]/\1/p')
  case $b in
    *static) [ -z "$needed" ] || die "$b needs $needed" ; echo "$b: static (no libsentinel_recovery NEEDED)" ;;
    *) [ "$needed" = "$soname" ] || die "$b needs '$needed', expected $soname"; echo "$b: NEEDED $needed" ;;
  esac
done
echo "c: $(( SECONDS - t0 )) s"

step "cli: the tarball"
mkdir -p "$work/cli"
tar -C "$work/cli" -xzf "$DIST/sentinel-recovery-cli-$version-$PLATFORM.tar.gz"
cli=$work/cli/sentinel-recovery-cli-$version-$PLATFORM/bin/sentinel-recovery
clean "$cli" --version

t0=$SECONDS
step "failover: every consumer against one topology, kill -9 of the primary"
coproc TOPO { exec "$topology_bin" up --json; }
topo_pid=$TOPO_PID
read -r -t 120 first <&"${TOPO[0]}" || die "sr-topology did not start"
url=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["url"])' "$first")
port=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["primary"]["port"])' "$first")
echo "topology $url, primary on port $port ($(( SECONDS - t0 )) s)"

names=() pids=()
# Each consumer gives up after 90 s without a switch; `timeout 150` bounds a hang after that.
start() { # NAME DIR CMD...: a consumer in the background, output in $work/logs/NAME.log
  local name=$1 dir=$2; shift 2
  (cd "$dir" && "$@") >"$work/logs/$name.log" 2>&1 &
  names+=("$name"); pids+=("$!")
}
mkdir -p "$work/logs"
start python "$work" env -i PATH="$work/py/bin:$CLEAN_PATH" HOME="$work/home" LANG=C.UTF-8 \
  timeout 150 "$work/py/bin/python" "$smoke/smoke.py" "$url" "$version"
start node "$work/node" clean timeout 150 node smoke.mjs "$url" "$version"
start dotnet "$work/dotnet" clean MONO_PATH="$dn_lib" timeout 150 mono smoke.exe "$url" "$version"
for b in "${c_bins[@]}"; do
  n=$(basename "$b"); n=${n#smoke_}
  start "c-$n" "$work/c" clean timeout 150 "./$b" "$url" "$version" "$n"
done
start cli "$work/cli" clean timeout 150 sh "$smoke/cli.sh" "$cli" "$url" "$version" "$work/cli"

# Everyone READY (or dead) before the kill.
deadline=$(( SECONDS + 90 ))
for i in "${!names[@]}"; do
  until grep -q '^READY' "$work/logs/${names[$i]}.log"; do
    if ! kill -0 "${pids[$i]}" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
      echo "--- ${names[$i]} did not get ready:" >&2; cat "$work/logs/${names[$i]}.log" >&2
      die "${names[$i]} failed before the failover"
    fi
    sleep 0.2
  done
  echo "ready: ${names[$i]}: $(grep '^READY' "$work/logs/${names[$i]}.log")"
done
sleep 1 # replication of the last SETs to the replicas (loopback: well under this)
echo "kill9 $port" >&"${TOPO[1]}"
read -r -t 30 answer <&"${TOPO[0]}" || die "sr-topology did not answer kill9"
echo "kill -9 of the primary on port $port: $answer ($(date +%T))"

passed=0 failed=0
for i in "${!names[@]}"; do
  status=0
  wait "${pids[$i]}" || status=$?
  if [ "$status" -eq 0 ] && grep -q '^OK' "$work/logs/${names[$i]}.log"; then
    passed=$((passed + 1))
    printf 'PASS %-14s %s\n' "${names[$i]}" "$(grep '^SWITCH' "$work/logs/${names[$i]}.log" | head -1 | cut -c1-120)"
  else
    failed=$((failed + 1))
    printf 'FAIL %-14s exit %s\n' "${names[$i]}" "$status"
    sed 's/^/    /' "$work/logs/${names[$i]}.log"
  fi
done
echo "failover: $(( SECONDS - t0 )) s"
echo
echo "test-dist: $(( SECONDS - started )) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
