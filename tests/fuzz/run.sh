#!/usr/bin/env bash
# tests/fuzz/run.sh - `make fuzz`: runs every libFuzzer target in $FUZZ_BUILD/tests (fuzz_*) for
# FUZZ_SECONDS (default 10) each, from its seed corpus in tests/fuzz/corpus/<target>/ (copied: the repo's
# seeds are not rewritten) with ASan and UBSan; a crash, leak or sanitizer report fails the run and leaves
# the input in build-fuzz/crashes/. FUZZ_TARGETS limits the run to some targets.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${FUZZ_BUILD:-$ROOT/build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-10}
WORK=$(mktemp -d /tmp/spw-fuzz-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$B/crashes"
fail=0
for bin in "$B"/tests/fuzz_*; do
  name=$(basename "$bin")
  [ -z "${FUZZ_TARGETS:-}" ] || [[ " $FUZZ_TARGETS " == *" ${name#fuzz_} "* ]] || continue
  mkdir -p "$WORK/$name"
  [ -d "$ROOT/tests/fuzz/corpus/${name#fuzz_}" ] && cp "$ROOT/tests/fuzz/corpus/${name#fuzz_}"/* "$WORK/$name/" 2>/dev/null
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$ROOT/tests/fuzz/lsan.supp \
    "$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -max_len=262144 \
    -artifact_prefix="$B/crashes/$name-" "$WORK/$name" > "$WORK/$name.log" 2>&1
  rc=$?
  runs=$(sed -n 's/^#\([0-9]*\).*\(DONE\|pulse\|NEW\|REDUCE\).*/\1/p' "$WORK/$name.log" | tail -1)
  if [ $rc -eq 0 ]; then
    echo "ok   $name: ${runs:-?} runs in ${SECONDS_EACH} s"
  else
    echo "FAIL $name (exit $rc): $(grep -m1 'ERROR\|runtime error' "$WORK/$name.log")"
    tail -30 "$WORK/$name.log"
    fail=1
  fi
done
exit $fail
