#!/usr/bin/env bash
# tests/integration/pad_cap.sh - the cap on batch.pad (pipeline/batch.h, SPW_BATCH_PAD_FACTOR): two legal
# images of 30000x1 and 1x30000 pixels would pad to a [2, 3, 30000, 30000] float32 batch (21.6 GB); the run
# fails naming the padded shape, the elements' bytes and the cap, and saying what to do - in process
# (spillctl run --local, and the Python Loader without a dispatcher) and on a service job's client, whose
# elements came from a worker (spillctl and Python's SpillwayError). Each run has its address space capped
# (ulimit -v) far below the padded batch, so a regression fails rather than eats the machine's memory. Real
# processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
export PYTHONPATH=$ROOT/client/python SPILLWAY_LIB=$B/lib/libspillway.so
VMEM_KB=6000000         # 6 GB: room for the runs' threads, a fraction of the 21.6 GB batch

mkdir -p "$WORK/img/a"
/usr/bin/python3 - "$WORK/img/a" <<'PY' || exit 1
import sys
import numpy as np
from PIL import Image
line = np.stack([np.arange(30000) % 251] * 3, -1).astype(np.uint8)
Image.fromarray(line.reshape(30000, 1, 3)).save(sys.argv[1] + "/tall.png")     # [3, 30000, 1] after to_tensor
Image.fromarray(line.reshape(1, 30000, 3)).save(sys.argv[1] + "/wide.png")     # [3, 1, 30000]
PY
cat > "$WORK/p.json" <<JSON
{"source": {"format": "image_folder", "path": "$WORK/img", "labels": false},
 "ops": [{"op": "decode_image"}, {"op": "to_tensor"}], "batch": {"size": 2, "pad": true}}
JSON
# what every refusal must say: the padded shape, the elements' bytes (2 x 3 x 30000 x 4), the cap, what to do
said_why() {
  grep -q 'batch 0 of epoch 0: batch.pad: .* makes \[2, 3, 30000, 30000\] float32, 21600000000 bytes, from 720000 bytes of elements: past the cap of 16 x those + 64 MiB (78628864 bytes); resize or crop the images to a common size first' "$1"
}
# loader_run DISPATCHER OUT: the Python Loader over p.json (DISPATCHER "" = in process), its SpillwayError in OUT
loader_run() {
  (ulimit -v $VMEM_KB; timeout 120 /usr/bin/python3 - "$WORK/p.json" "$1" > "$2" 2>&1) <<'PY'
import sys
from spillway import Loader, Pipeline, SpillwayError
p = Pipeline.from_json(open(sys.argv[1]).read())
kw = {"dispatcher": sys.argv[2], "local_cores": 0} if sys.argv[2] else {}
try:
    with Loader(p, **kw) as loader:
        for b in loader.batches():
            print("a batch of", b.n)
except SpillwayError as e:
    print("SpillwayError code=%s: %s" % (e.code, e))
    sys.exit(3)
PY
}

(ulimit -v $VMEM_KB; timeout 120 "$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --quiet \
  > /dev/null 2> "$WORK/local.err")
rc=$?
check "run --local: fails with status 1 (not killed for memory: $rc)" test $rc -eq 1
check "... saying why (input exceeds a configured size cap), naming the shape, bytes and cap" \
  grep -q 'run failed: input exceeds a configured size cap: ' "$WORK/local.err"
check "... the whole message" said_why "$WORK/local.err"
loader_run "" "$WORK/py-local.out"
rc=$?
check "Python Loader in process: SpillwayError ($rc)" test $rc -eq 3
check "... carrying the message and SPW_ETOOBIG" \
  bash -c "grep -q 'code=-1003' '$WORK/py-local.out' && grep -q 'SpillwayError' '$WORK/py-local.out'"
check "... the whole message" said_why "$WORK/py-local.out"

start_service 1 || exit 1
(ulimit -v $VMEM_KB; timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" \
  --local-cores 0 --quiet > /dev/null 2> "$WORK/remote.err")
rc=$?
check "through a worker: the client fails with status 1 (not killed for memory: $rc)" test $rc -eq 1
# --local-cores 0 and SPILLWAY_CUT=all (lib.sh): the client makes no element, the worker makes them all
check "... the job went to the worker, whole" grep -q 'job created job=1 .*cut=1 groups=1 workers=1' "$WORK/remote.err"
check "... which served it" grep -q 'serving job=1 ' "$WORK/w1.err"
check "... the client says why, naming the shape, bytes and cap" said_why "$WORK/remote.err"
loader_run "127.0.0.1:$DPORT" "$WORK/py-remote.out"
rc=$?
check "Python Loader through a worker: SpillwayError ($rc)" test $rc -eq 3
check "... carrying the message" said_why "$WORK/py-remote.out"
check "the worker is still up" kill -0 "${PIDS[1]}"
finish
