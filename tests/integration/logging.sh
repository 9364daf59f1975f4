#!/usr/bin/env bash
# tests/integration/logging.sh - --log-level and --log-format on every program. Proves: with --log-format json
# every stderr line of a dispatcher, a worker and spillctl is one JSON object with ts, level, component and
# msg (a message with quotes and a path survives); --log-level warn drops the info lines and keeps the
# warnings; SPILLWAY_LOG_LEVEL / SPILLWAY_LOG_FORMAT do the same from the environment (what a trainer using
# libspillway sets); a bad level or format exits 2 naming the accepted values. Real processes on loopback.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null || exit 1
mkdir -p "$WORK/data/a"
find "$B/data/cli-test/train" -name '*.JPEG' | head -3 | xargs -I{} cp {} "$WORK/data/a/"
printf 'not a "JPEG"' > "$WORK/data/a/bad.JPEG"      # a warning with quotes in it (skipped)
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$WORK/data"}, "on_error": "skip",
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": 8}], "batch": {"size": 2}}
JSON
all_json() {   # all_json FILE: every line an object with ts, level, component, msg
  python3 "$ROOT/tests/integration/checks.py" logging_1 "$1"
}

"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 1 --quiet --log-format json 2> "$WORK/run.err"
check "spillctl --log-format json: every line is a JSON object (ts, level, component, msg)" all_json "$WORK/run.err"
check "... the skipped sample's warning is one of them, its quotes intact" \
  python3 "$ROOT/tests/integration/checks.py" logging_skipped_warning "$WORK/run.err"
SPILLWAY_LOG_LEVEL=error "$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 1 --quiet \
  2> "$WORK/quiet.err"
check "SPILLWAY_LOG_LEVEL=error: no warning" bash -c "! grep -q ' warn ' '$WORK/quiet.err'"
SPILLWAY_LOG_FORMAT=json "$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 1 --quiet \
  2> "$WORK/env.err"
check "SPILLWAY_LOG_FORMAT=json: JSON lines" all_json "$WORK/env.err"
"$B/bin/spillctl" --log-level loud validate "$WORK/p.json" > /dev/null 2> "$WORK/bad.err"
check "a bad level: exit 2 naming the levels" \
  bash -c "[ $? -eq 2 ] && grep -q 'debug, info, warn, error' '$WORK/bad.err'"

dispatcher_on d --log-format json || { finish; exit 1; }
"$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
  --log-level warn > "$WORK/w.out" 2> "$WORK/w.err" &
W=$!
PIDS+=("$W")
wait_port "$WORK/w.out" > /dev/null || bad "the worker starts"
sleep 0.5
kill -TERM "$D" "$W"
wait "$D" "$W" 2> /dev/null
check "the dispatcher with --log-format json: JSON lines" all_json "$WORK/d.err"
check "... its config line among them, as an info object" \
  grep -q '"level":"info","component":"dispatcher","msg":"config ' "$WORK/d.err"
check "the worker with --log-level warn: its warning, no info line" \
  bash -c "grep -q ' warn worker no auth token' '$WORK/w.err' && ! grep -q ' info ' '$WORK/w.err'"
"$B/bin/spillway-worker" --dispatcher 127.0.0.1:1 --log-format yaml > /dev/null 2> "$WORK/badw.err"
check "a worker with a bad format: exit 2 naming text and json" \
  bash -c "[ $? -eq 2 ] && grep -q 'log format \"yaml\": text or json' '$WORK/badw.err'"
finish
