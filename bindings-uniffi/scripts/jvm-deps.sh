#!/usr/bin/env bash
# The JVM toolchain, installed only where missing (safe to run again): JDK 17 and JNA from Debian,
# the Kotlin compiler (with kotlin-stdlib and kotlinx-coroutines-core) from npm into the target dir.
set -euo pipefail
KOTLIN_VERSION=2.4.20
tools="${CARGO_TARGET_DIR:?}/jvm-tools"

need_apt=()
command -v javac >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
[ -f /usr/share/java/jna.jar ] || need_apt+=(libjna-java)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "jvm-deps: installing ${need_apt[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  if ! "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${need_apt[@]}" >/tmp/sr-apt-jvm.log 2>&1; then
    "${sudo_cmd[@]}" apt-get update >>/tmp/sr-apt-jvm.log 2>&1
    "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${need_apt[@]}" >>/tmp/sr-apt-jvm.log 2>&1 \
      || { echo "jvm-deps: apt-get failed, see /tmp/sr-apt-jvm.log" >&2; exit 1; }
  fi
fi

if [ "$(cat "$tools/node_modules/kotlin-compiler/build.txt" 2>/dev/null)" != "$KOTLIN_VERSION" ]; then
  command -v npm >/dev/null 2>&1 || { echo "jvm-deps: npm is required for the Kotlin compiler" >&2; exit 1; }
  echo "jvm-deps: installing kotlin-compiler $KOTLIN_VERSION (npm) into $tools"
  mkdir -p "$tools"
  [ -f "$tools/package.json" ] || echo '{"private":true}' >"$tools/package.json"
  (cd "$tools" && npm install --no-audit --no-fund --silent "kotlin-compiler@$KOTLIN_VERSION")
fi
