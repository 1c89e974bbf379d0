#!/usr/bin/env bash
# The fencing proxy beside direct and HAProxy's Sentinel pattern (issue 37, point 4), in one run:
# sequential latency, throughput, acknowledged writes lost in a planned failover and a kill -9,
# the write gap, memory per idle session and CPU per command. NOT part of `make test`.
#
#   bench/proxy/run.sh [bench.py options]      (or: make bench-proxy BENCH_PROXY_ARGS='...')
#   options: --rounds 3 --lat-n 20000 --client-n 10000 --tp-n 200000 --idle 2000 --writers 8
#            --pre 2 --post 3 --faults planned,kill9 [--restart-after S] --keep
#            (bench/proxy/bench.py says what each is)
#
# Installs what is missing (redis-server, sentinels, redis-benchmark through scripts/deps.sh;
# Debian's haproxy; redis-py into the Python venv), builds the release CLI, the testkit's
# sr-topology and (release) sr-set-writer, then runs bench/proxy/bench.py. It prints a markdown
# report (also in $CARGO_TARGET_DIR/bench-proxy/report.md, figures in results.json there) to paste
# into bench/proxy/results.md. Every process is stopped by its own pid, also on failure or signal.
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGET="${CARGO_TARGET_DIR:-$(pwd)/target}"
export CARGO_TARGET_DIR="$TARGET"

scripts/deps.sh
# HAProxy from the distribution's own archive, only when it is missing (safe to run again).
if ! command -v haproxy >/dev/null 2>&1; then
  echo "bench-proxy: installing haproxy"
  s=()
  [ "$(id -u)" -eq 0 ] || s=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${s[@]}" apt-get install -y --no-install-recommends haproxy >/tmp/sr-apt-haproxy.log 2>&1 \
    || { "${s[@]}" apt-get update >>/tmp/sr-apt-haproxy.log 2>&1 \
         && "${s[@]}" apt-get install -y --no-install-recommends haproxy >>/tmp/sr-apt-haproxy.log 2>&1; } \
    || { echo "bench-proxy: apt-get failed, see /tmp/sr-apt-haproxy.log" >&2; exit 1; }
fi
# Plain redis-py: the venv of mk/python.mk when it exists, else one of its own under the target dir.
PY="${PY:-}"
if [ -z "$PY" ]; then
  if [ -x "$TARGET/py-venv/bin/python" ]; then PY="$TARGET/py-venv/bin/python"
  else
    [ -x "$TARGET/bench-proxy-venv/bin/python" ] || python3 -m venv "$TARGET/bench-proxy-venv"
    PY="$TARGET/bench-proxy-venv/bin/python"
  fi
fi
"$PY" -c 'import redis' 2>/dev/null || "$PY" -m pip install -q 'redis>=8,<9'

cargo build -q --release -p sentinel-recovery-cli --bin sentinel-recovery
cargo build -q --release -p sentinel-recovery-testkit --bin sr-set-writer
cargo build -q -p sentinel-recovery-testkit --bin sr-topology

# 2,000 idle sessions through a proxy hold 4,000 descriptors in it.
[ "$(ulimit -n)" -ge 16384 ] || ulimit -n 16384 2>/dev/null || ulimit -n "$(ulimit -Hn)"

bench_pid=""
stop_bench() {
  if [ -n "$bench_pid" ]; then
    kill -TERM "$bench_pid" 2>/dev/null || true
    wait "$bench_pid" 2>/dev/null || true
    bench_pid=""
  fi
}
trap 'stop_bench; exit 130' INT TERM HUP
trap stop_bench EXIT
"$PY" bench/proxy/bench.py --command "bench/proxy/run.sh${*:+ $*}" "$@" &
bench_pid=$!
status=0
wait "$bench_pid" || status=$?
bench_pid=""
exit "$status"
