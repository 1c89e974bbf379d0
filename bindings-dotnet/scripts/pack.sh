#!/usr/bin/env bash
# Assembles SentinelRecovery.<version>.nupkg (a zip in NuGet's layout) from the Mono-built
# assembly (scripts/build.sh) and the native library, following SentinelRecovery.nuspec:
#   SentinelRecovery.nuspec, [Content_Types].xml, _rels/.rels,
#   lib/netstandard2.0/SentinelRecovery.{dll,xml,dll.config}, runtimes/linux-x64/native/libsentinel_recovery.so
# SR_NATIVE_LIB overrides the native library (default: <target>/debug, as `make test` builds it;
# use a release build for a package you publish).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
out=$target/dotnet
native=${SR_NATIVE_LIB:-$target/debug/libsentinel_recovery.so}
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$root/Cargo.toml")
stage=$out/pkg-stage
rm -rf "$stage"
mkdir -p "$stage"
# Debug symbols make the debug build ~90 MB; the package carries a stripped copy.
if command -v strip >/dev/null 2>&1; then
  strip --strip-debug -o "$stage/libsentinel_recovery.so" "$native"
  native=$stage/libsentinel_recovery.so
fi
python3 - "$here/SentinelRecovery.nuspec" "$stage" "$version" "$out" "$native" "$here/src/SentinelRecovery.dll.config" <<'PY'
import os, re, shutil, sys, zipfile
nuspec, stage, version, out, native, config = sys.argv[1:]
src = {"SentinelRecovery.dll": os.path.join(out, "SentinelRecovery.dll"),
       "SentinelRecovery.xml": os.path.join(out, "SentinelRecovery.xml"),
       "SentinelRecovery.dll.config": config,
       "libsentinel_recovery.so": native}
text = open(nuspec).read().replace("$version$", version)
files = re.findall(r'<file src="([^"]+)" target="([^"]+)"', text)
# the nuspec inside the package has no <files> section
packed = re.sub(r"\s*<files>.*?</files>", "", text, flags=re.S)
pkg = os.path.join(out, "SentinelRecovery.%s.nupkg" % version)
exts = {"dll", "xml", "config", "so", "nuspec", "rels"}
ctypes = ('<?xml version="1.0" encoding="utf-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
          '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml" />'
          + "".join('<Default Extension="%s" ContentType="application/octet" />' % e for e in sorted(exts - {"rels"}))
          + "</Types>")
rels = ('<?xml version="1.0" encoding="utf-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Type="http://schemas.microsoft.com/packaging/2010/07/manifest" Target="/SentinelRecovery.nuspec" Id="R0" />'
        "</Relationships>")
with zipfile.ZipFile(pkg, "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("[Content_Types].xml", ctypes)
    z.writestr("_rels/.rels", rels)
    z.writestr("SentinelRecovery.nuspec", packed)
    for name, target in files:
        z.write(src[name], target)
print(pkg)
for i in zipfile.ZipFile(pkg).infolist():
    print("  %8d  %s" % (i.file_size, i.filename))
PY
rm -rf "$stage"
