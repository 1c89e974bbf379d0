# Sourced by the callgrind scripts: start_topology BIN starts `BIN up --json --replicas 0
# --sentinels 1` (the testkit's sr-topology) as a coprocess, sets `url` (the sentinel URL) and
# `port` (the primary's) from its first line, and tears it down when the script exits (EOF on
# its stdin is its `down`).
start_topology() {
  coproc TOPO { exec "$1" up --json --replicas 0 --sentinels 1; }
  topo_in=${TOPO[1]}
  local first
  read -r -u "${TOPO[0]}" first
  trap stop_topology EXIT
  url=$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' <<<"$first")
  port=$(sed -n 's/.*"primary":{[^}]*"port":\([0-9]*\).*/\1/p' <<<"$first")
}

stop_topology() {
  eval "exec $topo_in>&-" 2>/dev/null || true
  wait "$TOPO_PID" 2>/dev/null || true
}
