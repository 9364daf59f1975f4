#!/usr/bin/env bash
# tests/integration/masks.sh - segmentation masks (source.fields "as": "mask") through the service: shards of
# JPEG images and their label maps (palette PNGs), a pipeline of random geometric ops (random_resized_crop
# fused into the JPEG decode, flips, rotate, random_perspective) with a colour op and normalize between
# them; ordered runs through a dispatcher and two workers byte-identical to the local run at every cut (the
# mask moved by the ops on either side), hybrid, the gRPC stream with zstd, with a worker killed -9 mid-run,
# and beside a worker lying about a mask's size; the GPU producer (emulated plugin) declines the pipeline and
# the CPU makes the same batches; the same pairs in VOC's folder layout (masks in a parallel folder) through
# the workers. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

/usr/bin/python3 - "$WORK" <<'PY' || exit 1
import io, sys, tarfile
import numpy as np
from PIL import Image
work = sys.argv[1]
for s in range(2):
    with tarfile.open("%s/seg-%d.tar" % (work, s), "w") as t:
        for i in range(s, 96, 2):
            w, h = 70 + i % 23, 60 + i % 17
            yy, xx = np.mgrid[0:h, 0:w]
            lab = ((xx // (5 + i % 7) + yy // (4 + i % 5)) % 21).astype(np.uint8)
            rgb = np.stack([lab * 11 + 9, (lab * 37 + i) % 251, xx * 3 % 256], -1).astype(np.uint8)
            mask = Image.fromarray(lab, "L").convert("P")
            mask.putpalette([c for k in range(256) for c in (k * 10 % 256, k * 60 % 256, k * 90 % 256)])
            for name, im in (("k%03d.jpg" % i, Image.fromarray(rgb)), ("k%03d.seg.png" % i, mask)):
                b = io.BytesIO(); im.save(b, "JPEG" if name.endswith("jpg") else "PNG", quality=95)
                data = b.getvalue()
                ti = tarfile.TarInfo(name); ti.size = len(data); t.addfile(ti, io.BytesIO(data))
# the same pairs in VOC's layout: JPEGImages/ and SegmentationClass/ under the same names
import os
for d in ("JPEGImages", "SegmentationClass"):
    os.makedirs(os.path.join(work, "voc", d), exist_ok=True)
for s in range(2):
    with tarfile.open("%s/seg-%d.tar" % (work, s)) as t:
        for m in t.getmembers():
            d = "SegmentationClass" if m.name.endswith(".seg.png") else "JPEGImages"
            with open(os.path.join(work, "voc", d, m.name.replace(".seg.png", ".png")), "wb") as f:
                f.write(t.extractfile(m).read())
PY
cat > "$WORK/voc.json" <<JSON
{"source": {"format": "image_folder", "path": "$WORK/voc/JPEGImages", "seed": 8, "labels": false,
            "fields": {"mask": {"path": "$WORK/voc/SegmentationClass", "from": "png", "as": "mask"}}},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": 40}, {"op": "random_horizontal_flip"}],
 "batch": {"size": 12}}
JSON
cat > "$WORK/p.json" <<JSON
{"source": {"format": "tar_shards", "path": "$WORK/seg-{0..1}.tar", "shuffle": true, "seed": 8, "epochs": 3,
            "labels": false, "fields": {"mask": {"from": "seg.png", "as": "mask", "ignore_index": 250}}},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [40, 48], "scale": [0.3, 1.0]},
         {"op": "random_horizontal_flip"}, {"op": "color_jitter", "brightness": 0.3, "contrast": 0.3},
         {"op": "rotate", "angle": 11.0, "fill": 3}, {"op": "random_perspective", "p": 0.7},
         {"op": "normalize", "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}],
 "batch": {"size": 12}}
JSON
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --dump "$WORK/local" --quiet \
  2> "$WORK/local.err"
check "run --local: exits 0" test $? -eq 0
check "... masks [12, 40, 48] uint8 beside [12, 3, 40, 48] float32" /usr/bin/python3 -c "
import numpy as np, sys
d, m = np.load('$WORK/local/b000000_t0.npy'), np.load('$WORK/local/b000000_t1.npy')
sys.exit(not (d.shape == (12, 3, 40, 48) and m.shape == (12, 40, 48) and m.dtype == np.uint8 and
              (m == 250).any() and m.max() == 250 and sorted(set(np.unique(m)) - {250}) == list(range(21))))"
EMU=$B/lib/libspillway-gpuemu.so
[ -f "$EMU" ] || make -s -C "$ROOT" "$EMU" > /dev/null || exit 1
SPILLWAY_GPU_PLUGIN="$EMU" "$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 1 --gpu 0 \
  --gpu-mem-budget 64Mi --dump "$WORK/gpu" > /dev/null 2> "$WORK/gpu.err"
check "GPU producer (emulated): declines, and the CPU makes the same batches" same_batches gpu local
check "... saying why" grep -q "does not move masks" "$WORK/gpu.err"

start_service 2 --heartbeat-ms 100 || exit 1
for cut in 0 1 2 3 4 5 6 7; do
  timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --ordered \
    --cut "$cut" --local-cores 0 --dump "$WORK/cut$cut" --quiet 2> "$WORK/cut$cut.err"
  rc=$?
  grep -q "cut $cut is past" "$WORK/cut$cut.err" 2> /dev/null && break   # fewer groups than ops
  check "cut $cut, workers only: exits 0" test $rc -eq 0
  check "cut $cut, workers only: images and masks byte-identical to run --local" same_batches "cut$cut" local
done
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --ordered \
  --local-cores 1 --cut 2 --dump "$WORK/hybrid" --quiet 2> "$WORK/hybrid.err"
check "hybrid at cut 2: byte-identical to run --local" same_batches hybrid local
SPILLWAY_DIRECT=off timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" \
  --ordered --local-cores 0 --cut 1 --compress zstd:3 --dump "$WORK/grpc-zstd" --quiet 2> "$WORK/grpc-zstd.err"
check "the gRPC stream, zstd, cut 1: byte-identical to run --local" same_batches grpc-zstd local
killed_run "$WORK/p.json" killed --cut 2 --consume-rate 120
check "... batches byte-identical to run --local" same_batches killed local
# A worker lying about a mask's size (4000 x 4000 claimed in 8 bytes, tests/tools/fakeworker): the client drops
# its stream saying why, and the batches are the local run's.
lying_worker fields-mask 96 8 'field mask: a mask of 4000x4000 in 8 bytes' || exit 1
# VOC's folder layout: the workers read each image's mask from the parallel folder.
"$B/bin/spillctl" run --local --pipeline "$WORK/voc.json" --threads 2 --dump "$WORK/voc-local" --quiet \
  2> "$WORK/voc-local.err"
check "VOC layout, run --local: exits 0" test $? -eq 0
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/voc.json" --ordered --cut 1 \
  --local-cores 0 --dump "$WORK/voc-remote" --quiet 2> "$WORK/voc-remote.err"
check "VOC layout through the workers: byte-identical to run --local" same_batches voc-remote voc-local
# Images of different sizes in one batch (batch.pad): random_resize without a crop, padded batches with their
# shapes; the workers' elements are padded on the client as the local ones are.
sed -e 's/{"op": "random_resized_crop", "size": \[40, 48\], "scale": \[0.3, 1.0\]}/{"op": "random_resize", "min_size": 30, "max_size": 60}/' \
  -e 's/"batch": {"size": 12}/"batch": {"size": 12, "pad": true}/' "$WORK/p.json" > "$WORK/pad.json"
"$B/bin/spillctl" run --local --pipeline "$WORK/pad.json" --threads 2 --dump "$WORK/pad-local" --quiet \
  2> "$WORK/pad-local.err"
check "batch.pad, run --local: exits 0" test $? -eq 0
check "... images padded to the largest, shapes [12, 3], masks padded with ignore_index" /usr/bin/python3 -c "
import numpy as np, sys
d, s, m = (np.load('$WORK/pad-local/b000000_t%d.npy' % k) for k in (0, 1, 2))
h, w = s[:, 1], s[:, 2]
sys.exit(not (s.shape == (12, 3) and d.shape == (12, 3, h.max(), w.max()) and len(set(h)) > 1 and
              all((m[i, h[i]:] == 250).all() and (m[i, :, w[i]:] == 250).all() and not d[i, :, h[i]:].any()
                  for i in range(12))))"
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/pad.json" --ordered --cut 2 \
  --local-cores 0 --dump "$WORK/pad-remote" --quiet 2> "$WORK/pad-remote.err"
check "batch.pad through the workers: byte-identical to run --local" same_batches pad-remote pad-local
finish
