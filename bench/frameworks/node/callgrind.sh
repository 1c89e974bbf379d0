#!/usr/bin/env bash
# The ioredis adapter's cost per command, in instructions: ioredis talking to the primary
# directly against the same ioredis through sentinel-recovery/ioredis (issue 27's "adapter's cost
# per command", goal <= 5 %). Instructions, not seconds, so the figure holds on a busy shared
# machine: seq.js runs N1 and N2 sequential commands (SET and GET alternating) under
# `valgrind --tool=callgrind` for each client and this prints (Ir(N2) - Ir(N1)) / (N2 - N1) for
# the whole process (the JavaScript thread and, for the adapter, the core's threads: its monitor
# runs beside the commands). Node runs with --single-threaded (see bench/latency/node_callgrind.sh).
#
#   bench/frameworks/node/callgrind.sh [N1 [N2]]        (defaults 2000 12000)
#
# seq.js first runs 5000 untimed commands (SEQ_WARMUP): with fewer, V8 is still compiling the
# command path between N1 and N2, and its compiler's instructions (thousands per command, and
# different from run to run) swamp what the adapter adds.
#
# Needs the Node addon and ioredis (make node-build: npm ci in bindings-node), sr-topology
# (cargo build -p sentinel-recovery-testkit --bin sr-topology) and valgrind.
set -euo pipefail

N1=${1:-2000}
N2=${2:-12000}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
topology_bin=$target/debug/sr-topology
out=$target/bench-frameworks/node-callgrind
[ -x "$topology_bin" ] || { echo "callgrind.sh: $topology_bin missing" >&2; exit 1; }
[ -d "$root/bindings-node/node_modules/ioredis" ] || { echo "callgrind.sh: ioredis missing (make node-build)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind missing (apt-get install valgrind)" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out"

# shellcheck source=bench/latency/topology.bash
. "$root/bench/latency/topology.bash"
start_topology "$topology_bin"
echo "topology: primary 127.0.0.1:$port, 1 sentinel; node $(node --version), valgrind $(valgrind --version | sed 's/valgrind-//')"

total() { awk '/^totals:/ {t = $2} /^summary:/ && !t {t = $2} END {print t + 0}' "$1"; }

# run KIND N WHERE: one callgrind run of seq.js; prints the whole process's instructions.
run() {
  local kind=$1 n=$2 where=$3 prefix=$out/$1.$2
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$prefix.out" \
    node --single-threaded "$here/seq.js" "$kind" "$where" "$n" >"$prefix.stdout" 2>"$prefix.stderr"
  local all=0 f
  for f in "$prefix.out"-*; do all=$((all + $(total "$f"))); done
  echo "$all"
}

declare -A per
for kind in direct adapter; do
  if [ "$kind" = direct ]; then where=$port; else where=$url; fi
  a1=$(run "$kind" "$N1" "$where")
  a2=$(run "$kind" "$N2" "$where")
  per[$kind]=$(( (a2 - a1) / (N2 - N1) ))
  echo "$kind: instructions per command (whole process): ${per[$kind]}"
done
awk -v d="${per[direct]}" -v a="${per[adapter]}" 'BEGIN { printf "adapter / direct: %.3f (%+.1f %%)\n", a / d, 100 * (a / d - 1) }'
echo "files: $out"
