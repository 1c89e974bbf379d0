#!/usr/bin/env bash
# Builds the JVM binding and runs its suites:
#   1. the native library and uniffi-bindgen (cargo), the Kotlin generated from the library;
#   2. the jar: generated + idiomatic Kotlin, and the native library under linux-x86-64/ where
#      JNA looks for it on the class path;
#   3. `test`: the Kotlin suite and the Java test, against real topologies (sr-topology).
# Usage: jvm.sh build | test
# `make dist` (scripts/dist/build.sh) packs its release library instead of building one:
#   SR_UNIFFI_LIB (the library shipped in the jar), SR_UNIFFI_META_LIB (its unstripped twin, which
#   uniffi-bindgen reads the interface from), SR_UNIFFI_BINDGEN, SR_JVM_OUT (where the jar goes).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
profile="${SR_JVM_PROFILE:-debug}"
kotlin="$CARGO_TARGET_DIR/jvm-tools/node_modules/kotlin-compiler"
out="${SR_JVM_OUT:-$CARGO_TARGET_DIR/jvm}"
lib="${SR_UNIFFI_LIB:-$CARGO_TARGET_DIR/$profile/libsentinel_recovery_uniffi.so}"
meta_lib="${SR_UNIFFI_META_LIB:-$lib}"
bindgen="${SR_UNIFFI_BINDGEN:-$CARGO_TARGET_DIR/$profile/uniffi-bindgen}"
jar="$out/sentinel-recovery.jar"
runtime_cp="$kotlin/lib/kotlin-stdlib.jar:$kotlin/lib/kotlinx-coroutines-core-jvm.jar:/usr/share/java/jna.jar"
kotlinc=("$kotlin/bin/kotlinc" -jvm-target 17 -nowarn)

build() {
  bindings-uniffi/scripts/jvm-deps.sh
  if [ -z "${SR_UNIFFI_LIB:-}" ]; then
    if [ "$profile" = release ]; then
      cargo build -q --release -p sentinel-recovery-uniffi
    else
      cargo build -q -p sentinel-recovery-uniffi
    fi
  fi
  rm -rf "$out/gen" "$out/classes" && mkdir -p "$out/gen" "$out/classes/linux-x86-64"
  "$bindgen" generate --library "$meta_lib" --language kotlin \
    --out-dir "$out/gen" --no-format >/dev/null
  "${kotlinc[@]}" -cp "$runtime_cp" -d "$out/classes" \
    "$out/gen" bindings-uniffi/jvm/src/main/kotlin
  cp "$lib" "$out/classes/linux-x86-64/libsentinel_recovery_uniffi.so"
  jar --create --file "$jar" -C "$out/classes" .
  echo "jvm: built $jar"
}

test_suites() {
  cargo build -q -p sentinel-recovery-testkit --bins
  rm -rf "$out/test-classes" && mkdir -p "$out/test-classes"
  "${kotlinc[@]}" -cp "$jar:$runtime_cp" -d "$out/test-classes" \
    bindings-uniffi/jvm/src/test/kotlin bindings-uniffi/jvm/src/test/java
  javac -nowarn -d "$out/test-classes" -cp "$jar:$runtime_cp:$out/test-classes" \
    bindings-uniffi/jvm/src/test/java/sentinelrecovery/*.java
  local cp="$jar:$runtime_cp:$out/test-classes"
  java -cp "$cp" sentinelrecovery.ClientTestsKt
  java -cp "$cp" sentinelrecovery.JavaClientTest
}

case "${1:-test}" in
  build) build ;;
  test) build && test_suites ;;
  *) echo "usage: $0 build | test" >&2; exit 2 ;;
esac
