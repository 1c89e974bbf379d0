#!/usr/bin/env bash
# Instructions per sequential GET through the C ABI (issue 16): the stable figure beside the
# timings. Runs bench/latency/c_loop (release libsentinel_recovery, sr_client_execute_blocking)
# under `valgrind --tool=callgrind --separate-threads=yes` with N1 and N2 GETs after its open and
# first discovery, and prints (Ir(N2) - Ir(N1)) / (N2 - N1) for the whole process (all threads)
# and split by thread name: the calling thread (main), the core's sr-worker-* threads, others.
# Everything else a run does (start, discovery, connect, close) is the same in both and cancels.
# Does it REPEAT times (default 3) and prints the median; fails unless most runs are within 1 %
# of it. On an idle machine the runs agree within 0.3 %; under load (other builds on the 2 cores)
# one run in a few is off by several % (timer-wheel turns and lock contention on the workers follow
# wall-clock time, which callgrind slows unevenly), which the median and the majority rule absorb.
#
#   bench/latency/callgrind.sh [N1 [N2]]      (make bench-callgrind builds c_loop first)
#
# The client URL sets check_interval_ms=600000 so that the backstop check (every 5 s by default)
# does not land in one run and not the other: under callgrind a run lasts seconds.
set -euo pipefail

N1=${1:-1000}
N2=${2:-6000}
REPEAT=${REPEAT:-3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
c_loop=$target/bench-latency/c_loop
topology_bin=$target/debug/sr-topology
out=$target/bench-latency/callgrind
for f in "$c_loop" "$topology_bin"; do
  [ -x "$f" ] || { echo "callgrind.sh: $f missing; build it with: make bench-latency-build" >&2; exit 1; }
done
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind missing (apt-get install valgrind)" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out"

# shellcheck source=bench/latency/topology.bash
. "$here/topology.bash"
start_topology "$topology_bin"
redis-cli -h 127.0.0.1 -p "$port" SET 'key:__rand_int__' vvvvvvvvvvvvvvvv >/dev/null
case "$url" in *\?*) url="$url&check_interval_ms=600000" ;; *) url="$url?check_interval_ms=600000" ;; esac
echo "topology: primary 127.0.0.1:$port, 0 replicas, 1 sentinel; client URL $url"
echo "valgrind $(valgrind --version | sed 's/valgrind-//'), c_loop: $c_loop -> $(ldd "$c_loop" | awk '/libsentinel_recovery/ {print $3}')"

# run REP N: one callgrind run; prints "all main workers other" instruction totals.
run() {
  local rep=$1 n=$2 prefix=$out/cg.$1.$2
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$prefix.out" \
    "$c_loop" --threads "$url" "$n" >"$prefix.stdout" 2>"$prefix.stderr"
  # c_loop --threads lists the threads (tid, name) at the end; valgrind numbers threads in order
  # of creation, so the k-th smallest tid is callgrind's thread k (no thread exits before then).
  local -a names
  mapfile -t names < <(awk '/^thread / {print $2, $3}' "$prefix.stderr" | sort -n | awk '{print $2}')
  local all=0 main=0 workers=0 other=0 f k ir
  for f in "$prefix.out"-*; do
    k=$((10#${f##*-}))
    ir=$(awk '/^totals:/ {print $2}' "$f")
    [ -n "$ir" ] || ir=$(awk '/^summary:/ {print $2}' "$f")
    # The blocking wait's brief spin (Rendezvous::spin in host/wait.rs, and wait_readable in
    # resp/connection/read.rs when the caller reads its own reply) is busy waiting whose length
    # depends on how valgrind schedules threads, not work: its inclusive cost is left out.
    # (Under valgrind waits are slow, so the spin stops after the first few; this is a guard.)
    spin=$(callgrind_annotate --auto=no --inclusive=yes "$f" 2>/dev/null \
      | awk '/Rendezvous.*::spin/ && !a {gsub(",", "", $1); s += $1; a = 1}
             /read::wait_readable/ && !b {gsub(",", "", $1); s += $1; b = 1}
             END {print s + 0}' || true)
    ir=$((ir - ${spin:-0}))
    all=$((all + ir))
    if [ "$k" -eq 1 ]; then main=$((main + ir))
    elif [[ "${names[$((k - 1))]:-?}" == sr-worker* ]]; then workers=$((workers + ir))
    else other=$((other + ir)); fi
  done
  echo "$all $main $workers $other"
}

declare -a per_get
for rep in $(seq "$REPEAT"); do
  read -r a1 m1 w1 o1 < <(run "$rep" "$N1")
  read -r a2 m2 w2 o2 < <(run "$rep" "$N2")
  d=$((N2 - N1))
  printf 'run %d: Ir(%d) = %d, Ir(%d) = %d\n' "$rep" "$N1" "$a1" "$N2" "$a2"
  awk -v a="$((a2 - a1))" -v m="$((m2 - m1))" -v w="$((w2 - w1))" -v o="$((o2 - o1))" -v d="$d" -v r="$rep" 'BEGIN {
    printf "run %d: instructions per GET: %.0f (calling thread %.0f = %.0f %%, sr-worker-* %.0f = %.0f %%, other threads %.0f)\n",
      r, a / d, m / d, 100 * m / a, w / d, 100 * w / a, o / d }'
  per_get+=("$(awk -v a="$((a2 - a1))" -v d="$d" 'BEGIN { printf "%.1f", a / d }')")
done
echo "threads seen (the calling thread shows under valgrind's name): $(awk '/^thread / {print $3}' "$out"/cg.1."$N2".stderr | sort | uniq -c | awk '{printf "%s×%s ", $1, $2}')"
echo "files: $out"
awk -v list="${per_get[*]}" 'BEGIN {
  n = split(list, v, " ")
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
  med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  agree = 0
  for (i = 1; i <= n; i++) if (v[i] >= med * 0.99 && v[i] <= med * 1.01) agree++
  printf "instructions per GET over %d runs: %s; median %.0f, %d of %d runs within 1 %% of it, spread %.2f %%\n",
    n, list, med, agree, n, 100 * (v[n] - v[1]) / v[1]
  if (2 * agree <= n) { print "NOT repeatable: most runs are not within 1 % of the median" > "/dev/stderr"; exit 1 }
}'
