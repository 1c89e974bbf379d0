#!/usr/bin/env bash
# Partition scenarios A, B, C of issue 28 with sentinel-recovery's Rust client in default mode,
# with each partition option (wait_replicas=2: both replicas; sentinel_majority_ms=1000) and with
# both, and with redis-py's own Sentinel client, in the same scenarios, ROUNDS times each
# (interleaved), on real network namespaces (needs root). Writes results.jsonl and RESULTS.md
# here, with the command that produced them.
#
#   bench/partitions/run.sh [ROUNDS]        (default 2; PY=path/to/python with redis installed)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS="${1:-2}"
PY="${PY:-target/py-venv/bin/python}"
OUT=bench/partitions
"$PY" -c 'import redis' 2>/dev/null || "$PY" -m pip install -q redis
cargo build -q -p sentinel-recovery-testkit --bin sr-partitions --bin sr-set-writer
BIN="${CARGO_TARGET_DIR:-target}/debug"
: > "$OUT/results.jsonl"
for round in $(seq 1 "$ROUNDS"); do
  for scenario in A B C; do
    for client in sentinel-recovery sr-wait sr-majority sr-both redis-py; do
      extra=()
      writer=("$BIN/sr-set-writer")
      case "$client" in
        sr-wait) extra=(--url-extra wait_replicas=2) ;;
        sr-majority) extra=(--url-extra sentinel_majority_ms=1000) ;;
        sr-both) extra=(--url-extra wait_replicas=2 --url-extra sentinel_majority_ms=1000) ;;
        redis-py) writer=("$PY" "$OUT/redis_py_writer.py") ;;
      esac
      echo "round $round scenario $scenario $client" >&2
      line=$("$BIN/sr-partitions" "$scenario" "${extra[@]}" -- "${writer[@]}") || { echo "  failed" >&2; continue; }
      printf '{"round":%s,"client":"%s","run":%s}\n' "$round" "$client" "$line" >> "$OUT/results.jsonl"
    done
  done
done
"$PY" "$OUT/report.py" "$OUT/results.jsonl" "bench/partitions/run.sh $ROUNDS" \
  "$(git rev-parse --short HEAD)" > "$OUT/RESULTS.md"
cat "$OUT/RESULTS.md"
