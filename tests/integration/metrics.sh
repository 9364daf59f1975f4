#!/usr/bin/env bash
# tests/integration/metrics.sh - the daemons' Prometheus port, scraped by a real Prometheus (Debian's). Proves:
# a dispatcher and two workers started with --metrics-port serve /metrics that `promtool check metrics`
# passes and /healthz, and answer 404 / 405 elsewhere; Prometheus scrapes all three during a planned job, and
# its series give the job's delivered rate within 20% of what `spillctl job` reports over the same instants
# and the workers needed that `spillctl explain` reports; the workers' series count what they sent and the
# CPU per fusion group, and the RPC series count the calls; every series the Grafana dashboard queries is
# exported (a GPU-side worker on the emulated plugin and a journal included); 64 slowloris connections leave
# every scrape answered; 1000 connections of bad HTTP
# requests at a metrics port leave the daemon serving gRPC (and /metrics again once they close). Real
# processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

if ! command -v prometheus > /dev/null || ! command -v promtool > /dev/null; then
  echo "metrics.sh: needs Debian's prometheus package (scripts/install-deps.sh)"
  exit 1
fi
bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null || exit 1
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$B/data/cli-test/train", "shuffle": true, "seed": 5, "epochs": 400},
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": [32, 32]}], "batch": {"size": 16}}
JSON
dispatcher_on d --heartbeat-ms 200 --metrics-port -1 --work-dir "$WORK/dwork" || { finish; exit 1; }
mport() { sed -n 's/^metrics listening on .*:\([0-9]*\)$/\1/p' "$1"; }
DM=$(mport "$WORK/d.out")
WM=()
EMU=$B/lib/libspillway-gpuemu.so        # worker 2 is GPU-side, on the emulated plugin: its GPU series too
[ -f "$EMU" ] || make -s -C "$ROOT" "$EMU" > /dev/null || exit 1
for j in 1 2; do
  gpu=(); [ "$j" = 2 ] && gpu=(--gpu 0)
  SPILLWAY_GPU_PLUGIN=$EMU "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 \
    --threads 1 --metrics-port -1 "${gpu[@]}" > "$WORK/w$j.out" 2> "$WORK/w$j.err" &
  PIDS+=($!)
  wait_port "$WORK/w$j.out" > /dev/null || bad "worker $j starts"
  WM+=("$(mport "$WORK/w$j.out")")
done
check "the three daemons print their metrics ports" test -n "$DM" -a -n "${WM[0]}" -a -n "${WM[1]}"

# Prometheus, on a free port, scraping all three every second.
PP=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$WORK/prometheus.yml" <<YAML
global: {scrape_interval: 1s, scrape_timeout: 900ms}
scrape_configs:
  - job_name: spillway-dispatcher
    static_configs: [{targets: ["127.0.0.1:$DM"]}]
  - job_name: spillway-worker
    static_configs: [{targets: ["127.0.0.1:${WM[0]}", "127.0.0.1:${WM[1]}"]}]
YAML
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$PP" > "$WORK/prometheus.log" 2>&1 &
PIDS+=($!)
promql() {   # promql QUERY [TIME]: the first sample's value (now, or at unix TIME), or nothing
  curl -s --get "http://127.0.0.1:$PP/api/v1/query" --data-urlencode "query=$1" ${2:+--data-urlencode "time=$2"} |
    python3 "$ROOT/tests/integration/checks.py" metrics_promql_value
}

# A planned job (--cut auto; the client makes none itself) for a trainer of 300 elements/s: a workers_needed
# for that rate; the producers run ahead of the trainer into its prefetch buffer at their own pace. It keeps
# its job when it stops (--keep-job), so the job's series are still there to check after it.
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --cut auto \
  --consume-rate 300 --local-share off --max-seconds 45 --keep-job --quiet > /dev/null 2> "$WORK/run.err" &
RUN=$!
JOB=""
for _ in $(seq 1 100); do
  JOB=$("$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" jobs --json 2> /dev/null |
        python3 -c 'import json, sys; j = json.load(sys.stdin)["jobs"]; print(j[-1]["job"] if j else "")' 2> /dev/null)
  [ -n "$JOB" ] && break
  sleep 0.1
done
check "the job is running (job $JOB)" test -n "$JOB"
# Both sides observe before the interval starts: Prometheus has scraped the job's series (its start on a
# loaded machine can take seconds), and the job has run a while.
for _ in $(seq 1 100); do
  [ -n "$(promql "sum(spillway_job_elements_total{job_id=\"$JOB\"})")" ] && break
  sleep 0.2
done
sleep 3
delivered() {   # the job's elements as spillctl job reports them (its producers'; a client's GPU row is a part)
  "$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" job "$JOB" --json |
    python3 "$ROOT/tests/integration/checks.py" metrics_delivered
}
# The same 15 s both ways: spillctl job's counts at its ends, and Prometheus's series at the same instants.
E1=$(delivered)
T1=$(date +%s.%N)
sleep 15
E2=$(delivered)
T2=$(date +%s.%N)
sleep 1.5           # the scrape after T2
Q1=$(promql "sum(spillway_job_elements_total{job_id=\"$JOB\"})" "$T1")
Q2=$(promql "sum(spillway_job_elements_total{job_id=\"$JOB\"})" "$T2")
# ... over the instants Prometheus scraped them (a scrape late on a loaded machine: its own time, not T1's)
S1=$(promql "max(timestamp(spillway_job_elements_total{job_id=\"$JOB\"}))" "$T1")
S2=$(promql "max(timestamp(spillway_job_elements_total{job_id=\"$JOB\"}))" "$T2")
SJ=$(python3 -c "print(round((${E2:-0} - ${E1:-0}) / ($T2 - $T1), 1))")
PQ=$(python3 -c "print(round((${Q2:-0} - ${Q1:-0}) / max(${S2:-1} - ${S1:-0}, 1), 1))")
echo "     scrapes at T1$(python3 -c "print('%+.1f s, T2%+.1f s' % (${S1:-0} - $T1, ${S2:-0} - $T2))")"
check "Prometheus's delivered rate over 15 s ($PQ/s) is within 20% of spillctl job's ($SJ/s)" \
  python3 "$ROOT/tests/integration/checks.py" metrics_rates_agree "${PQ:-0}" "${SJ:-0}"
NEED=$(promql "spillway_job_workers_needed{job_id=\"$JOB\"}")
EXPL=$("$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" explain "$JOB" --json |
       python3 -c 'import json, sys; print(json.load(sys.stdin)["workers_needed"])')
check "spillway_job_workers_needed ($NEED) equals spillctl explain's ($EXPL)" test -n "$NEED" -a "$NEED" = "$EXPL"
SENT=$(promql "sum(max_over_time(spillway_worker_elements_sent_total{job_id=\"$JOB\"}[1m]))")
check "the workers' series count what they sent ($SENT elements)" \
  python3 -c "raise SystemExit(not float('${SENT:-0}') > 0)"
G0="job_id=\"$JOB\",group=\"0\""
GROUP=$(promql "sum(max_over_time(spillway_worker_group_elements_total{$G0,ops=\"decode_jpeg+center_crop\"}[1m]))")
GSEC=$(promql "sum(max_over_time(spillway_worker_group_cpu_seconds_total{$G0}[1m]))")
check "... and the CPU per fusion group ($GROUP elements of decode_jpeg+center_crop in $GSEC s)" \
  python3 -c "raise SystemExit(not (float('${GROUP:-0}') > 0 and 0 < float('${GSEC:-0}') < 100))"
HB=$(promql 'sum(spillway_rpc_requests_total{method="spillway.v1.Dispatcher/ClientHeartbeat",code="OK"})')
check "the dispatcher's RPC series count the client's heartbeats ($HB)" \
  python3 -c "raise SystemExit(not float('${HB:-0}') > 10)"
UP=$(promql 'count(up == 1)')
check "Prometheus sees all three targets up ($UP)" test "$UP" = "3"
wait "$RUN"
check "the job ran to its time limit (exit 0)" test $? -eq 0

for port in "$DM" "${WM[0]}" "${WM[1]}"; do
  curl -s "http://127.0.0.1:$port/metrics" > "$WORK/body-$port.txt"
  check "promtool check metrics passes on :$port" promtool check metrics < "$WORK/body-$port.txt"
done
check "the Grafana dashboard's every series is exported (deploy/grafana/spillway.json)" \
  python3 "$ROOT/deploy/scripts/check-dashboard.py" "$ROOT/deploy/grafana/spillway.json" "$WORK"/body-*.txt
sed 's/spillway_worker_queue_bytes/spillway_worker_queue_byte/' "$ROOT/deploy/grafana/spillway.json" > "$WORK/bad.json"
check "... and the checker refuses a dashboard with a misspelt one" \
  bash -c "! python3 '$ROOT/deploy/scripts/check-dashboard.py' '$WORK/bad.json' '$WORK'/body-*.txt > /dev/null"
check "/healthz answers ok" bash -c "[ \"\$(curl -s http://127.0.0.1:$DM/healthz)\" = ok ]"
check "another path: 404" bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$DM/x)\" = 404 ]"
check "another method: 405" bash -c \
  "[ \"\$(curl -s -o /dev/null -w '%{http_code}' -X POST -d junk http://127.0.0.1:$DM/metrics)\" = 405 ]"
check "the jobs and workers series are there" bash -c "grep -q '^spillway_dispatcher_workers{state=\"alive\"} 2$' \
  '$WORK/body-$DM.txt' && grep -q '^spillway_job_cut{job_id=\"$JOB\"}' '$WORK/body-$DM.txt'"
check "the planned job's profiles were asked ahead and taken by its CreateJob" bash -c \
  "grep -q '^spillway_dispatcher_profile_asks_ahead_total{outcome=\"started\"} 1$' '$WORK/body-$DM.txt' &&
   grep -q '^spillway_dispatcher_profile_asks_ahead_total{outcome=\"taken\"} 1$' '$WORK/body-$DM.txt' &&
   grep -q '^spillway_dispatcher_profile_asks_ahead_running 0$' '$WORK/body-$DM.txt'"

# 64 slowloris connections (a header line every second, never the request's end) on the metrics port: every
# scrape meanwhile is answered; each slow connection is cut when it has taken 5 s.
python3 "$ROOT/tests/integration/checks.py" metrics_1 "$DM" > "$WORK/slow.log" 2>&1 &
SLOW=$!
sleep 0.5
scrapes=0
for _ in $(seq 1 10); do
  # Read whole, then searched: `curl | grep -q` under pipefail fails when grep quits before curl's last write.
  body=$(curl -sf --max-time 3 "http://127.0.0.1:$DM/metrics") && grep -q spillway_dispatcher_workers <<< "$body" &&
    scrapes=$((scrapes + 1))
  sleep 1
done
wait "$SLOW"
check "64 slowloris connections on the metrics port: 10 of 10 scrapes answered ($scrapes)" test "$scrapes" -eq 10
check "... and the slow connections were cut" grep -q '^cut 64$' "$WORK/slow.log"

# 1000 connections of bad requests (garbage, a huge header, a slow half-request) at the dispatcher's port.
python3 "$ROOT/tests/integration/checks.py" metrics_2 "$DM" > "$WORK/flood.log" 2>&1 &
FLOOD=$!
sleep 1
check "during the flood the dispatcher still serves gRPC" \
  bash -c "'$B/bin/spillctl' --dispatcher 127.0.0.1:$DPORT workers --json | grep -q '\"address\"'"
wait "$FLOOD"
check "after it, /metrics answers again" bash -c "curl -s --max-time 15 http://127.0.0.1:$DM/metrics |
  grep -q spillway_dispatcher_workers"
finish
