#!/usr/bin/env bash
# Unpacks the .nupkg built by pack.sh into a temp dir, compiles consumer/Consumer.cs against the
# package's lib/netstandard2.0/SentinelRecovery.dll (in another directory, no .so anywhere near
# it and no LD_LIBRARY_PATH), and runs it against a real topology: proves the package layout
# loads on Mono.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
out=$target/dotnet
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$root/Cargo.toml")
pkg=$out/SentinelRecovery.$version.nupkg
work=$(mktemp -d /tmp/sr-dotnet-consumer.XXXXXX)
topo_pid=
cleanup() {
  if [ -n "$topo_pid" ]; then
    { echo down >&"${TOPO[1]}"; } 2>/dev/null || true
    wait "$topo_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$pkg" "$work/pkg"
mkdir -p "$work/app"
lib=$work/pkg/lib/netstandard2.0
mcs -nologo -langversion:7.2 -r:"$lib/SentinelRecovery.dll" -out:"$work/app/consumer.exe" "$here/consumer/Consumer.cs"

coproc TOPO { exec "$target/debug/sr-topology" up --json; }
topo_pid=$TOPO_PID
read -r line <&"${TOPO[0]}"
url=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["url"])' "$line")
cd "$work/app"
env -u LD_LIBRARY_PATH MONO_PATH="$lib" timeout 60 mono consumer.exe "$url"
echo "consumer-test: OK (package $pkg)"
