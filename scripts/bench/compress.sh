#!/usr/bin/env bash
# scripts/bench/compress.sh - compression on a slow link: one worker in a network namespace behind a tc tbf
# cap (BENCH_LINK, default 50mbit) streams to a client that only receives and finishes (--local-share off),
# on the generated ImageNet-like photos (decode, random_resized_crop 64, flip, normalize). Three plans, runs
# interleaved, medians of BENCH_RUNS (default 3): the default (planned: the planner weighs compression),
# forced raw (--compress off) and forced zstd (--compress zstd), the last two at the default's cut. Prints
# elements/s, the gain of zstd over raw and the ratio the bytes shrank by (target: the gain within 15% of the
# ratio on a link-bound job). Needs root (ip netns, tc); uses tests/integration/lib.sh's namespace helpers.
# Writes build/bench/compress.md.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/../../tests/integration/lib.sh"   # the harness, check, netns helpers
# Wildcard and namespace addresses with no token: allowed on this test machine (closed_default.sh tests the refusal).
export SPILLWAY_INSECURE=1
unset SPILLWAY_CUT
RUNS=${BENCH_RUNS:-3}
LINK=${BENCH_LINK:-50mbit}
OUT=$B/bench
DATA=$B/data/imagenet-like
need_built "$B/bin/spillctl" "$B/bin/spillway-worker" "$B/bin/spillway-dispatcher"
[ "$(id -u)" = 0 ] || { echo "bench-compress: SKIP: needs root (ip netns, tc)"; exit 0; }
netns_usable
mkdir -p "$OUT"
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 1000 > /dev/null
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 1, "epochs": 4},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [64, 64]}, {"op": "random_horizontal_flip"},
         {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}],
 "batch": {"size": 64}}
JSON
"$B/bin/spillway-dispatcher" --listen $NS_NET.1 --port 0 --heartbeat-ms 200 > "$WORK/d.out" 2> "$WORK/d.err" &
PIDS+=($!)
DPORT=$(wait_port "$WORK/d.out") || { echo "bench-compress: the dispatcher did not start" >&2; exit 1; }
netns_worker 1 --threads 2 || exit 1
netns_cap 1 "$LINK"
sleep 0.6
run() {     # run NAME [spillctl options...]: prints the JSON's last line
  local name=$1
  shift
  "$B/bin/spillctl" run --dispatcher $NS_NET.1:"$DPORT" --pipeline "$WORK/p.json" --local-share off --json \
    --quiet "$@" 2> "$WORK/$name.err" | tail -1
}
RESULTS=$OUT/compress.tsv
: > "$RESULTS"
echo "bench-compress: $RUNS runs; worker behind a $LINK cap, client receiving only; load: $(cut -d' ' -f1-3 /proc/loadavg)"
CUT=""
for r in $(seq 1 "$RUNS"); do
  declare -A got=()
  got[planned]=$(run planned)
  [ -n "$CUT" ] || CUT=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["cut"])' "${got[planned]}")
  got[raw]=$(run raw --cut "$CUT" --compress off)
  got[zstd]=$(run zstd --cut "$CUT" --compress zstd)
  for kind in planned raw zstd; do
    line=${got[$kind]}
    printf '%s\t%s\t%s\n' "$kind" "$r" "$line" >> "$RESULTS"
    "$PY" -c 'import json,sys; d=json.loads(sys.argv[3]); print("  run %s/%s  %-8s cut %d level %d  %7.0f elements/s  %8.0f bytes/element" % (sys.argv[1], sys.argv[4], sys.argv[2], d["cut"], d["compress_level"], d["elements_per_s"], d["bytes_received"] / max(d["elements"], 1)))' "$r" "$kind" "$line" "$RUNS"
  done
done
PYTHONPATH="$ROOT/scripts/lib" "$PY" "$ROOT/scripts/bench/compress_report.py" "$RESULTS" "$OUT/compress.md" "$LINK"
