#!/usr/bin/env bash
# Instructions per sequential GET in Node, ours against ioredis (issue 16): the stable figure
# beside node_ab.js's timings. Runs bench/latency/node_ab.js (2 000 untimed GETs, then N) under
# `valgrind --tool=callgrind --separate-threads=yes` with N1 and N2 GETs for each client and
# prints (Ir(N2) - Ir(N1)) / (N2 - N1) for the JavaScript thread (callgrind's thread 1) and for
# the whole process. Start-up, connect and close are the same in both runs and cancel.
#
# Node runs with --single-threaded: V8 then optimizes and collects garbage on the JavaScript
# thread, at the same points of both runs, and the figure repeats within a few %. With V8's
# helper threads (the default) it did not: under valgrind they run late and unevenly, and
# ioredis's JavaScript-thread figure came out 32 500, 33 700 and 45 900 in three runs.
#
#   bench/latency/node_callgrind.sh [N1 [N2]]        (defaults 1000 5000)
#
# Needs the Node addon (make node-build), ioredis in bench/node/node_modules (cd bench/node &&
# npm ci), sr-topology (cargo build -p sentinel-recovery-testkit --bin sr-topology) and valgrind.
# Under callgrind each run takes 20-40 s.
set -euo pipefail

N1=${1:-1000}
N2=${2:-5000}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
topology_bin=$target/debug/sr-topology
out=$target/bench-latency/node-callgrind
[ -x "$topology_bin" ] || { echo "node_callgrind.sh: $topology_bin missing" >&2; exit 1; }
[ -d "$root/bench/node/node_modules/ioredis" ] || { echo "node_callgrind.sh: ioredis missing (cd bench/node && npm ci)" >&2; exit 1; }
ls "$root"/bindings-node/*.node >/dev/null 2>&1 || { echo "node_callgrind.sh: the Node addon is missing (make node-build)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "node_callgrind.sh: valgrind missing (apt-get install valgrind)" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out"

# shellcheck source=bench/latency/topology.bash
. "$here/topology.bash"
start_topology "$topology_bin"
echo "topology: primary 127.0.0.1:$port, 1 sentinel; node $(node --version), valgrind $(valgrind --version | sed 's/valgrind-//')"

# total FILE: the instruction total of one thread's callgrind file.
total() { awk '/^totals:/ {t = $2} /^summary:/ && !t {t = $2} END {print t + 0}' "$1"; }

# run KIND N ARGS...: one callgrind run of node_ab.js; prints "js all".
run() {
  local kind=$1 n=$2 prefix=$out/$1.$2
  shift 2
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$prefix.out" \
    node --single-threaded "$here/node_ab.js" "$@" "$n" >"$prefix.stdout" 2>"$prefix.stderr"
  local all=0 f
  for f in "$prefix.out"-*; do all=$((all + $(total "$f"))); done
  echo "$(total "$prefix.out-01") $all"
}

for kind in sentinel-recovery ioredis; do
  if [ "$kind" = ioredis ]; then args=(io "$port"); else args=(sr "$root/bindings-node" "$url"); fi
  read -r j1 a1 < <(run "$kind" "$N1" "${args[@]}")
  read -r j2 a2 < <(run "$kind" "$N2" "${args[@]}")
  awk -v k="$kind" -v j="$((j2 - j1))" -v a="$((a2 - a1))" -v d="$((N2 - N1))" 'BEGIN {
    printf "%-18s instructions per GET: JavaScript thread %.0f, whole process %.0f\n", k, j / d, a / d }'
done
echo "files: $out"
