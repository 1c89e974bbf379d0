#!/usr/bin/env bash
# Installs Debian's Mono compiler/runtime and NUnit 2.6 only where missing (safe to run again).
# The minimal set, with --no-install-recommends: mono-mcs (mcs, C# <= 7.2), mono-runtime (mono +
# the 4.5 class libraries incl. System.dll/System.Core.dll via its dependencies), nunit-console and
# libnunit-cil-dev (nunit.framework 2.6.3 under /usr/lib/cli).
set -euo pipefail
need=()
command -v mcs >/dev/null 2>&1 || need+=(mono-mcs)
command -v mono >/dev/null 2>&1 || need+=(mono-runtime)
command -v nunit-console >/dev/null 2>&1 || need+=(nunit-console)
[ -f /usr/lib/cli/nunit.framework-2.6.3/nunit.framework.dll ] || need+=(libnunit-cil-dev)
command -v python3 >/dev/null 2>&1 || need+=(python3) # pack.sh zips the .nupkg with it
[ ${#need[@]} -eq 0 ] && exit 0
echo "deps-dotnet: installing ${need[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
log=/tmp/sr-apt-dotnet.log
if ! "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${need[@]}" >"$log" 2>&1; then
  "${sudo_cmd[@]}" apt-get update >>"$log" 2>&1
  "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${need[@]}" >>"$log" 2>&1 \
    || { echo "deps-dotnet: apt-get failed, see $log" >&2; exit 1; }
fi
