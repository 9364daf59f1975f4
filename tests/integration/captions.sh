#!/usr/bin/env bash
# tests/integration/captions.sh - sample fields (source.fields) from WebDataset shards of .jpg + .txt + .json
# (non-ASCII captions and titles, the .json also passed through raw, some keys without a caption, one
# caption that is not UTF-8, a source without labels): every (key, caption, title, raw bytes) delivered with
# its image exactly once per epoch - locally (also with the emulated GPU producer), and through a dispatcher
# and two workers with a worker killed -9 mid-run, ordered runs byte-identical to the local one at every cut
# (data connections, the gRPC stream, zstd, the client producing too); unordered runs the same pairs; a
# worker lying about the fields (none, offsets, lengths, bytes) has its stream dropped, the pairs still
# exactly once. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"

bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null || exit 1
# 3 shards of the 160 test images: KEY.jpg, KEY.txt (a caption; missing for every 16th key, not UTF-8 for
# key 7), KEY.json ({"title": ..., "id": ...}); expected.tsv lists what each delivered key must carry.
/usr/bin/python3 - "$B/data/cli-test/train" "$WORK" <<'PY' || exit 1
import glob, io, json, os, sys, tarfile
imgs = sorted(glob.glob(os.path.join(sys.argv[1], "*", "*.JPEG")))
work = sys.argv[2]
with open(os.path.join(work, "expected.tsv"), "w") as exp:
    for s in range(3):
        with tarfile.open(os.path.join(work, "shard-%d.tar" % s), "w") as t:
            for i in range(s, len(imgs), 3):
                key = "s%d/k%03d" % (s, i)
                def add(name, data):
                    ti = tarfile.TarInfo(name); ti.size = len(data); t.addfile(ti, io.BytesIO(data))
                add(key + ".jpg", open(imgs[i], "rb").read())
                caption = "caption %d: ünïcödé ✓ 日本語 %s" % (i, "x" * (i % 37))
                if i % 16 != 5:
                    add(key + ".txt", caption.encode() if i != 7 else b"\xff\xfe not text")
                meta = json.dumps({"title": "título %d" % i, "id": i}, ensure_ascii=False).encode()
                add(key + ".json", meta)
                if i % 16 != 5 and i != 7:
                    exp.write("%s.jpg\t%s\t%s\t%s\n" % (key, caption, "título %d" % i, meta.hex()))
PY
cat > "$WORK/p.json" <<JSON
{"source": {"format": "tar_shards", "path": "$WORK/shard-{0..2}.tar", "shuffle": true, "seed": 5, "epochs": 3,
            "labels": false,
            "fields": {"caption": {"from": "txt"}, "title": {"from": "json", "key": "title"},
                       "meta": {"from": "json", "as": "raw"}}},
 "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [32, 32]},
         {"op": "rand_augment", "num_ops": 2, "magnitude": 9}, {"op": "random_horizontal_flip"},
         {"op": "normalize", "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}],
 "batch": {"size": 16}}
JSON
# pairs DUMP: every delivered element's (epoch, key, caption, title) from a dump, each checked against
# expected.tsv, each key once per epoch, every expected key in every epoch.
pairs() {
  /usr/bin/python3 - "$WORK/$1" "$WORK/expected.tsv" <<'PY'
import collections, glob, os, sys
import numpy as np
d = sys.argv[1]
want = {}
for line in open(sys.argv[2], encoding="utf-8"):
    k, c, t, m = line.rstrip("\n").split("\t")
    want[k] = (c, t, bytes.fromhex(m))
keys = [l.split(" ", 2) for l in open(os.path.join(d, "keys.txt")).read().splitlines()]
seen = collections.Counter()
at = 0
for b in range(len(glob.glob(os.path.join(d, "b*_t0.npy")))):
    t = [np.load(os.path.join(d, "b%06d_t%d.npy" % (b, i))) for i in range(7)]
    assert t[1].dtype == np.uint8 and t[2].dtype == np.int64 and len(t[2]) == len(t[0]), "batch %d parts" % b
    for i in range(len(t[0])):
        epoch, _, path = keys[at]; at += 1
        key = path.split(":", 1)[1]
        cap = t[1][i, :t[2][i]].tobytes().decode("utf-8")
        title = t[3][i, :t[4][i]].tobytes().decode("utf-8")
        meta = t[5][i, :t[6][i]].tobytes()
        assert (cap, title, meta) == want[key], "%s: got %r %r %r, want %r" % (key, cap, title, meta, want[key])
        assert not t[1][i, t[2][i]:].any(), "%s: padding not zero" % key
        seen[(epoch, key)] += 1
assert at == len(keys), "keys and elements differ in count"
assert all(v == 1 for v in seen.values()), "a (epoch, key) twice: %s" % [k for k, v in seen.items() if v > 1][:3]
assert len(seen) == 3 * len(want), "%d of %d (epoch, key) pairs" % (len(seen), 3 * len(want))
PY
}
"$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 2 --dump "$WORK/local" --quiet \
  2> "$WORK/local.err"
check "run --local: exits 0" test $? -eq 0
check "run --local: every (key, caption, title) once per epoch, non-ASCII intact" pairs local
check "... the caption that is not UTF-8 skips its sample, saying why" \
  grep -q 'skipped sample=.*k007.jpg.*field caption: not UTF-8 text' "$WORK/local.err"
check "... keys without a caption are not samples (ignored)" bash -c "! grep -q 'k005.jpg' '$WORK/local/keys.txt'"
EMU=$B/lib/libspillway-gpuemu.so
[ -f "$EMU" ] || make -s -C "$ROOT" "$EMU" > /dev/null || exit 1
SPILLWAY_GPU_PLUGIN="$EMU" "$B/bin/spillctl" run --local --pipeline "$WORK/p.json" --threads 1 --gpu 0 \
  --gpu-mem-budget 64Mi --dump "$WORK/gpu" > /dev/null 2> "$WORK/gpu.err"
check "GPU producer (emulated plugin): the same batches, fields beside the device's elements" same_batches gpu local

start_service 2 --heartbeat-ms 100 || exit 1
for cut in 0 1 2 3 4; do
  timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --ordered \
    --cut "$cut" --local-cores 0 --dump "$WORK/cut$cut" --quiet 2> "$WORK/cut$cut.err"
  rc=$?
  grep -q "cut $cut is past" "$WORK/cut$cut.err" 2> /dev/null && break   # fewer groups than ops
  check "cut $cut, workers only: exits 0" test $rc -eq 0
  check "cut $cut, workers only: batches (fields too) byte-identical to run --local" same_batches "cut$cut" local
done
SPILLWAY_DIRECT=off timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" \
  --ordered --local-cores 0 --compress zstd:3 --dump "$WORK/grpc-zstd" --quiet 2> "$WORK/grpc-zstd.err"
check "the gRPC stream, zstd: byte-identical to run --local" same_batches grpc-zstd local
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --ordered \
  --local-cores 1 --cut 1 --dump "$WORK/hybrid" --quiet 2> "$WORK/hybrid.err"
check "hybrid (the client producing too): byte-identical to run --local" same_batches hybrid local
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/p.json" --local-cores 1 \
  --dump "$WORK/unordered" --quiet 2> "$WORK/unordered.err"
check "unordered: every (key, caption, title) once per epoch" pairs unordered
# A worker killed -9 mid-run (the trainer's pace keeps it running): the pairs stay exactly once.
killed_run "$WORK/p.json" killed --consume-rate 150
check "... every (key, caption, title) once per epoch" pairs killed
check "... batches byte-identical to run --local" same_batches killed local
# A worker lying about the fields (tests/tools/fakeworker, beside the real one): the client drops its stream
# saying why, and delivers every (key, caption, title) exactly once from the other producers.
lying_worker fields-missing 150 5 'elements without their fields' || exit 1
lying_worker fields-offsets 150 5 'fields offsets do not span the fields sent' || exit 1
lying_worker fields-length 150 5 'element 0: field caption: a length past the cap of 1 MiB' || exit 1
lying_worker fields-utf8 150 5 'element 0: field caption: not UTF-8 text' || exit 1
finish
