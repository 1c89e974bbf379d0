#!/usr/bin/env bash
# The redis-py adapter's cost per command, in instructions: redis-py talking to the primary
# directly against the same redis-py through sentinel_recovery.redis_py (issue 27's "adapter's
# cost per command", goal <= 5 %). Instructions, not seconds, so the figure holds on a busy
# shared machine: seq.py runs N1 and N2 sequential commands (SET and GET alternating) under
# `valgrind --tool=callgrind` for each client and this prints (Ir(N2) - Ir(N1)) / (N2 - N1) for
# the whole process (the Python thread and, for the adapter, the core's threads).
#
#   bench/frameworks/python/callgrind.sh [N1 [N2]]        (defaults 1000 3000)
#
# Needs the Python venv with redis and sentinel_recovery (make python-install), sr-topology
# (cargo build -p sentinel-recovery-testkit --bin sr-topology) and valgrind.
set -euo pipefail

N1=${1:-1000}
N2=${2:-3000}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
topology_bin=$target/debug/sr-topology
python=${PYTHON:-$target/py-venv/bin/python}
out=$target/bench-frameworks/python-callgrind
[ -x "$topology_bin" ] || { echo "callgrind.sh: $topology_bin missing" >&2; exit 1; }
"$python" -c 'import redis, sentinel_recovery.redis_py' || { echo "callgrind.sh: $python lacks redis or sentinel_recovery (make python-install)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind missing (apt-get install valgrind)" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out"

# shellcheck source=bench/latency/topology.bash
. "$root/bench/latency/topology.bash"
start_topology "$topology_bin"
echo "topology: primary 127.0.0.1:$port, 1 sentinel; $("$python" --version), redis-py $("$python" -c 'import redis; print(redis.__version__)'), valgrind $(valgrind --version | sed 's/valgrind-//')"

total() { awk '/^totals:/ {t = $2} /^summary:/ && !t {t = $2} END {print t + 0}' "$1"; }

run() {
  local kind=$1 n=$2 where=$3 prefix=$out/$1.$2
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$prefix.out" \
    "$python" "$here/seq.py" "$kind" "$where" "$n" >"$prefix.stdout" 2>"$prefix.stderr"
  local all=0 f
  for f in "$prefix.out"-*; do all=$((all + $(total "$f"))); done
  echo "$all $(total "$prefix.out-01")"
}

declare -A per
for kind in direct adapter; do
  if [ "$kind" = direct ]; then where=$port; else where=$url; fi
  read -r a1 m1 < <(run "$kind" "$N1" "$where")
  read -r a2 m2 < <(run "$kind" "$N2" "$where")
  per[$kind]=$(( (a2 - a1) / (N2 - N1) ))
  echo "$kind: instructions per command: whole process ${per[$kind]}, Python thread $(( (m2 - m1) / (N2 - N1) ))"
done
awk -v d="${per[direct]}" -v a="${per[adapter]}" 'BEGIN { printf "adapter / direct: %.3f (%+.1f %%)\n", a / d, 100 * (a / d - 1) }'
echo "files: $out"
