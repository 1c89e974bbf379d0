#!/usr/bin/env bash
# make demo: a local Redis primary, two replicas and three sentinels; a client writes through the
# failover of a kill -9 and prints the timeline. Everything started here is stopped by its own
# pid (sr-topology stops its servers when its stdin closes), also on failure.
set -euo pipefail
bin="${CARGO_TARGET_DIR:-$(pwd)/target}/debug"
work=$(mktemp -d)
topo_pid=""
cleanup() {
  exec 3>&- 2>/dev/null || true
  [ -n "$topo_pid" ] && wait "$topo_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

mkfifo "$work/ctl"
"$bin/sr-topology" up --json <"$work/ctl" >"$work/topology.json" &
topo_pid=$!
exec 3>"$work/ctl"
echo "demo: starting redis-server x3 (primary + 2 replicas) and redis-sentinel x3 on loopback ..."
for _ in $(seq 1 300); do [ -s "$work/topology.json" ] && break; sleep 0.1; done
[ -s "$work/topology.json" ] || { echo "demo: the topology did not start" >&2; exit 1; }
url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$work/topology.json")
echo "demo: $url"
"$bin/sr-demo" "$url"
