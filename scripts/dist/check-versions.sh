#!/usr/bin/env bash
# One version everywhere: the workspace version ([workspace.package] of Cargo.toml) against
#   sources    every crate (version.workspace), pyproject.toml (dynamic, from Cargo), package.json,
#              npm/*/package.json, the csproj, the nuspec ($version$, filled by pack.sh), the
#              .pc/CMake templates (@VERSION@), CHANGELOG.md (a section for it)
#   artifacts  dist/: file names, the wheel's METADATA, the sdist's PKG-INFO, both npm manifests
#              (and the optionalDependencies / loader check between them), the nupkg's nuspec,
#              the C SDK's .pc, CMake version file and library name, the CLI's --version, the
#              jar's name and the gem's spec
# Prints every place it looked at; exits 1 at the end if any disagrees.
source "$(dirname "$0")/common.sh"
mode=${1:-sources}
bad=0
check() { # WHAT FOUND
  if [ "$2" = "$version" ]; then
    printf '  ok   %-62s %s\n' "$1" "$2"
  else
    printf '  BAD  %-62s %s (expected %s)\n' "$1" "${2:-<none>}" "$version"
    bad=1
  fi
}
present() { # WHAT FILE PATTERN
  if grep -q -- "$3" "$2"; then printf '  ok   %-62s %s\n' "$1" "$3"; else
    printf '  BAD  %-62s no %s in %s\n' "$1" "$3" "$2"; bad=1; fi
}
json() { node -e 'const o=JSON.parse(require("fs").readFileSync(0,"utf8")); const v=process.argv[1].split(".").reduce((a,k)=>a==null?a:a[k],o); process.stdout.write(v==null?"":String(v))' "$1"; }

if [ "$mode" = sources ]; then
  echo "workspace version: $version"
  # Every workspace member, as cargo resolves it (version.workspace = true or a literal).
  crates=$(cd "$root" && cargo metadata --no-deps --format-version 1 --offline \
             | node -e 'for (const p of JSON.parse(require("fs").readFileSync(0, "utf8")).packages) console.log(p.name, p.version)') \
    || die "cargo metadata failed"
  [ -n "$crates" ] || die "cargo metadata listed no crates"
  while read -r name ver; do
    check "crate $name" "$ver"
  done <<<"$crates"
  py=$root/bindings-python/pyproject.toml
  if grep -q '^version *=' "$py"; then check "bindings-python/pyproject.toml" "$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$py")"
  else present "bindings-python/pyproject.toml (from Cargo.toml)" "$py" 'dynamic = \["version"\]'; fi
  check "bindings-node/package.json" "$(json version < "$root/bindings-node/package.json")"
  for p in "$root"/bindings-node/npm/*/package.json; do
    check "${p#"$root"/}" "$(json version < "$p")"
  done
  check "bindings-dotnet/SentinelRecovery.csproj <Version>" \
    "$(sed -n 's/.*<Version>\(.*\)<\/Version>.*/\1/p' "$root/bindings-dotnet/SentinelRecovery.csproj")"
  present "bindings-dotnet/SentinelRecovery.nuspec (filled by pack.sh)" "$root/bindings-dotnet/SentinelRecovery.nuspec" '<version>\$version\$</version>'
  for t in ffi-c/sentinel_recovery.pc.in ffi-c/sentinel_recovery_static.pc.in ffi-c/cmake/SentinelRecoveryConfigVersion.cmake.in; do
    present "$t (filled by scripts/dist)" "$root/$t" '@VERSION@'
  done
  present "CHANGELOG.md" "$root/CHANGELOG.md" "^## \[$version\]"
else
  [ -d "$DIST" ] || die "no $DIST: run make dist"
  echo "workspace version: $version; artifacts in $DIST"
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  whl=$(ls "$DIST"/sentinel_recovery-*.whl)
  check "$(basename "$whl") (name)" "$(basename "$whl" | cut -d- -f2)"
  check "  METADATA Version" "$(unzip -p "$whl" "sentinel_recovery-$version.dist-info/METADATA" 2>/dev/null | sed -n 's/^Version: //p')"
  sdist=$(ls "$DIST"/sentinel_recovery-*.tar.gz)
  check "$(basename "$sdist") PKG-INFO Version" "$(tar -xzOf "$sdist" --wildcards '*/PKG-INFO' | sed -n 's/^Version: //p' | head -1)"
  main=$(ls "$DIST"/sentinel-recovery-[0-9]*.tgz)
  plat=$(ls "$DIST"/sentinel-recovery-"$NPM_PLATFORM"-*.tgz)
  tar -xzOf "$main" package/package.json > "$tmp/main.json"
  tar -xzOf "$plat" package/package.json > "$tmp/plat.json"
  check "$(basename "$main") package.json" "$(json version < "$tmp/main.json")"
  check "  optionalDependencies[sentinel-recovery-$NPM_PLATFORM]" "$(json "optionalDependencies.sentinel-recovery-$NPM_PLATFORM" < "$tmp/main.json")"
  check "  native.js expects its platform package at" \
    "$(tar -xzOf "$main" package/native.js | grep -A1 "require('sentinel-recovery-$NPM_PLATFORM/package.json')" | sed -n "s/.*bindingPackageVersion !== '\([^']*\)'.*/\1/p" | head -1)"
  check "$(basename "$plat") package.json" "$(json version < "$tmp/plat.json")"
  nupkg=$DIST/SentinelRecovery.$version.nupkg
  if [ -f "$nupkg" ]; then
    check "$(basename "$nupkg") nuspec <version>" "$(unzip -p "$nupkg" SentinelRecovery.nuspec | sed -n 's/.*<version>\(.*\)<\/version>.*/\1/p')"
  else check "SentinelRecovery.<version>.nupkg" "$(ls "$DIST" | sed -n 's/^SentinelRecovery\.\(.*\)\.nupkg$/\1/p')"; fi
  csdk=$DIST/sentinel-recovery-c-$version-$PLATFORM.tar.gz
  [ -f "$csdk" ] || die "no $(basename "$csdk")"
  tar -C "$tmp" -xzf "$csdk"
  c=$tmp/sentinel-recovery-c-$version-$PLATFORM
  check "$(basename "$csdk") sentinel_recovery.pc" "$(sed -n 's/^Version: //p' "$c/lib/pkgconfig/sentinel_recovery.pc")"
  check "  sentinel_recovery_static.pc" "$(sed -n 's/^Version: //p' "$c/lib/pkgconfig/sentinel_recovery_static.pc")"
  check "  SentinelRecoveryConfigVersion.cmake" "$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")/\1/p' "$c/lib/cmake/SentinelRecovery/SentinelRecoveryConfigVersion.cmake")"
  check "  lib/libsentinel_recovery.so.<version>" "$(ls "$c/lib" | sed -n 's/^libsentinel_recovery\.so\.\([0-9]*\.[0-9]*\.[0-9].*\)$/\1/p')"
  cli=$DIST/sentinel-recovery-cli-$version-$PLATFORM.tar.gz
  [ -f "$cli" ] || die "no $(basename "$cli")"
  tar -C "$tmp" -xzf "$cli"
  check "$(basename "$cli") --version" "$("$tmp/sentinel-recovery-cli-$version-$PLATFORM/bin/sentinel-recovery" --version | sed 's/^sentinel-recovery //')"
  check "sentinel-recovery-jvm-<version>.jar" "$(ls "$DIST" | sed -n 's/^sentinel-recovery-jvm-\(.*\)\.jar$/\1/p')"
  gem=$(ls "$DIST"/sentinel_recovery-*-x86_64-linux.gem)
  check "$(basename "$gem") spec version" "$(ruby -rrubygems/package -e 'puts Gem::Package.new(ARGV[0]).spec.version' "$gem")"
fi
if [ "$bad" -ne 0 ]; then
  echo "versions disagree: the workspace version in Cargo.toml is the one to follow" >&2
  exit 1
fi
echo "all versions agree: $version"
