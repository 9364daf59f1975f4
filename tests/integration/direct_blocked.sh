#!/usr/bin/env bash
# tests/integration/direct_blocked.sh - a worker whose data port the client cannot reach: the worker in a
# network namespace this test creates, its gRPC port open and iptables in that namespace dropping every
# packet to its data port (--data-port 7301). The client tries the data connection once (2 s), says why it failed, takes that
# worker's elements on the gRPC stream, and the batches are byte-identical to a local run; the worker logs
# that the elements go on the stream. Needs root (ip netns, iptables): without it, it says SKIP and why. Kills and
# removes all it creates.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
# Wildcard and namespace addresses with no token: allowed on this test machine (closed_default.sh tests the refusal).
export SPILLWAY_INSECURE=1
netns_usable

DATA=$B/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 > /dev/null || exit 1
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$DATA/train", "shuffle": true, "seed": 3, "epochs": 4},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [64, 64]}], "batch": {"size": 32}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --dump "$WORK/local" --quiet || exit 1

"$B/bin/spillway-dispatcher" --listen $NS_NET.1 --port 0 --heartbeat-ms 200 > "$WORK/d.out" 2> "$WORK/d.err" &
PIDS+=($!)
DPORT=$(wait_port "$WORK/d.out") || { bad "dispatcher starts"; finish; exit; }
netns_worker 1 --data-port 7301 --log-level debug || { finish; exit; }
check "the worker listens for data connections on port 7301" grep -q "^data listening on $NS_NET.11:7301$" "$WORK/w1.out"
# iptables in the worker's namespace drops what comes to the data port (its gRPC port stays open).
if ! ip netns exec "${NS_P}w1" iptables -A INPUT -p tcp --dport 7301 -j DROP 2> "$WORK/ipt.err"; then
  echo "SKIP direct_blocked: iptables cannot filter in a namespace here: $(head -1 "$WORK/ipt.err")"
  exit 0
fi
check "nothing reaches the data port (a connection times out)" \
  bash -c "! timeout 2 bash -c 'exec 3<> /dev/tcp/$NS_NET.11/7301' 2> /dev/null"
sleep 0.5

SPILLWAY_LOG_LEVEL=debug timeout 120 "$B/bin/spillctl" run --dispatcher $NS_NET.1:"$DPORT" --pipeline "$WORK/p.json" \
  --ordered --cut all --local-cores 0 --dump "$WORK/run" --quiet > /dev/null 2> "$WORK/c.err"
RC=$?
check "the run exits 0" test $RC -eq 0
check "... batches byte-identical to a local run" \
  bash -c "for f in '$WORK/local'/*; do cmp -s \"\$f\" '$WORK/run/'\$(basename \"\$f\") || exit 1; done"
check "the client says why, once, and that the elements come on the gRPC stream" bash -c \
  "[ \$(grep -c 'data connection to $NS_NET.11 port 7301: .*: its elements come on the gRPC stream instead' '$WORK/c.err') -eq 1 ]"
check "the worker says its elements go on the gRPC stream" \
  grep -q 'could not open a data connection to port 7301: its elements go on the gRPC stream' "$WORK/w1.err"
check "... and they came from the worker (it sent elements)" bash -c "grep -q 'stream from worker=.* closed elements=[1-9]' '$WORK/c.err'"
finish
