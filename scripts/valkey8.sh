#!/usr/bin/env bash
# Installs Valkey 8 (valkey-server, valkey-sentinel) from Debian's <codename>-backports suite when
# it is missing; safe to run again. The backports source is derived from the machine's own apt
# sources: the stanza of /etc/apt/sources.list.d/debian.sources (or, failing that, the line of
# /etc/apt/sources.list) that lists the release's own suite gives URIs, Components and Signed-By,
# and a new .sources file names the backports suite. No service is started by the install: the
# tests run their own servers on free loopback ports anyway.
set -euo pipefail

want_major=8
sources_in=${SR_APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
codename=${codename:-bookworm}
suite="$codename-backports"
sources_out=/etc/apt/sources.list.d/sr-$suite.sources
log=/tmp/sr-apt-valkey8.log

have_valkey8() {
  command -v valkey-server >/dev/null 2>&1 && command -v valkey-sentinel >/dev/null 2>&1 || return 1
  local version
  version=$(valkey-server --version 2>/dev/null) || return 1
  [[ $version == *" v=$want_major."* ]]
}

if have_valkey8; then
  exit 0
fi

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)

# The backports stanza, from the stanza (deb822) that has the release's own suite: every field
# but Suites copied (continuation lines of a multi-line Signed-By included), comments dropped.
derive_deb822() {
  awk -v rel="$codename" -v bp="$suite" '
    function flush() {
      if (n > 0 && match_rel) {
        for (i = 1; i <= n; i++) print lines[i]
        print "Suites: " bp
        print ""
        found = 1
      }
      n = 0; match_rel = 0; skip_cont = 0
    }
    /^[ \t]*#/ { next }
    /^[ \t]*$/ { flush(); next }
    /^[ \t]/ { if (!skip_cont) lines[++n] = $0; next }
    {
      skip_cont = 0
      if (tolower($0) ~ /^suites:/) {
        s = $0; sub(/^[^:]*:/, "", s)
        k = split(s, w, /[ \t]+/)
        for (i = 1; i <= k; i++) if (w[i] == rel) match_rel = 1
        skip_cont = 1
        next
      }
      if (tolower($0) ~ /^enabled:/) { skip_cont = 1; next }
      lines[++n] = $0
    }
    END { flush(); if (!found) exit 1 }
  ' "$sources_in"
}

# Same from a one-line-style list: `deb [options] URI <codename> components...`.
derive_list() {
  awk -v rel="$codename" -v bp="$suite" '
    /^[ \t]*deb[ \t]/ {
      line = $0; opts = ""
      if (match(line, /\[[^]]*\]/)) {
        opts = substr(line, RSTART + 1, RLENGTH - 2)
        line = substr(line, 1, RSTART - 1) substr(line, RSTART + RLENGTH)
      }
      k = split(line, w, /[ \t]+/)
      if (w[3] != rel) next
      comps = ""
      for (i = 4; i <= k; i++) if (w[i] != "") comps = comps (comps == "" ? "" : " ") w[i]
      print "Types: deb"
      print "URIs: " w[2]
      print "Suites: " bp
      print "Components: " comps
      m = split(opts, o, /[ \t]+/)
      for (i = 1; i <= m; i++) if (o[i] ~ /^signed-by=/) { sub(/^signed-by=/, "", o[i]); print "Signed-By: " o[i] }
      print ""
      found = 1
    }
    END { if (!found) exit 1 }
  ' /etc/apt/sources.list
}

if [ -f "$sources_in" ] && stanza=$(derive_deb822) && [ -n "$stanza" ]; then
  :
elif [ -f /etc/apt/sources.list ] && stanza=$(derive_list) && [ -n "$stanza" ]; then
  :
else
  echo "valkey8: no apt source for suite '$codename' in $sources_in or /etc/apt/sources.list" >&2
  exit 1
fi
stanza="# Added by sentinel-recovery scripts/valkey8.sh: $suite, derived from the release's source.
$stanza"

if [ ! -f "$sources_out" ] || [ "$(cat "$sources_out")" != "$stanza" ]; then
  echo "valkey8: adding $suite as $sources_out"
  printf '%s\n' "$stanza" | "${sudo_cmd[@]}" tee "$sources_out" >/dev/null
fi

export DEBIAN_FRONTEND=noninteractive
# Only the new source's index, without dropping the other lists.
: >"$log"
"${sudo_cmd[@]}" apt-get update -o Dir::Etc::sourcelist="$sources_out" -o Dir::Etc::sourceparts=- \
  -o APT::Get::List-Cleanup=0 >>"$log" 2>&1 \
  || { echo "valkey8: apt-get update for $suite failed, see $log" >&2; exit 1; }

# Keep maintainer scripts from starting valkey-server/valkey-sentinel services (invoke-rc.d asks
# policy-rc.d; 101 = action forbidden). Only when the machine has no policy of its own.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo_cmd[@]}" tee "$policy" >/dev/null
  "${sudo_cmd[@]}" chmod 755 "$policy"
  own_policy=1
fi
cleanup() { [ "$own_policy" -eq 0 ] || "${sudo_cmd[@]}" rm -f "$policy"; }
trap cleanup EXIT

install_valkey() {
  "${sudo_cmd[@]}" apt-get install -y --no-install-recommends -t "$suite" \
    valkey-server valkey-sentinel >>"$log" 2>&1
}
echo "valkey8: installing valkey-server valkey-sentinel from $suite"
if ! install_valkey; then
  # The release's own lists may be missing or stale (dependencies come from there).
  "${sudo_cmd[@]}" apt-get update >>"$log" 2>&1
  install_valkey || { echo "valkey8: apt-get install failed, see $log" >&2; exit 1; }
fi

# A system that started the services anyway (e.g. systemd without a policy) keeps them off.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  for unit in valkey-server valkey-sentinel; do
    "${sudo_cmd[@]}" systemctl disable --now "$unit" >>"$log" 2>&1 || true
  done
fi

have_valkey8 || {
  echo "valkey8: valkey-server $want_major.x still missing after install: $(valkey-server --version 2>&1)" >&2
  exit 1
}
valkey-server --version
