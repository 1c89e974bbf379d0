#!/usr/bin/env bash
# Builds the Ruby gem and runs its minitest suite:
#   1. the native library and uniffi-bindgen (cargo), the Ruby binding generated from the library;
#   2. the gem (`gem build`) from a staging directory: lib/sentinel_recovery.rb, the generated
#      lib/sentinel_recovery/sentinel_recovery_uniffi.rb and the library beside it;
#   3. `test`: the gem installed into the target dir, the suite run against it and real
#      topologies (sr-topology).
# Usage: ruby.sh build | test
# `make dist` (scripts/dist/build.sh) packs its release library instead of building one:
#   SR_UNIFFI_LIB (the library shipped in the gem), SR_UNIFFI_META_LIB (its unstripped twin, which
#   uniffi-bindgen reads the interface from), SR_UNIFFI_BINDGEN, SR_RUBY_OUT (where the gem goes).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
profile="${SR_RUBY_PROFILE:-debug}"
out="${SR_RUBY_OUT:-$CARGO_TARGET_DIR/ruby}"
stage="$out/gem"
lib="${SR_UNIFFI_LIB:-$CARGO_TARGET_DIR/$profile/libsentinel_recovery_uniffi.so}"
meta_lib="${SR_UNIFFI_META_LIB:-$lib}"
bindgen="${SR_UNIFFI_BINDGEN:-$CARGO_TARGET_DIR/$profile/uniffi-bindgen}"

build() {
  bindings-uniffi/scripts/ruby-deps.sh
  if [ -z "${SR_UNIFFI_LIB:-}" ]; then
    if [ "$profile" = release ]; then
      cargo build -q --release -p sentinel-recovery-uniffi
    else
      cargo build -q -p sentinel-recovery-uniffi
    fi
  fi
  rm -rf "$stage" && mkdir -p "$stage/lib/sentinel_recovery"
  cp bindings-uniffi/ruby/sentinel_recovery.gemspec "$stage/"
  cp bindings-uniffi/ruby/lib/sentinel_recovery.rb "$stage/lib/"
  "$bindgen" generate --library "$meta_lib" --language ruby \
    --out-dir "$stage/lib/sentinel_recovery" --no-format >/dev/null
  cp "$lib" "$stage/lib/sentinel_recovery/libsentinel_recovery_uniffi.so"
  # The one version: [workspace.package] version of the workspace Cargo.toml.
  SR_GEM_VERSION=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
  export SR_GEM_VERSION
  (cd "$stage" && gem build --quiet sentinel_recovery.gemspec >/dev/null 2>&1)
  echo "ruby: built $(ls "$stage"/*.gem)"
}

test_suite() {
  cargo build -q -p sentinel-recovery-testkit --bins
  local gems="$out/gems"
  rm -rf "$gems"
  # ffi comes from Debian's ruby-ffi, already on the default gem path.
  gem install --quiet --local --no-document --ignore-dependencies --install-dir "$gems" "$stage"/*.gem >/dev/null
  GEM_PATH="$gems:$(gem env gempath)" ruby -Ibindings-uniffi/ruby/test \
    -e 'Dir["bindings-uniffi/ruby/test/test_*.rb"].sort.each { |f| require File.expand_path(f) }' -- --verbose
}

case "${1:-test}" in
  build) build ;;
  test) build && test_suite ;;
  *) echo "usage: $0 build | test" >&2; exit 2 ;;
esac
