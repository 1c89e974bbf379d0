#!/usr/bin/env bash
# The .NET thread-pool probe (bench/dotnet/ProbeBench.cs) with 1, 11 and 64 clients, for
# SentinelRecovery (`sr`) and the incident's synchronous pattern (`naive`), side by side in one
# run, each against the same real topology (sr-topology) plus three hanging endpoints.
# Prints one JSON line per run. SECONDS_PER_RUN (default 30) sets each run's length.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
out=$target/dotnet
secs=${SECONDS_PER_RUN:-30}
mcs -nologo -langversion:7.2 -r:System.dll -r:System.Core.dll -r:"$out/SentinelRecovery.dll" \
    -out:"$out/ProbeBench.exe" "$here/ProbeBench.cs"
coproc TOPO { exec "$target/debug/sr-topology" up --json; }
topo_pid=$TOPO_PID
trap '{ echo down >&"${TOPO[1]}"; } 2>/dev/null || true; wait "$topo_pid" 2>/dev/null || true' EXIT
read -r line <&"${TOPO[0]}"
url=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["url"])' "$line")
cd "$out"
for clients in 1 11 64; do
  for mode in sr naive; do
    timeout $((secs + 60)) mono ProbeBench.exe "$mode" "$url" "$clients" "$secs"
  done
done
