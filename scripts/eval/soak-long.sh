#!/usr/bin/env bash
# scripts/eval/soak-long.sh - `make soak-long` (by hand; SOAK_MINUTES, default 30): four job lanes run back to back
# for the whole time - two image jobs, an audio job and a two-rank data-parallel job - on a dispatcher (with
# --work-dir) and three workers, while workers are killed -9 and restarted or stopped (SIGSTOP) for a few
# seconds at random, and the dispatcher is killed -9 and restarted at 1/3 and 2/3 of the time. Every run of
# every lane must deliver each key exactly once and finish within twice the lane's fault-free time (measured
# first, without faults). Every daemon's RSS is sampled each 10 s; over the last 10 minutes (the last third
# when shorter) no daemon may grow more than 1 MB/min. Prints a results table (markdown) and exits non-zero
# when a check fails. Everything on 127.0.0.1; kills all it starts. Seeded (SOAK_SEED) fault schedule.
set -uo pipefail
# shellcheck source=scripts/lib/harness.sh
source "$(dirname "$0")/../lib/harness.sh"      # ROOT, B, PIDS, wait_port
MINUTES=${SOAK_MINUTES:-30}
RANDOM=${SOAK_SEED:-2026}
W=$(mktemp -d /tmp/spw-soak-XXXXXX)
cleanup() {
  for p in "${PIDS[@]}" $(jobs -p); do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  pkill -9 -f -- "$W/" 2>/dev/null       # the lanes' trainers
  wait 2>/dev/null
  [ -n "${KEEP:-}" ] || rm -rf "$W"
}
trap cleanup EXIT
die() { echo "soak: $*" >&2; exit 1; }
log() { printf '%s %s\n' "$(date +%T)" "$*"; }
export PYTHONPATH=$ROOT/client/python SPILLWAY_LIB=$B/lib/libspillway.so

IMG=$B/data/cli-test
AUD=$B/data/speech-test
bash "$ROOT/scripts/data/make-dataset.sh" "$IMG" 160 > /dev/null || die "no image dataset"
bash "$ROOT/scripts/data/make-audio-dataset.sh" "$AUD" 20 > /dev/null || die "no audio dataset"
cat > "$W/img1.json" <<JSON
{"source": {"format": "image_folder", "path": "$IMG/train", "shuffle": true, "seed": 1, "epochs": 10},
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": [32, 32]}], "batch": {"size": 16}}
JSON
cat > "$W/img2.json" <<JSON
{"source": {"format": "image_folder", "path": "$IMG/train", "shuffle": true, "seed": 2, "epochs": 10},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [48, 48]},
         {"op": "random_horizontal_flip"}, {"op": "rand_augment", "num_ops": 2, "magnitude": 9},
         {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}],
 "batch": {"size": 32}}
JSON
cat > "$W/audio.json" <<JSON
{"source": {"format": "wav_folder", "path": "$AUD/train", "shuffle": true, "seed": 3, "epochs": 20},
 "ops": [{"op": "decode_wav"}, {"op": "stft", "n_fft": 512, "hop_length": 160, "win_length": 400},
         {"op": "mel", "sample_rate": 16000, "n_mels": 64}, {"op": "log", "eps": 1e-6}],
 "batch": {"size": 5}}
JSON
for p in img1 img2 audio; do
  "$B/bin/spillctl" run --local --pipeline "$W/$p.json" --threads 2 --keys "$W/$p.raw" --quiet || die "local $p"
  cut -d' ' -f1,2 "$W/$p.raw" | sort > "$W/$p.want"
done
python3 -c 'print("\n".join("%d %d" % (e, s) for e in range(10) for s in range(160)))' | sort > "$W/ddp.want"

# ---- the service ----
DPORT=0
ND=0
start_dispatcher() {   # on the journal in $W/wd and port $DPORT (0 the first time); sets D and DPORT
  ND=$((ND + 1))
  "$B/bin/spillway-dispatcher" --listen 127.0.0.1 --port "$DPORT" --work-dir "$W/wd" --heartbeat-ms 200 \
    --worker-timeout-ms 2000 --journal-compact-kb 256 > "$W/d$ND.out" 2> "$W/d$ND.err" &
  D=$!
  PIDS+=("$D")
  DPORT=$(wait_port "$W/d$ND.out") || die "the dispatcher did not start (see $W/d$ND.err)"
}
WPID=()
start_worker() {   # start_worker I
  "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
    >> "$W/w$1.out" 2>> "$W/w$1.err" &
  WPID[$1]=$!
  PIDS+=("${WPID[$1]}")
}
start_dispatcher
for i in 1 2 3; do start_worker "$i"; done
sleep 1

# ---- lanes: each runs its job again and again; one line per run in lane.txt: lane seconds verdict ----
CTL=("$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT")
run_lane() {   # run_lane NAME N: one run of the lane; prints its seconds; 0 when every key came exactly once
  local name=$1 n=$2 t0 rc
  t0=$(date +%s.%N)
  case $name in
    img1) "${CTL[@]}" run --pipeline "$W/img1.json" --local-cores 0 --consume-rate 80 --keys "$W/$name.$n.raw" \
            --quiet > /dev/null 2>> "$W/$name.err"; rc=$? ;;
    img2) "${CTL[@]}" run --pipeline "$W/img2.json" --local-cores 0 --consume-rate 80 --keys "$W/$name.$n.raw" \
            --quiet > /dev/null 2>> "$W/$name.err"; rc=$? ;;
    audio) "${CTL[@]}" run --pipeline "$W/audio.json" --local-cores 0 --consume-rate 20 \
             --keys "$W/$name.$n.raw" --quiet > /dev/null 2>> "$W/$name.err"; rc=$? ;;
    ddp) for r in 0 1; do
           /usr/bin/python3 "$ROOT/tests/integration/rank_run.py" "$IMG/train" "127.0.0.1:$DPORT" "soak-$n" "$r" 2 40 \
             "$W/ddp.$n.$r" --epochs 10 > /dev/null 2>> "$W/ddp.err" &
           RP[r]=$!
         done
         wait "${RP[0]}"; rc=$?
         wait "${RP[1]}"; rc=$((rc | $?))
         cat "$W/ddp.$n.0" "$W/ddp.$n.1" > "$W/$name.$n.raw"
         rm -f "$W/ddp.$n.0" "$W/ddp.$n.1" ;;
  esac
  local secs
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  if [ "$rc" -eq 0 ] && cut -d' ' -f1,2 "$W/$name.$n.raw" | sort | cmp -s - "$W/$name.want"; then
    echo "$secs ok"
  else
    echo "$secs bad(rc=$rc)"
  fi
  rm -f "$W/$name.$n.raw"
}

LANES=(img1 img2 audio ddp)
declare -A BASE
log "fault-free runs (the baseline of each lane, all four at once)"
LANE_PIDS=()
for lane in "${LANES[@]}"; do (run_lane "$lane" 0 > "$W/base.$lane") & LANE_PIDS+=($!); done
wait "${LANE_PIDS[@]}"
for lane in "${LANES[@]}"; do
  read -r secs verdict < "$W/base.$lane"
  [ "$verdict" = ok ] || die "the fault-free $lane run failed ($verdict)"
  BASE[$lane]=$secs
  log "baseline $lane: $secs s"
done

END=$(( $(date +%s) + MINUTES * 60 ))
LANE_PIDS=()
for lane in "${LANES[@]}"; do
  (
    n=1
    while [ "$(date +%s)" -lt "$END" ]; do
      echo "$lane $(run_lane "$lane" "$n")" >> "$W/lanes.txt"
      n=$((n + 1))
    done
  ) &
  LANE_PIDS+=($!)
done

# ---- RSS sampler ----
(
  t0=$(date +%s)
  while [ "$(date +%s)" -lt "$END" ]; do
    for f in "$W"/pid.*; do
      [ -f "$f" ] || continue
      role=${f##*/pid.}
      pid=$(cat "$f")
      rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null) || continue
      [ -n "$rss" ] && echo "$(( $(date +%s) - t0 )) $role $pid $rss" >> "$W/rss.txt"
    done
    sleep 10
  done
) &
record() { echo "$D" > "$W/pid.dispatcher"; for i in 1 2 3; do echo "${WPID[$i]}" > "$W/pid.worker$i"; done; }
record

# ---- faults ----
T0=$(date +%s)
restarts=0
while [ "$(date +%s)" -lt "$END" ]; do
  sleep $(( 5 + RANDOM % 11 ))
  now=$(( $(date +%s) - T0 ))
  if [ "$restarts" -lt 2 ] && [ "$now" -ge $(( (restarts + 1) * MINUTES * 20 )) ]; then
    log "fault: dispatcher kill -9 and restart"
    kill -9 "$D"; wait "$D" 2>/dev/null
    sleep 1
    start_dispatcher
    restarts=$((restarts + 1))
  else
    i=$(( 1 + RANDOM % 3 ))
    if [ $(( RANDOM % 2 )) -eq 0 ] && [ "$i" -ne 3 ]; then    # worker 3 is only ever stopped: its RSS spans it all
      log "fault: worker $i kill -9 and restart"
      kill -9 "${WPID[$i]}"; wait "${WPID[$i]}" 2>/dev/null
      sleep 1
      start_worker "$i"
    else
      s=$(( 3 + RANDOM % 6 ))
      log "fault: worker $i stopped for ${s}s"
      kill -STOP "${WPID[$i]}"; sleep "$s"; kill -CONT "${WPID[$i]}"
    fi
  fi
  echo "$now" >> "$W/faults.txt"
  record
done
log "faults over; waiting for the lanes' last runs"
wait "${LANE_PIDS[@]}"

# ---- results ----
fail=0
echo
echo "| lane | runs | bad runs | fault-free s | slowest s | slowest / fault-free |"
echo "|---|---|---|---|---|---|"
for lane in "${LANES[@]}"; do
  read -r runs bad slow < <(awk -v l="$lane" '$1 == l { n++; if ($3 != "ok") b++; if ($2 > m) m = $2 }
                                             END { printf "%d %d %.1f\n", n, b, m }' "$W/lanes.txt")
  ratio=$(awk -v a="$slow" -v b="${BASE[$lane]}" 'BEGIN { printf "%.2f", a / b }')
  printf '| %s | %d | %d | %.1f | %.1f | %s |\n' "$lane" "$runs" "$bad" "${BASE[$lane]}" "$slow" "$ratio"
  [ "$runs" -gt 0 ] && [ "$bad" -eq 0 ] && awk -v r="$ratio" 'BEGIN { exit !(r <= 2) }' || fail=1
done
echo
echo "| daemon | RSS first MB | RSS last MB | window s | growth over the window MB/min |"
echo "|---|---|---|---|---|"
window=$(( MINUTES * 60 / 3 < 600 ? MINUTES * 60 / 3 : 600 ))
while read -r role slope first last span; do
  printf '| %s | %.1f | %.1f | %s | %s |\n' "$role" "$first" "$last" "$span" "$slope"
  [ "$slope" = "restarted" ] || awk -v s="$slope" 'BEGIN { exit !(s <= 1) }' || fail=1
done < <(python3 "$ROOT/scripts/eval/soak_rss.py" "$W/rss.txt" "$(( MINUTES * 60 ))" "$window")
echo
echo "faults: $(wc -l < "$W/faults.txt") (dispatcher restarts: $restarts); seed ${SOAK_SEED:-2026}; $MINUTES min"
[ "$fail" -eq 0 ] && echo "soak: ok" || echo "soak: FAILED (files in $W)"
[ "$fail" -ne 0 ] && KEEP=1
exit "$fail"
