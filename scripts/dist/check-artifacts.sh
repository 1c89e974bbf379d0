#!/usr/bin/env bash
# make test-dist, first half: what can be checked in dist/ without running anything.
#   - every shipped ELF binary (wheel extension, .node, C library, CLI) needs no glibc symbol
#     version above $GLIBC_BASELINE (objdump -T) and only libraries manylinux2014 allows;
#   - `auditwheel show` agrees with the wheel's manylinux2014 tag;
#   - the C library: SONAME, symlinks, exports exactly the sr_* functions of the header (the
#     version script), the static library defines them all;
#   - shipped binaries carry no debug info but a .gnu_debuglink to a .debug file in the debug
#     tarball that has it;
#   - each package's layout (wheel: py.typed and .pyi; sdist; npm: the addon only in the platform
#     package, types and both entry points in the main one; nupkg: lib/netstandard2.0 and
#     runtimes/linux-x64/native with the C SDK's very library).
source "$(dirname "$0")/common.sh"
ensure_tools
work=$(mktemp -d /tmp/sr-dist-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0
ok() { printf '  ok   %s\n' "$*"; }
bad() { printf '  FAIL %s\n' "$*"; fail=1; }
need_file() { [ -e "$1" ] || die "missing $1 (run make dist)"; }

whl=$(ls "$DIST"/sentinel_recovery-"$version"-cp39-abi3-*.whl 2>/dev/null | head -1)
need_file "$whl"
main_tgz=$DIST/sentinel-recovery-$version.tgz
plat_tgz=$DIST/sentinel-recovery-$NPM_PLATFORM-$version.tgz
nupkg=$DIST/SentinelRecovery.$version.nupkg
c_tgz=$DIST/sentinel-recovery-c-$version-$PLATFORM.tar.gz
cli_tgz=$DIST/sentinel-recovery-cli-$version-$PLATFORM.tar.gz
dbg_tgz=$DIST/sentinel-recovery-debug-$version-$PLATFORM.tar.gz
sdist=$DIST/sentinel_recovery-$version.tar.gz
for f in "$main_tgz" "$plat_tgz" "$nupkg" "$c_tgz" "$cli_tgz" "$dbg_tgz" "$sdist"; do need_file "$f"; done
(cd "$DIST" && sha256sum --quiet -c SHA256SUMS) && ok "SHA256SUMS" || bad "SHA256SUMS does not match"

mkdir -p "$work"/{whl,npm-main,npm-plat,nupkg,debug}
unzip -q "$whl" -d "$work/whl"
tar -C "$work/npm-main" -xzf "$main_tgz"
tar -C "$work/npm-plat" -xzf "$plat_tgz"
unzip -q "$nupkg" -d "$work/nupkg"
tar -C "$work" -xzf "$c_tgz"
tar -C "$work" -xzf "$cli_tgz"
tar -C "$work/debug" --strip-components=1 -xzf "$dbg_tgz"
c=$work/sentinel-recovery-c-$version-$PLATFORM
ext=$(ls "$work"/whl/sentinel_recovery/_native*.so)
addon=$work/npm-plat/package/sentinel-recovery.$NPM_PLATFORM.node
clib=$c/lib/libsentinel_recovery.so.$version
cli=$work/sentinel-recovery-cli-$version-$PLATFORM/bin/sentinel-recovery

step "glibc symbol versions (objdump -T) and needed libraries, against glibc $GLIBC_BASELINE"
# The libraries the manylinux2014 policy lets a wheel link against (of those a Rust binary uses).
allowed='^(libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libutil\.so\.1|libgcc_s\.so\.1|ld-linux-x86-64\.so\.2)$'
for bin in "$ext" "$addon" "$clib" "$cli"; do
  name=${bin#"$work"/}
  versions=$(objdump -T "$bin" | grep -oE '\(?GLIBC_[0-9]+(\.[0-9]+)*\)?' | tr -d '()' | sort -u -V)
  newest=$(tail -1 <<<"$versions" | sed 's/^GLIBC_//')
  if [ -z "$newest" ]; then bad "$name: no GLIBC symbol versions at all?"; continue; fi
  if [ "$(printf '%s\n%s\n' "$newest" "$GLIBC_BASELINE" | sort -V | tail -1)" = "$GLIBC_BASELINE" ]; then
    ok "$name: newest GLIBC_$newest <= $GLIBC_BASELINE ($(tr '\n' ' ' <<<"$versions"))"
  else
    bad "$name: needs GLIBC_$newest > $GLIBC_BASELINE: $(objdump -T "$bin" | grep -E "GLIBC_$newest" | head -3 | tr -s ' ')"
  fi
  needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  others=$(grep -vE "$allowed" <<<"$needed" || true)
  if [ -z "$others" ]; then ok "$name: NEEDED $(tr '\n' ' ' <<<"$needed")"; else bad "$name: needs $(tr '\n' ' ' <<<"$others")"; fi
done

step "auditwheel show"
"$tools/bin/auditwheel" show "$whl" | tee "$work/auditwheel.txt"
tags=$(unzip -p "$whl" "sentinel_recovery-$version.dist-info/WHEEL" | sed -n 's/^Tag: //p' | tr '\n' ' ')
tr -s ' \n' ' ' < "$work/auditwheel.txt" | grep 'is consistent with the following platform tag: "manylinux_2_17_x86_64"' >/dev/null \
  && ok "auditwheel: manylinux_2_17_x86_64 (= $MANYLINUX); the wheel's tags: $tags" \
  || bad "auditwheel does not confirm manylinux_2_17_x86_64"
grep -q "cp39-abi3-${MANYLINUX}_x86_64" <<<"$tags" || bad "the wheel is not tagged cp39-abi3-${MANYLINUX}_x86_64: $tags"

step "C library: SONAME, symlinks, exports"
so_name=$(readelf -d "$clib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$so_name" = "$soname" ] && ok "SONAME $so_name" || bad "SONAME is '$so_name', expected $soname"
[ "$(readlink "$c/lib/$soname")" = "libsentinel_recovery.so.$version" ] && ok "lib/$soname -> libsentinel_recovery.so.$version" || bad "lib/$soname symlink"
[ "$(readlink "$c/lib/libsentinel_recovery.so")" = "$soname" ] && ok "lib/libsentinel_recovery.so -> $soname" || bad "lib/libsentinel_recovery.so symlink"
header_fns=$(sed -nE '/^typedef/d; s/^[A-Za-z_].*[ *](sr_[a-z0-9_]+)\(.*/\1/p' "$c/include/sentinel_recovery.h" | sort -u)
exports=$(nm -D --defined-only "$clib" | awk '{print $3}' | sed 's/@.*//' | sort -u)
not_sr=$(grep -v '^sr_' <<<"$exports" || true)
[ -z "$not_sr" ] && ok "exports only sr_* ($(wc -l <<<"$exports") symbols)" || bad "exports other symbols: $(tr '\n' ' ' <<<"$not_sr")"
[ "$exports" = "$header_fns" ] && ok "exports = the $(wc -l <<<"$header_fns") functions of sentinel_recovery.h" \
  || bad "exports differ from the header's functions: $(diff <(echo "$header_fns") <(echo "$exports") | grep '^[<>]' | tr '\n' ' ')"
static_fns=$(nm --defined-only "$c/lib/libsentinel_recovery.a" 2>/dev/null | awk '$2 == "T" && $3 ~ /^sr_/ {print $3}' | sort -u)
[ "$static_fns" = "$header_fns" ] && ok "libsentinel_recovery.a defines every header function" || bad "libsentinel_recovery.a lacks some header functions"

step "stripped, with debug info in the debug tarball"
for bin in "$ext" "$addon" "$clib" "$cli"; do
  name=$(basename "$bin")
  if grep -qE '\.debug_(info|line)' <<<"$(readelf -S "$bin")"; then bad "$name still has debug sections"; continue; fi
  link=$(readelf -p .gnu_debuglink "$bin" 2>/dev/null | sed -n 's/^ *\[ *0\] *//p')
  if [ -z "$link" ] || [ ! -f "$work/debug/$link" ]; then bad "$name: .gnu_debuglink '$link' not in the debug tarball"; continue; fi
  grep -q '\.debug_info' <<<"$(readelf -S "$work/debug/$link" 2>/dev/null)" || { bad "$link has no .debug_info"; continue; }
  # The debug file belongs to this binary: gdb checks the CRC of .gnu_debuglink; compare it.
  want=$(objcopy --dump-section .gnu_debuglink=/dev/stdout "$bin" | tail -c 4 | od -An -tx4 | tr -d ' ')
  have=$(python3 -c 'import sys, zlib; print("%08x" % zlib.crc32(open(sys.argv[1], "rb").read()))' "$work/debug/$link")
  [ "$want" = "$have" ] && ok "$name: no debug sections; $link (CRC $have) has them" || bad "$name: CRC of $link is $have, the link wants $want"
done

step "package layouts"
for f in sentinel_recovery/py.typed sentinel_recovery/_native.pyi sentinel_recovery/__init__.py; do
  [ -f "$work/whl/$f" ] && ok "wheel: $f" || bad "wheel lacks $f"
done
sdist_files=$(tar -tzf "$sdist")
for f in pyproject.toml python/sentinel_recovery/py.typed python/sentinel_recovery/_native.pyi core/Cargo.toml bindings-python/Cargo.toml Cargo.lock; do
  grep -qx "sentinel_recovery-$version/$f" <<<"$sdist_files" && ok "sdist: $f" || bad "sdist lacks $f"
done
tar -C "$work" -xzf "$sdist"
(cd "$work/sentinel_recovery-$version" && cargo metadata --offline --format-version 1 --manifest-path bindings-python/Cargo.toml >/dev/null 2>"$work/sdist-metadata.err") \
  && ok "sdist: its Cargo workspace resolves offline (cargo metadata)" || bad "sdist: cargo metadata failed: $(cat "$work/sdist-metadata.err")"
m=$work/npm-main/package
for f in package.json index.js index.mjs index.d.ts native.js native.d.ts; do
  [ -f "$m/$f" ] && ok "npm main: $f" || bad "npm main lacks $f"
done
compgen -G "$m/*.node" >/dev/null && bad "npm main package carries a .node" || ok "npm main: no .node (it is in the platform package)"
node -e '
  const p = require(process.argv[1]); const e = p.exports["."];
  if (!(p.types && e.types && e.import && e.require && p.main)) throw new Error("types/import/require missing");
  if (p.scripts || p.devDependencies) throw new Error("scripts or devDependencies left in the published manifest");
' "$m/package.json" && ok "npm main: types, import (ESM) and require (CJS) entry points; no install scripts" || bad "npm main manifest"
[ -f "$addon" ] && ok "npm platform: $(basename "$addon")" || bad "npm platform package lacks the .node"
node -e '
  const p = require(process.argv[1]);
  if (p.os[0] !== "linux" || p.cpu[0] !== "x64" || p.libc[0] !== "glibc" || p.main !== process.argv[2]) throw new Error("os/cpu/libc/main");
' "$work/npm-plat/package/package.json" "$(basename "$addon")" && ok "npm platform: os linux, cpu x64, libc glibc" || bad "npm platform manifest"
for f in lib/netstandard2.0/SentinelRecovery.dll lib/netstandard2.0/SentinelRecovery.xml lib/netstandard2.0/SentinelRecovery.dll.config runtimes/linux-x64/native/libsentinel_recovery.so SentinelRecovery.nuspec; do
  [ -f "$work/nupkg/$f" ] && ok "nupkg: $f" || bad "nupkg lacks $f"
done
cmp -s "$work/nupkg/runtimes/linux-x64/native/libsentinel_recovery.so" "$clib" \
  && ok "nupkg: runtimes/linux-x64/native/libsentinel_recovery.so is the C SDK's library" || bad "nupkg: native library differs from the C SDK's"
for f in include/sentinel_recovery.h lib/libsentinel_recovery.a lib/pkgconfig/sentinel_recovery.pc lib/pkgconfig/sentinel_recovery_static.pc \
         lib/cmake/SentinelRecovery/SentinelRecoveryConfig.cmake lib/cmake/SentinelRecovery/SentinelRecoveryConfigVersion.cmake; do
  [ -f "$c/$f" ] && ok "C SDK: $f" || bad "C SDK lacks $f"
done

[ "$fail" -eq 0 ] || { echo "check-artifacts: FAILED" >&2; exit 1; }
echo "check-artifacts: all checks passed"
