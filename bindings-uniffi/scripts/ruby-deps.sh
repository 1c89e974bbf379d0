#!/usr/bin/env bash
# Ruby with ruby-ffi and minitest from Debian, installed only where missing (safe to run again).
set -euo pipefail
need_apt=()
command -v ruby >/dev/null 2>&1 || need_apt+=(ruby)
command -v gem >/dev/null 2>&1 || need_apt+=(ruby)
ruby -e 'require "ffi"' >/dev/null 2>&1 || need_apt+=(ruby-ffi)
ruby -e 'require "minitest"' >/dev/null 2>&1 || need_apt+=(ruby-minitest)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "ruby-deps: installing ${need_apt[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  if ! "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${need_apt[@]}" >/tmp/sr-apt-ruby.log 2>&1; then
    "${sudo_cmd[@]}" apt-get update >>/tmp/sr-apt-ruby.log 2>&1
    "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${need_apt[@]}" >>/tmp/sr-apt-ruby.log 2>&1 \
      || { echo "ruby-deps: apt-get failed, see /tmp/sr-apt-ruby.log" >&2; exit 1; }
  fi
fi
