#!/usr/bin/env bash
# How fast completions reach awaiting code (bench/dotnet/CompletionBench.cs): sequential GET
# latency, GETs/s at 64 in flight, sync-over-async on a starved pool. Runs each build of
# SentinelRecovery.dll named in BUILDS ("label=dir ...", default: the one scripts/build.sh made)
# against one real topology (sr-topology), interleaved, ROUNDS times (default 3). The native
# library is LIB (default: the release build, else the debug one). One JSON line per run.
#   bench/dotnet/completions.sh
#   BUILDS="before=/tmp/before after=target/dotnet" ROUNDS=5 bench/dotnet/completions.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
builds=${BUILDS:-current=$target/dotnet}
lib=${LIB:-$target/release/libsentinel_recovery.so}
[ -f "$lib" ] || lib=$target/debug/libsentinel_recovery.so
work=$(mktemp -d)
coproc TOPO { exec "$target/debug/sr-topology" up --json; }
topo_pid=$TOPO_PID
trap '{ echo down >&"${TOPO[1]}"; } 2>/dev/null || true; wait "$topo_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
for b in $builds; do
  mkdir -p "$work/${b%%=*}"
  cp "${b#*=}/SentinelRecovery.dll" "$lib" "$work/${b%%=*}/"
  mcs -nologo -langversion:7.2 -r:System.dll -r:System.Core.dll -r:"$work/${b%%=*}/SentinelRecovery.dll" \
      -out:"$work/${b%%=*}/CompletionBench.exe" "$here/CompletionBench.cs"
done
read -r line <&"${TOPO[0]}"
url=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["url"])' "$line")
for round in $(seq 1 "${ROUNDS:-3}"); do
  for b in $builds; do
    echo -n "round=$round load=$(cut -d' ' -f1 /proc/loadavg) "
    (cd "$work/${b%%=*}" && timeout 300 mono CompletionBench.exe "$url" "${b%%=*}" "${SEQ_OPS:-20000}" "${X64_SECONDS:-10}")
  done
done
