#!/usr/bin/env bash
# `make test-c`: checks the committed header, compiles it as C11 and C++17, and runs the C tests
# against a real topology plainly, under valgrind and under AddressSanitizer, then runs the
# example through a kill -9 failover. Any failure fails the whole run.
set -euo pipefail

# Each is ffi-c/tests/NAME.c, run as `NAME /path/to/sr-topology`, printing "N passed, N failed" last.
C_TESTS=(test_ffi test_deadlines test_deadline_cases test_timeout_cases test_argument_cases test_doctor_option_cases test_pubsub test_apps test_doctor test_mailbox test_proxy)

ffi=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$ffi/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
lib=$target/debug
out=$target/ffi-c-tests
topology_bin=$lib/sr-topology
CBINDGEN_VERSION=0.29.4
STRICT=(-Wall -Wextra -Werror -pedantic)
# The shared cases every binding's suite reads (tests/cases/).
CASES=(-DSR_CASES_FILE="\"$root/tests/cases/deadlines.tsv\"" -DSR_TIMEOUT_CASES_FILE="\"$root/tests/cases/timeouts.tsv\""
       -DSR_ARGUMENT_CASES_FILE="\"$root/tests/cases/arguments.tsv\""
       -DSR_DOCTOR_OPTION_CASES_FILE="\"$root/tests/cases/doctor_options.tsv\"")
mkdir -p "$out"

step() { printf '\n== %s\n' "$*"; }

# Tools, installed only where missing.
if ! cbindgen --version 2>/dev/null | grep -qx "cbindgen $CBINDGEN_VERSION"; then
  step "installing cbindgen $CBINDGEN_VERSION"
  cargo install cbindgen --version "$CBINDGEN_VERSION" --locked
fi
# hiredis (libhiredis-dev): test_proxy.c's client, one nobody here wrote.
if ! command -v valgrind >/dev/null || ! command -v g++ >/dev/null || ! command -v pkg-config >/dev/null \
   || [ ! -f /usr/include/hiredis/hiredis.h ]; then
  step "installing valgrind, g++, pkg-config, libhiredis-dev"
  sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get install -y --no-install-recommends valgrind g++ pkg-config libhiredis-dev >/dev/null 2>&1 \
    || { "${sudo_cmd[@]}" apt-get update >/dev/null && \
         "${sudo_cmd[@]}" apt-get install -y --no-install-recommends valgrind g++ pkg-config libhiredis-dev >/dev/null; }
fi

step "build libsentinel_recovery (debug, with the test-hooks feature test_ffi.c calls) and sr-topology"
(cd "$root" && cargo build -p sentinel-recovery-ffi -p sentinel-recovery-testkit --lib --bin sr-topology \
  --features sentinel-recovery-ffi/test-hooks)

step "header is up to date"
cbindgen --quiet --config "$ffi/cbindgen.toml" --crate sentinel-recovery-ffi \
  --output "$out/sentinel_recovery.h" "$root"
if ! diff -u "$ffi/include/sentinel_recovery.h" "$out/sentinel_recovery.h"; then
  echo "ffi-c/include/sentinel_recovery.h is stale: regenerate it with" >&2
  echo "  cbindgen --config ffi-c/cbindgen.toml --crate sentinel-recovery-ffi --output ffi-c/include/sentinel_recovery.h" >&2
  exit 1
fi
echo "ffi-c/include/sentinel_recovery.h matches cbindgen $CBINDGEN_VERSION output"

step "header compiles as C11 and C++17"
echo '#include "sentinel_recovery.h"
int main(void) { return sr_version() == 0; }' > "$out/header_c.c"
echo '#include "sentinel_recovery.h"
int main() { sr_client_t *c = nullptr; return sr_client_close(c) == SR_OK; }' > "$out/header_cpp.cpp"
gcc -std=c11 "${STRICT[@]}" -I"$ffi/include" -c "$out/header_c.c" -o "$out/header_c.o"
g++ -std=c++17 "${STRICT[@]}" -I"$ffi/include" -c "$out/header_cpp.cpp" -o "$out/header_cpp.o"
echo "gcc -std=c11 and g++ -std=c++17 with ${STRICT[*]}: ok"

step "build the C tests and the example"
link=(-L"$lib" -lsentinel_recovery -Wl,-rpath,"$lib" -lpthread -lm)
for t in "${C_TESTS[@]}"; do
  extra=()
  [ "$t" != test_proxy ] || extra=($(pkg-config --libs hiredis))
  gcc -std=c11 "${STRICT[@]}" "${CASES[@]}" -g -I"$ffi/include" "$ffi/tests/$t.c" -o "$out/$t" "${link[@]}" "${extra[@]}"
  gcc -std=c11 "${STRICT[@]}" "${CASES[@]}" -g -fsanitize=address -fno-omit-frame-pointer -I"$ffi/include" \
    "$ffi/tests/$t.c" -o "$out/${t}_asan" "${link[@]}" "${extra[@]}"
done
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)
sed -e "s|@PREFIX@|$target|" -e "s|@LIBDIR@|$lib|" -e "s|@INCLUDEDIR@|$ffi/include|" \
  -e "s|@VERSION@|$version|" "$ffi/sentinel_recovery.pc.in" > "$out/sentinel_recovery.pc"
export PKG_CONFIG_PATH="$out"
gcc -std=c11 "${STRICT[@]}" "$ffi/examples/failover.c" -o "$out/failover" \
  $(pkg-config --cflags --libs sentinel_recovery) -Wl,-rpath,"$lib"
# The static library links on its own with the documented extra libraries.
gcc "$out/header_c.o" "$lib/libsentinel_recovery.a" -lpthread -ldl -lm -o "$out/header_static"
"$out/header_static"
echo "built ${C_TESTS[*]} (each also *_asan), failover (via pkg-config sentinel_recovery $version), static link ok"

for t in "${C_TESTS[@]}"; do
  step "C tests: $t"
  "$out/$t" "$topology_bin"
done

for t in "${C_TESTS[@]}"; do
  step "C tests under valgrind (memcheck): $t"
  log=$out/valgrind.log
  [ "$t" = test_ffi ] || log=$out/valgrind-$t.log
  valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
    --show-leak-kinds=definite --log-file="$log" \
    "$out/$t" "$topology_bin" | grep -v '^ok '
  grep -E "ERROR SUMMARY|definitely lost|indirectly lost|possibly lost|still reachable" "$log" | sed 's/^==[0-9]*== *//'
done

for t in "${C_TESTS[@]}"; do
  step "C tests under AddressSanitizer: $t"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 "$out/${t}_asan" "$topology_bin" | grep -v '^ok '
done

step "example: follow a kill -9 failover"
coproc TOPO { exec "$topology_bin" up --json; }
exec {topo_in}>&"${TOPO[1]}"
read -r -u "${TOPO[0]}" first
url=$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' <<<"$first")
port=$(sed -n 's/.*"primary":{[^}]*"port":\([0-9]*\).*/\1/p' <<<"$first")
stop_topology() { echo down >&"$topo_in" 2>/dev/null || true; exec {topo_in}>&-; wait "$TOPO_PID" 2>/dev/null || true; }
trap stop_topology EXIT
"$out/failover" "$url" 90 > "$out/failover.log" 2>&1 &
example=$!
for _ in $(seq 300); do grep -q "waiting for a primary change" "$out/failover.log" && break; sleep 0.1; done
echo "kill9 $port" >&"$topo_in"
status=0; wait "$example" || status=$?
grep -v '^event:' "$out/failover.log"
if [ "$status" -ne 0 ] || ! grep -q "primary switched: 127.0.0.1:$port -> " "$out/failover.log"; then
  echo "the example did not print the switch (exit status $status)" >&2
  exit 1
fi
echo "example printed the switch"
