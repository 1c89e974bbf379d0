#!/usr/bin/env bash
# The JVM host-responsiveness probe (bench/jvm/Probe.kt) with 0, 1, 11 and 64 clients against one
# real topology (sr-topology, six sentinels) of which three sentinels are stopped (SIGSTOP) for the
# whole run, following a service no sentinel knows (discovery fails and retries throughout).
# Prints one JSON line per run. SECONDS_PER_RUN (default 30) sets each run's length.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
secs=${SECONDS_PER_RUN:-30}
"$root/bindings-uniffi/scripts/jvm.sh" build >/dev/null
kotlin=$CARGO_TARGET_DIR/jvm-tools/node_modules/kotlin-compiler
cp="$CARGO_TARGET_DIR/jvm/sentinel-recovery.jar:$kotlin/lib/kotlin-stdlib.jar:$kotlin/lib/kotlinx-coroutines-core-jvm.jar:/usr/share/java/jna.jar"
out=$CARGO_TARGET_DIR/jvm/bench
rm -rf "$out" && mkdir -p "$out"
"$kotlin/bin/kotlinc" -jvm-target 17 -nowarn -cp "$cp" -d "$out" "$here/Probe.kt"
cargo build -q -p sentinel-recovery-testkit --bins

coproc TOPO { exec "$CARGO_TARGET_DIR/debug/sr-topology" up --json --sentinels 6 --replicas 1; }
topo_pid=$TOPO_PID
trap '{ echo down >&"${TOPO[1]}"; } 2>/dev/null || true; wait "$topo_pid" 2>/dev/null || true' EXIT
read -r line <&"${TOPO[0]}"
read -r url stopped < <(python3 -c '
import json, sys
t = json.loads(sys.argv[1])
hosts = ",".join("%s:%d" % (s["host"], s["port"]) for s in t["sentinels"])
print("redis+sentinel://%s/bench-unknown-service" % hosts, " ".join(str(s["port"]) for s in t["sentinels"][:3]))
' "$line")
for port in $stopped; do
  echo "stop $port" >&"${TOPO[1]}"
  read -r answer <&"${TOPO[0]}"
  case "$answer" in *'"ok":true'*) ;; *) echo "stop $port: $answer" >&2; exit 1 ;; esac
done
# 0 clients: the probe alone, the machine's own scheduling noise, for comparison.
for clients in ${CLIENTS:-0 1 11 64}; do
  timeout $((secs + 120)) java -cp "$cp:$out" ProbeKt "$url" "$clients" "$secs"
done
