#!/usr/bin/env bash
# `make test`'s stage clock.
#
#   scripts/stage-times.sh mark STAGE      notes that STAGE starts now (in $SR_STAGE_LOG; a no-op
#                                          without it, so `make test-all` alone prints nothing)
#   scripts/stage-times.sh COMMAND...      runs COMMAND with a fresh $SR_STAGE_LOG, then prints
#                                          how long each stage took and the total, also when
#                                          COMMAND failed (the stage it stopped in is named), and
#                                          exits with COMMAND's status
#
# A stage's time runs from its mark to the next one, so it includes the prerequisites it was
# the first to need (the release build falls to the first stage that uses it).
set -uo pipefail

if [ "${1:-}" = mark ]; then
  [ -n "${SR_STAGE_LOG:-}" ] && echo "$2 $(date +%s)" >>"$SR_STAGE_LOG"
  exit 0
fi

SR_STAGE_LOG=$(mktemp "${TMPDIR:-/tmp}/sr-stages.XXXXXX")
export SR_STAGE_LOG
start=$(date +%s)
"$@"
status=$?
end=$(date +%s)

echo
echo "== stage times ($([ "$status" -eq 0 ] && echo passed || echo "FAILED, status $status")) =="
awk -v end="$end" -v failed="$status" '
  { name[NR] = $1; at[NR] = $2 }
  END {
    for (i = 1; i <= NR; i++) {
      stop = (i < NR) ? at[i + 1] : end
      note = (i == NR && failed != 0) ? "   <- stopped here" : ""
      printf "  %-18s %5d s%s\n", name[i], stop - at[i], note
    }
  }' "$SR_STAGE_LOG"
printf "  %-18s %5d s (%d min)\n" total "$((end - start))" "$(((end - start) / 60))"
rm -f "$SR_STAGE_LOG"
exit "$status"
