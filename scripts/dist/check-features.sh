#!/usr/bin/env bash
# One build of the core per profile (debug test targets add one, with the core's `internals`; see
# below): every package selection that `make test` and `make dist`
# hand to cargo (or that maturin and the napi CLI hand to it) must resolve each dependency with
# the features the whole workspace resolves it with. Cargo unifies features only over the packages
# one invocation selects, so a selection that enables fewer (or other) features of a shared
# dependency (tokio, serde_json, futures-util, syn, ...) gets its own build of that dependency and
# of every crate above it, the core included. workspace-hack/ (a dependency of every member but
# the core) lists the union; this check fails, naming the package and both feature sets, when a
# new dependency or feature makes a selection differ. Only `cargo tree`: nothing is compiled.
#   check-features.sh        exit 1 when some selection builds a dependency with other features
source "$(dirname "$0")/common.sh"
cd "$root"

# "package version [features]" for each unit a selection builds (normal and build edges; dev
# edges where the invocation builds tests).
units() { # EDGES ARGS...
  local edges=$1; shift
  cargo tree --offline -q -e "$edges" --prefix none -f '{p} [{f}]' "$@" \
    | sed -e '/^$/d' -e 's/ (\*)$//' -e "s| ($root[^)]*)||" -e 's/ (proc-macro)//' | sort -u
}

bad=0
# compare NAME REFERENCE-FILE EDGES ARGS...: every unit of the selection is one the reference builds.
compare() {
  local name=$1 ref=$2; shift 2
  local extra
  extra=$(comm -23 <(units "$@") "$ref")
  if [ -z "$extra" ]; then
    printf '  ok   %s\n' "$name"
    return
  fi
  printf '  BAD  %s builds these with other features than the whole workspace:\n' "$name"
  while read -r pkg ver feats; do
    printf '         %s %s %s; the workspace: %s\n' "$pkg" "$ver" "$feats" \
      "$(grep "^$pkg $ver " "$ref" | cut -d' ' -f3- | paste -sd' ')"
  done <<<"$extra"
  bad=1
}

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
member() { echo "-p sentinel-recovery-$1"; }

# Debug builds come in two sets, each with one feature set: what builds libraries and binaries
# (the core without features, as every binding and the shipped artifacts have it), and what builds
# test targets (dev edges: the testkit's suites enable the core's `internals`, so the core is
# compiled once more for them). The ffi crate's `test-hooks` only adds exports to that leaf crate
# and changes no dependency's features: both forms of that crate are in the reference.
echo "debug builds of libraries and binaries (make test): against cargo build --workspace"
{ units normal,build --workspace; units normal,build --workspace --features sentinel-recovery-ffi/test-hooks; } \
  | sort -u > "$tmp/debug"
# shellcheck disable=SC2046
{
  compare "cargo build -p ffi -p testkit --features ffi/test-hooks (test-c)" "$tmp/debug" normal,build $(member ffi) $(member testkit) --features sentinel-recovery-ffi/test-hooks
  compare "cargo build -p ffi -p testkit (soak)" "$tmp/debug" normal,build $(member ffi) $(member testkit)
  compare "cargo build -p testkit (the suites' sr-topology)" "$tmp/debug" normal,build $(member testkit)
  compare "cargo build -p ffi --features test-hooks (dotnet)" "$tmp/debug" normal,build $(member ffi) --features test-hooks
  compare "cargo build -p uniffi (jvm, ruby)" "$tmp/debug" normal,build $(member uniffi)
  compare "cargo run -p xtask (lint)" "$tmp/debug" normal,build -p xtask
}
echo "debug builds of test targets (make test): against cargo test --workspace --all-targets"
units normal,build,dev --workspace > "$tmp/debug-tests"
# shellcheck disable=SC2046
{
  compare "cargo test -p testkit (test-partitions)" "$tmp/debug-tests" normal,build,dev $(member testkit)
}

echo "dist builds (scripts/dist/build.sh, --target $TRIPLE): against cargo build --workspace"
units normal,build --workspace --target "$TRIPLE" > "$tmp/dist"
# shellcheck disable=SC2046
{
  compare "cargo build -p ffi -p cli -p uniffi" "$tmp/dist" normal,build --target "$TRIPLE" $(member ffi) $(member cli) $(member uniffi)
  compare "maturin build (-p python)" "$tmp/dist" normal,build --target "$TRIPLE" $(member python)
  compare "napi build (-p node)" "$tmp/dist" normal,build --target "$TRIPLE" $(member node)
}

# Test-only features never reach a shipped artifact: not the core's internals, not the C
# library's test hooks (check-artifacts.sh also compares the library's exports with the header).
echo "dist builds: no test-only feature"
for sel in "$(member ffi) $(member cli) $(member uniffi)" "$(member python)" "$(member node)"; do
  # shellcheck disable=SC2086
  leaked=$(units normal,build --target "$TRIPLE" $sel | grep -E '^sentinel-recovery v.*internals|^sentinel-recovery-ffi v.*test-hooks' || true)
  if [ -n "$leaked" ]; then
    printf '  BAD  %s builds a test-only feature: %s\n' "$sel" "$leaked"
    bad=1
  else
    printf '  ok   %s\n' "$sel"
  fi
done

if [ "$bad" != 0 ]; then
  cat >&2 <<'EOF'
check-features: some selection would compile the core (and what it stands on) once more.
Add the features listed above to workspace-hack/Cargo.toml (the union of every member's), or
regenerate it with `cargo hakari generate` (.config/hakari.toml), then run this again.
EOF
  exit 1
fi
