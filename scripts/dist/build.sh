#!/usr/bin/env bash
# `make dist`: the release artifacts, installable without a Rust toolchain, in dist/:
#
#   sentinel_recovery-<v>-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl  + sdist .tar.gz
#   sentinel-recovery-<v>.tgz, sentinel-recovery-linux-x64-gnu-<v>.tgz   (npm, napi-rs v3 layout)
#   SentinelRecovery.<v>.nupkg                                           (lib/netstandard2.0, runtimes/linux-x64/native)
#   sentinel-recovery-c-<v>-x86_64-linux-gnu.tar.gz                      (C SDK: include, lib, pkg-config, CMake)
#   sentinel-recovery-cli-<v>-x86_64-linux-gnu.tar.gz                    (the CLI)
#   sentinel-recovery-jvm-<v>.jar                                        (Kotlin/Java; linux-x86-64/ native library for JNA)
#   sentinel_recovery-<v>-x86_64-linux.gem                               (Ruby; library inside)
#   sentinel-recovery-debug-<v>-x86_64-linux-gnu.tar.gz                  (debug info of every shipped binary)
#   SHA256SUMS
#
# The three cargo invocations below (cargo for the C library, CLI and uniffi library; maturin; the
# napi CLI) select different packages, but workspace-hack/ gives every dependency one feature set
# and common.sh's zig_env gives them one environment, so the core and everything under it are
# compiled by the first and reused by the other two.
#
# Every native binary is built once, in the `dist` cargo profile for x86_64-unknown-linux-gnu and
# linked by zig against glibc 2.17's symbol versions (scripts/dist/common.sh), then stripped with
# its debug info kept in a separate .debug file (linked by .gnu_debuglink). The C library's
# stripped .so is the one in the C SDK and in the nupkg.
source "$(dirname "$0")/common.sh"
started=$SECONDS
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}

step "versions in the sources agree with the workspace version $version"
"$dist_scripts/check-versions.sh" sources

step "one feature set per dependency in every cargo invocation (workspace-hack/), so the core is compiled once"
"$dist_scripts/check-features.sh"

step "packaging tools (pinned: ${TOOL_PINS[*]}) and the zig environment"
apt_need
"$root/bindings-dotnet/scripts/deps.sh"
command -v node >/dev/null && command -v npm >/dev/null || die "node and npm are required"
# The suite's dev dependencies too (ioredis, bullmq, typescript, @types/node), from the lock file.
{ [ -x "$root/bindings-node/node_modules/.bin/napi" ] && [ -d "$root/bindings-node/node_modules/@types/node" ]; } \
  || (cd "$root/bindings-node" && npm ci --ignore-scripts --no-audit --no-fund)
zig_env
echo "linker: $CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER"

rm -rf "$stage"
mkdir -p "$stage"/{debug,python,napi,c,cli}
debug_dir=$stage/debug

# split_debug IN OUT [exe]: OUT = IN stripped (symbols too), IN's debug info in
# $debug_dir/<basename OUT>.debug, linked from OUT by .gnu_debuglink.
split_debug() {
  local in=$1 out=$2 kind=${3:-lib} dbg
  dbg=$debug_dir/$(basename "$out").debug
  objcopy --only-keep-debug "$in" "$dbg"
  if [ "$kind" = exe ]; then
    objcopy --strip-all --add-gnu-debuglink="$dbg" "$in" "$out.tmp"
  else
    objcopy --strip-unneeded --add-gnu-debuglink="$dbg" "$in" "$out.tmp"
  fi
  mv -f "$out.tmp" "$out"
}

step "cargo build --profile $PROFILE --target $TRIPLE: C library (SONAME $soname), CLI, uniffi library"
SR_FFI_SONAME=1 cargo build --profile "$PROFILE" --target "$TRIPLE" \
  -p sentinel-recovery-ffi -p sentinel-recovery-cli -p sentinel-recovery-uniffi

step "maturin: abi3 wheel ($MANYLINUX) and sdist"
(cd "$root/bindings-python" &&
  maturin build --profile "$PROFILE" --target "$TRIPLE" --compatibility "$MANYLINUX" \
    --interpreter "$tools/bin/python" -o "$stage/python/raw" &&
  maturin sdist -o "$stage/python")

step "napi build: the addon, its loader and types"
(cd "$root/bindings-node" &&
  node_modules/.bin/napi build --platform --profile "$PROFILE" --target "$TRIPLE" \
    --output-dir "$stage/napi" --js native.js --dts native.d.ts)

rm -rf "$DIST"
mkdir -p "$DIST"

step "Python: strip the extension module, repack the wheel"
raw_wheel=$(ls "$stage"/python/raw/*.whl)
wheel unpack -d "$stage/python/unpacked" "$raw_wheel" >/dev/null
ext=$(ls "$stage"/python/unpacked/*/sentinel_recovery/_native*.so)
cp "$ext" "$stage/python/_native.unstripped.so"
split_debug "$stage/python/_native.unstripped.so" "$ext"
wheel pack -d "$DIST" "$stage"/python/unpacked/* >/dev/null
cp "$stage"/python/sentinel_recovery-"$version".tar.gz "$DIST/"

step "Node: main package + linux-x64-gnu platform package"
node_addon=$stage/napi/sentinel-recovery.$NPM_PLATFORM.node
split_debug "$node_addon" "$node_addon"
node "$dist_scripts/npm-stage.cjs" "$root/bindings-node" "$stage/napi" "$stage/npm/main" "$stage/npm/$NPM_PLATFORM"
(cd "$stage/npm/main" && npm pack --ignore-scripts --silent --pack-destination "$DIST" >/dev/null)
(cd "$stage/npm/$NPM_PLATFORM" && npm pack --ignore-scripts --silent --pack-destination "$DIST" >/dev/null)

step "C SDK"
split_debug "$build_dir/libsentinel_recovery.so" "$stage/c/libsentinel_recovery.so.$version"
strip --strip-debug -o "$stage/c/libsentinel_recovery.a" "$build_dir/libsentinel_recovery.a"
c_name=sentinel-recovery-c-$version-$PLATFORM
"$dist_scripts/c-sdk.sh" "$stage/c-sdk/$c_name" '${pcfiledir}/../..'
tar -C "$stage/c-sdk" --owner=0 --group=0 --numeric-owner -czf "$DIST/$c_name.tar.gz" "$c_name"

step ".NET: the nupkg (assembly by Mono's mcs, the C SDK's libsentinel_recovery.so)"
# bindings-dotnet/scripts/build.sh and pack.sh, pointed at a scratch target dir whose
# debug/libsentinel_recovery.so is the stripped release library: the same compiler flags as the
# tested assembly, and the very library of the C SDK.
dn=$stage/dotnet
mkdir -p "$dn/debug"
cp "$stage/c/libsentinel_recovery.so.$version" "$dn/debug/libsentinel_recovery.so"
CARGO_TARGET_DIR=$dn "$root/bindings-dotnet/scripts/build.sh" >/dev/null
CARGO_TARGET_DIR=$dn SR_NATIVE_LIB=$dn/debug/libsentinel_recovery.so "$root/bindings-dotnet/scripts/pack.sh" >/dev/null
cp "$dn/dotnet/SentinelRecovery.$version.nupkg" "$DIST/"

step "JVM jar and Ruby gem (uniffi): the stripped library inside, the interface read from the unstripped one"
mkdir -p "$stage/uniffi"
split_debug "$build_dir/libsentinel_recovery_uniffi.so" "$stage/uniffi/libsentinel_recovery_uniffi.so"
uniffi_env=(SR_UNIFFI_LIB="$stage/uniffi/libsentinel_recovery_uniffi.so"
  SR_UNIFFI_META_LIB="$build_dir/libsentinel_recovery_uniffi.so" SR_UNIFFI_BINDGEN="$build_dir/uniffi-bindgen")
env "${uniffi_env[@]}" SR_JVM_OUT="$stage/uniffi/jvm" "$root/bindings-uniffi/scripts/jvm.sh" build >/dev/null
cp "$stage/uniffi/jvm/sentinel-recovery.jar" "$DIST/sentinel-recovery-jvm-$version.jar"
env "${uniffi_env[@]}" SR_RUBY_OUT="$stage/uniffi/ruby" "$root/bindings-uniffi/scripts/ruby.sh" build >/dev/null
cp "$stage/uniffi/ruby/gem/sentinel_recovery-$version-x86_64-linux.gem" "$DIST/"

step "CLI"
cli_name=sentinel-recovery-cli-$version-$PLATFORM
mkdir -p "$stage/cli/$cli_name/bin"
split_debug "$build_dir/sentinel-recovery" "$stage/cli/$cli_name/bin/sentinel-recovery" exe
cp "$root/CHANGELOG.md" "$stage/cli/$cli_name/"
tar -C "$stage/cli" --owner=0 --group=0 --numeric-owner -czf "$DIST/$cli_name.tar.gz" "$cli_name"

step "debug info"
debug_name=sentinel-recovery-debug-$version-$PLATFORM
mkdir -p "$stage/debug-pkg/$debug_name"
cp "$debug_dir"/*.debug "$stage/debug-pkg/$debug_name/"
tar -C "$stage/debug-pkg" --owner=0 --group=0 --numeric-owner -czf "$DIST/$debug_name.tar.gz" "$debug_name"

(cd "$DIST" && sha256sum -- * > SHA256SUMS)

step "versions in the artifacts agree"
"$dist_scripts/check-versions.sh" artifacts

step "sizes"
{
  printf '%-78s %10s\n' "dist/ artifact" "size"
  for f in "$DIST"/*; do
    [ "$(basename "$f")" = SHA256SUMS ] && continue
    printf '%-78s %10s\n' "$(basename "$f")" "$(human "$(size_of "$f")")"
  done
  printf '\n%-38s %12s %12s %12s\n' "binary" "unstripped" "shipped" "debug file"
  row() { printf '%-38s %12s %12s %12s\n' "$1" "$(human "$(size_of "$2")")" "$(human "$(size_of "$3")")" "$(human "$(size_of "$4")")"; }
  row "libsentinel_recovery.so" "$build_dir/libsentinel_recovery.so" "$stage/c/libsentinel_recovery.so.$version" "$debug_dir/libsentinel_recovery.so.$version.debug"
  printf '%-38s %12s %12s %12s\n' "libsentinel_recovery.a (--strip-debug)" "$(human "$(size_of "$build_dir/libsentinel_recovery.a")")" "$(human "$(size_of "$stage/c/libsentinel_recovery.a")")" -
  row "_native.abi3.so (wheel)" "$stage/python/_native.unstripped.so" "$ext" "$debug_dir/$(basename "$ext").debug"
  row "sentinel-recovery.linux-x64-gnu.node" "$build_dir/libsentinel_recovery_node.so" "$node_addon" "$debug_dir/$(basename "$node_addon").debug"
  row "libsentinel_recovery_uniffi.so (jar, gem)" "$build_dir/libsentinel_recovery_uniffi.so" "$stage/uniffi/libsentinel_recovery_uniffi.so" "$debug_dir/libsentinel_recovery_uniffi.so.debug"
  row "sentinel-recovery (CLI)" "$build_dir/sentinel-recovery" "$stage/cli/$cli_name/bin/sentinel-recovery" "$debug_dir/sentinel-recovery.debug"
} | tee "$stage/sizes.txt"
echo
echo "dist: done in $((SECONDS - started)) s ($DIST)"
