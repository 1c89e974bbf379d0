#!/usr/bin/env bash
# Installs what the tests and the demo need, only where it is missing (safe to run again).
set -euo pipefail

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-sentinel >/dev/null 2>&1 || need_apt+=(redis-sentinel)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
command -v cc >/dev/null 2>&1 || need_apt+=(gcc)
[ -f /usr/include/hiredis/hiredis.h ] || need_apt+=(libhiredis-dev) # the C suite's test_proxy.c

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "deps: installing ${need_apt[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  if ! "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${need_apt[@]}" >/tmp/sr-apt.log 2>&1; then
    "${sudo_cmd[@]}" apt-get update >>/tmp/sr-apt.log 2>&1
    "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${need_apt[@]}" >>/tmp/sr-apt.log 2>&1 \
      || { echo "deps: apt-get failed, see /tmp/sr-apt.log" >&2; exit 1; }
  fi
fi
command -v cargo >/dev/null 2>&1 || { echo "deps: cargo (Rust toolchain) is required" >&2; exit 1; }
