#!/usr/bin/env bash
# Builds the wrapper (SentinelRecovery.dll + XML docs) and its NUnit tests with Mono's mcs
# (C# 7.2) into $CARGO_TARGET_DIR/dotnet, next to a copy of libsentinel_recovery.so.
# Needs: mono-mcs, mono-runtime, libnunit-cil-dev; the native library built
# (cargo build -p sentinel-recovery-ffi --features test-hooks: the suite calls the test hook).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
out=$target/dotnet
mkdir -p "$out"
cp -f "$target/debug/libsentinel_recovery.so" "$out/"
# No SentinelRecovery.dll.config here: Mono finds the library beside the assembly. The dllmap
# (which does not fall back when its target is missing) is only for the NuGet layout (pack.sh).
rm -f "$out/SentinelRecovery.dll.config"

# -define:TRACE as the .NET SDK does: without it every Trace.* call is compiled out (Trace's
# methods are [Conditional("TRACE")]), and messages meant for trace listeners vanish.
mcs -nologo -langversion:7.2 -unsafe -optimize+ -debug -warnaserror -target:library -define:TRACE \
    -r:System.dll -r:System.Core.dll \
    -doc:"$out/SentinelRecovery.xml" -out:"$out/SentinelRecovery.dll" "$here"/src/*.cs

nunit=/usr/lib/cli/nunit.framework-2.6.3/nunit.framework.dll
mcs -nologo -langversion:7.2 -debug -target:library -nowarn:1591 \
    -r:System.dll -r:System.Core.dll -r:"$out/SentinelRecovery.dll" -r:"$nunit" \
    -out:"$out/SentinelRecovery.Tests.dll" "$here"/tests/*.cs
echo "built $out/SentinelRecovery.dll and SentinelRecovery.Tests.dll"
