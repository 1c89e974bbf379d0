#!/usr/bin/env bash
# Runs each named fuzz target for SECONDS: `fuzz/run.sh SECONDS target...` (mk/fuzz.mk calls it).
#
# Each target starts from its committed seeds (fuzz/corpus/<target>, read only) plus a working
# corpus that grows run after run in fuzz/target/corpus/<target> (not committed). Builds go to
# fuzz/target: cargo-fuzz builds with its own instrumentation flags, so never the shared
# CARGO_TARGET_DIR. A crash, panic or failed assertion stops that target, leaves the input in
# fuzz/artifacts/<target>/ and makes the run fail; the other targets still run.
# FUZZ_TOOLCHAIN (nightly) and FUZZ_FLAGS (no sanitizer: the code under test is safe Rust, and
# libFuzzer runs 2-3 times faster without ASan; debug assertions on, for overflow checks) adjust it.
set -uo pipefail

seconds=$1
shift
cd "$(dirname "$0")/.."
toolchain=${FUZZ_TOOLCHAIN:-nightly}
read -r -a flags <<<"${FUZZ_FLAGS:---sanitizer none --debug-assertions}"
build=(--fuzz-dir fuzz --target-dir fuzz/target "${flags[@]}")

cargo "+$toolchain" fuzz build "${build[@]}" || exit 1

# Targets run FUZZ_JOBS (2) at a time: each libFuzzer process uses one core, so on two cores the
# run takes half as long and every target still gets its SECONDS.
parallel=${FUZZ_JOBS:-2}
results=fuzz/target/results
rm -rf "$results" && mkdir -p "$results" fuzz/target/logs

# run_one TARGET: fuzzes it and leaves its summary line in $results/TARGET.
run_one() {
    local target=$1 log="fuzz/target/logs/$1.log" done_line
    mkdir -p "fuzz/target/corpus/$target"
    # -timeout: one input taking over 10 s is a finding too (a hang, or quadratic work).
    if cargo "+$toolchain" fuzz run "${build[@]}" "$target" \
        "fuzz/target/corpus/$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -timeout=10 -print_final_stats=1 >"$log" 2>&1; then
        done_line=$(grep -a -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1)
        echo "$target: ok   $done_line" >"$results/$target"
    else
        echo "$target: FAILED, input in fuzz/artifacts/$target/, see $log" >"$results/$target"
    fi
}

for target in "$@"; do
    while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n; done
    echo "fuzz: $target for ${seconds}s (log: fuzz/target/logs/$target.log)"
    run_one "$target" &
done
wait

status=0
for target in "$@"; do
    line=$(cat "$results/$target" 2>/dev/null || echo "$target: FAILED, no result (see fuzz/target/logs/$target.log)")
    case $line in
        *": ok "*) ;;
        *)
            status=1
            grep -a -A4 -E 'panicked at|ERROR: libFuzzer' "fuzz/target/logs/$target.log" 2>/dev/null | head -20
            ;;
    esac
    echo "$line"
done
exit $status
