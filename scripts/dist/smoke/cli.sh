#!/bin/sh
# make test-dist: the CLI tarball's binary through a kill -9 failover (run under env -i).
#   cli.sh BIN URL EXPECTED_VERSION WORKDIR
set -eu
bin=$1 url=$2 version=$3 work=$4
v=$("$bin" --version)
[ "$v" = "sentinel-recovery $version" ] || { echo "--version printed '$v'" >&2; exit 1; }
key=dist:cli
[ "$("$bin" exec "$url" -- SET "$key" from-the-cli)" = OK ] || { echo "SET failed" >&2; exit 1; }
[ "$("$bin" exec "$url" -- GET "$key")" = '"from-the-cli"' ] || { echo "GET failed" >&2; exit 1; }
"$bin" watch "$url" --json > "$work/watch.jsonl" 2>"$work/watch.err" &
watch=$!
stop_watch() { kill "$watch" 2>/dev/null || true; }
trap stop_watch EXIT
trap 'stop_watch; exit 1' INT TERM
i=0
until grep -q '"kind":"topology"' "$work/watch.jsonl"; do
  i=$((i + 1)); [ $i -lt 300 ] || { echo "watch printed no topology" >&2; exit 1; }
  sleep 0.1
done
echo "READY cli $version"
i=0
until grep '"kind":"primary_changed"' "$work/watch.jsonl" | grep -q '"old":{'; do
  i=$((i + 1)); [ $i -lt 900 ] || { echo "watch printed no primary_changed within 90 s" >&2; exit 1; }
  sleep 0.1
done
echo "SWITCH $(grep '"kind":"primary_changed"' "$work/watch.jsonl" | grep '"old":{' | head -1)"
[ "$("$bin" exec "$url" -- GET "$key")" = '"from-the-cli"' ] || { echo "GET after the failover failed" >&2; exit 1; }
echo "OK cli"
