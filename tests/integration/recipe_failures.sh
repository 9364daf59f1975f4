#!/usr/bin/env bash
# tests/integration/recipe_failures.sh - the recipe ops' bad cases on real processes: a gaussian_blur kernel
# larger than its image, a pad past the 65535-pixel side cap, a random_perspective whose corners make a
# singular map (a 1-pixel-wide photo), an fbank clip shorter than one frame and an elastic_transform whose
# blur is wider than its image, each made on a worker
# (--cut all, the client making nothing): with on_error skip the job finishes, every other sample delivered
# once and the bad one counted as skipped, its reason in the client's log as the worker said it; with
# on_error fail the run stops naming the file and the reason. Real processes on loopback; kills all it
# starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

mkdir -p "$WORK/img/a" "$WORK/wav/a"
/usr/bin/python3 - "$WORK" <<'PY'
import sys, wave
import numpy as np
from PIL import Image
w = sys.argv[1]
rng = np.random.RandomState(3)
for name, (width, height) in {"small": (8, 8), "fine": (64, 48), "tall": (9, 30000), "thin": (1, 40),
                              "wide": (80, 60)}.items():
    Image.fromarray((rng.rand(height, width, 3) * 255).astype("uint8")).save("%s/img/a/%s.jpg" % (w, name))
for name, n in {"short": 100, "one_s": 16000, "two_s": 32000}.items():
    with wave.open("%s/wav/a/%s.wav" % (w, name), "wb") as f:
        f.setnchannels(1), f.setsampwidth(2), f.setframerate(16000)
        f.writeframes((rng.randn(n) * 3000).astype("<i2").tobytes())
PY
spec() {   # NAME MEDIA OP_JSON [ON_ERROR]: a pipeline of the decode, the op, and a fixed-size end, batches of 1
  local decode=decode_jpeg src=image_folder path=$WORK/img end=', {"op": "center_crop", "size": 8}'
  [ "$2" = audio ] && decode=decode_wav src=wav_folder path=$WORK/wav end=
  cat > "$WORK/$1.json" <<JSON
{"source": {"format": "$src", "path": "$path", "shuffle": false}, "ops": [{"op": "$decode"}, $3$end],
 "batch": {"size": 1}, "on_error": "${4:-skip}"}
JSON
}
spec blur image '{"op": "gaussian_blur", "kernel_size": 23}'
spec pad image '{"op": "pad", "padding": [0, 20000]}'
spec persp image '{"op": "random_perspective", "distortion_scale": 0.5, "p": 1.0}'
spec fbank audio '{"op": "fbank", "num_mel_bins": 23}'
spec elastic image '{"op": "elastic_transform", "sigma": 2.0}'
spec pad_fail image '{"op": "pad", "padding": [0, 20000]}' fail

start_service 1 --heartbeat-ms 100 || exit 1
remote() {   # NAME: the pipeline made on the worker, ordered; its JSON and log kept
  timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/$1.json" --ordered \
    --cut all --local-cores 0 --json --keys "$WORK/$1.keys" > "$WORK/$1.out" 2> "$WORK/$1.err"
}
for t in "blur:small.jpg tall.jpg thin.jpg:kernel_size \[23, 23\] needs an image over 11 x 11 (reflect padding, as torch)" \
         "pad:tall.jpg:pad 9x30000 by \[0, 20000, 0, 20000\]: input exceeds a configured size cap" \
         "persp:thin.jpg:random_perspective: the corners drawn for a 1x40 image make a singular map" \
         "fbank:short.wav:ops\[1\] fbank: 100 samples are fewer than one frame of 400" \
         "elastic:small.jpg thin.jpg:sigma 2 blurs with a 17-tap kernel; its reflect padding needs the image larger than 8 pixels each way"; do
  name=${t%%:*} rest=${t#*:}
  bad=${rest%%:*} why=${rest#*:}
  remote "$name"
  check "$name on a worker: the job finishes" test $? -eq 0
  total=$(find "$WORK/img/a" "$WORK/wav/a" -name "*.${bad##*.}" | wc -l)
  nbad=$(wc -w <<< "$bad")
  check "$name: every other sample delivered once ($((total - nbad)))" \
    test "$(sort -u "$WORK/$name.keys" | wc -l)" -eq "$((total - nbad))" -a "$(wc -l < "$WORK/$name.keys")" -eq "$((total - nbad))"
  check "$name: the bad ones counted as skipped ($nbad)" test "$(json_field "$WORK/$name.out" '["skipped"]')" -eq "$nbad"
  for f in $bad; do
    check "$name: $f's reason reaches the client's log" grep -q "$f.*$why" "$WORK/$name.err"
  done
done
remote pad_fail
check "pad past the cap with on_error fail: the run stops (exit non-zero)" test $? -ne 0
check "... naming the file and the reason" grep -q "tall.jpg.*input exceeds a configured size cap" "$WORK/pad_fail.err"
finish
