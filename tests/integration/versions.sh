#!/usr/bin/env bash
# tests/integration/versions.sh - builds and protocols are named and checked: `--version` on the three
# binaries prints one build and protocol; a worker and a client of another protocol version (tests/tools/
# oldpeer) are refused at RegisterWorker / CreateJob with a message naming both versions and builds, and a
# worker of this build still registers. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

for b in spillctl spillway-dispatcher spillway-worker; do
  "$B/bin/$b" --version > "$WORK/$b.version" 2>&1
  check "$b --version exits 0" test $? -eq 0
  check "$b --version names the build and the protocol" grep -qE '^spillway [^ ]+ \(protocol [0-9]+\)$' "$WORK/$b.version"
done
check "the three binaries are one build" \
  bash -c "cmp -s '$WORK/spillctl.version' '$WORK/spillway-dispatcher.version' && cmp -s '$WORK/spillctl.version' '$WORK/spillway-worker.version'"
check "--help lists --version" bash -c "'$B/bin/spillway-worker' --help | grep -q -- '--version'"
proto=$(sed -n 's/.*(protocol \([0-9]*\))$/\1/p' "$WORK/spillctl.version")
build=$(awk '{print $2}' "$WORK/spillctl.version")

start_service 1 || exit 1
"$B/tests/oldpeer" "127.0.0.1:$DPORT" register $((proto + 1)) > "$WORK/reg.out"
check "a worker of protocol $((proto + 1)) is refused, both versions and builds named" \
  grep -q "^status=FAILED_PRECONDITION msg=this worker speaks protocol $((proto + 1)) (build oldpeer), this dispatcher protocol $proto (build $build)" "$WORK/reg.out"
"$B/tests/oldpeer" "127.0.0.1:$DPORT" register 0 > "$WORK/reg0.out"
check "a worker from before protocol versions is refused as such" \
  grep -q "^status=FAILED_PRECONDITION msg=this worker speaks protocol 0, i.e. a build from before protocol versions" "$WORK/reg0.out"
check "the dispatcher logs the refusal" grep -q 'worker refused address=127.0.0.1:1: this worker speaks protocol' "$WORK/d.err"
"$B/tests/oldpeer" "127.0.0.1:$DPORT" create $((proto + 1)) "$B/data" > "$WORK/create.out"
check "a client of protocol $((proto + 1)) is refused at CreateJob, both versions named" \
  grep -q "^status=FAILED_PRECONDITION msg=this client speaks protocol $((proto + 1)) (build oldpeer), this dispatcher protocol $proto" "$WORK/create.out"
"$B/bin/spillctl" --dispatcher "127.0.0.1:$DPORT" workers --json > "$WORK/workers.json"
check "only the worker of this build is registered" \
  python3 -c "import json,sys; w=json.load(open('$WORK/workers.json'))['workers']; sys.exit(len(w) != 1 or w[0]['address'] == '127.0.0.1:1')"

finish
