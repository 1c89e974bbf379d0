#!/usr/bin/env bash
# make demo: a local Redis primary, two replicas and three sentinels; the client follows a
# kill -9 failover live. Everything started here is stopped by its own pid, also on failure.
set -euo pipefail
bin="${CARGO_TARGET_DIR:-$(pwd)/target}/debug"
work=$(mktemp -d)
topo_pid=""; watch_pid=""
cleanup() {
  [ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null || true
  [ -n "$topo_pid" ] && { echo down >&3 2>/dev/null || true; wait "$topo_pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT

mkfifo "$work/ctl"
"$bin/sr-topology" up --json <"$work/ctl" >"$work/topology.json" &
topo_pid=$!
exec 3>"$work/ctl"
echo "demo: starting redis-server x3 and redis-sentinel x3 on loopback ..."
for _ in $(seq 1 300); do [ -s "$work/topology.json" ] && break; sleep 0.1; done
[ -s "$work/topology.json" ] || { echo "demo: topology did not start" >&2; exit 1; }
read -r url primary_port primary_pid < <(python3 -c '
import json,sys; t=json.load(open(sys.argv[1])); print(t["url"], t["primary"]["port"], t["primary"]["pid"])' "$work/topology.json")
echo "demo: $url"

"$bin/sentinel-recovery" watch "$url" >"$work/watch.log" &
watch_pid=$!
for _ in $(seq 1 100); do grep -q "service" "$work/watch.log" 2>/dev/null && break; sleep 0.1; done
cat "$work/watch.log"
kill_ms=$(date +%s%3N)
echo "$(date -u +%H:%M:%S.%3N) demo: kill -9 of the primary (port $primary_port, pid $primary_pid)"
kill -9 "$primary_pid"
for _ in $(seq 1 300); do grep -q "primary_changed" "$work/watch.log" && break; sleep 0.1; done
sleep 0.5
tail -n +2 "$work/watch.log"
if grep -q primary_changed "$work/watch.log"; then
  echo "demo: the client followed the failover"
else
  echo "demo: no failover seen within 30 s" >&2; exit 1
fi
