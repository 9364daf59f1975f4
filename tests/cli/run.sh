#!/usr/bin/env bash
# tests/cli/run.sh - spillctl end to end on a generated ImageNet-like dataset: --help, spec errors, dumps
# byte-identical for --threads 1 and 2, an eval pipeline keeping its partial batch, tar shards, corrupt
# inputs (truncated, zero-byte, not a JPEG, absurd dimensions) under on_error skip and fail, a half-truncated
# JPEG skipped in every epoch whatever the crop, and damaged JPEGs judged as Pillow judges them on every decode
# path; the progress line (epoch, total, ETA) and --quiet; then the audio checks of tests/cli/audio.sh.
# Prints one line per check and "N passed, M failed"; exits 1 on any failure.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CTL=$ROOT/build/bin/spillctl
PY=/usr/bin/python3
WORK=$(mktemp -d /tmp/spw-cli-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

DATA=$ROOT/build/data/cli-test
bash "$ROOT/scripts/data/make-dataset.sh" "$DATA" 160 >/dev/null || { echo "FAIL dataset"; exit 1; }
MEAN='[0.485, 0.456, 0.406]' STD='[0.229, 0.224, 0.225]'

spec() {  # spec FILE SOURCE_JSON OPS_JSON BATCH_JSON [EXTRA]
  printf '{"source": %s, "ops": %s, "batch": %s%s}\n' "$2" "$3" "$4" "${5:-}" > "$1"
}
json_field() { "$PY" -c "import json,sys; print(json.load(open('$1'))['$2'])"; }

# --help and usage errors
check "--help exits 0 and documents run --local" bash -c "'$CTL' --help | grep -q -- 'run --local'"
"$CTL" bogus --pipeline x >/dev/null 2>&1; check "unknown command exits 2" test $? -eq 2
"$CTL" status > /dev/null 2> "$WORK/status.err"; rc=$?
check "spillctl status: named as an unknown command (exit 2), not as a missing --pipeline" \
  bash -c "test $rc -eq 2 && grep -q 'unknown command \"status\" (commands: run, validate' '$WORK/status.err' && ! grep -q pipeline '$WORK/status.err'"
"$CTL" > /dev/null 2> "$WORK/none.err"; rc=$?
check "no command: said so, exit 2" bash -c "test $rc -eq 2 && grep -q 'no command given' '$WORK/none.err'"
check "--version prints the build's version, exit 0" bash -c "'$CTL' --version | grep -Eq '^spillway [^ ]+ \(protocol [0-9]+\)$'"
for cmd in run validate workers jobs job explain watch profile plan help; do
  "$CTL" "$cmd" --help > "$WORK/help-$cmd.out" 2>&1; rc=$?
  check "spillctl $cmd --help: its own synopsis and the exit statuses, exit 0" \
    bash -c "test $rc -eq 0 && head -1 '$WORK/help-$cmd.out' | grep -q -- ' $cmd' && grep -q '^Exit status' '$WORK/help-$cmd.out' && test \$(grep -c '^usage:' '$WORK/help-$cmd.out') -eq 1"
done
check "spillctl help watch = spillctl watch --help" bash -c "diff <('$CTL' help watch) <('$CTL' watch --help)"
check "run --help does not list the other commands" bash -c "! '$CTL' run --help | grep -q 'explain ID'"
"$CTL" validate extra --pipeline x > /dev/null 2> "$WORK/extra.err"; rc=$?
check "an unexpected argument is named, exit 2" bash -c "test $rc -eq 2 && grep -q 'unexpected argument \"extra\"' '$WORK/extra.err'"
"$CTL" run --frobnicate > /dev/null 2> "$WORK/opt.err"; rc=$?
check "an unknown option: exit 2 and a pointer to --help" bash -c "test $rc -eq 2 && grep -q 'frobnicate' '$WORK/opt.err' && grep -q -- '--help' '$WORK/opt.err'"

# spec errors name the field and value, exit 2
spec "$WORK/bad.json" '{"format": "image_folder", "path": "'"$DATA"'/train"}' \
  '[{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": 224}, {"op": "random_horizontal_flip"}, {"op": "rand_augment", "magnitude": 40}]' \
  '{"size": 8}'
"$CTL" run --local --pipeline "$WORK/bad.json" > /dev/null 2> "$WORK/bad.err"
rc=$?
check "bad magnitude exits 2" test $rc -eq 2
check "bad magnitude message names ops[3].magnitude" grep -q 'ops\[3\].magnitude: 40' "$WORK/bad.err"
spec "$WORK/bad2.json" '{"format": "image_folder", "path": "'"$DATA"'/train"}' '[{"op": "decode_jpeg"}, {"op": "random_resize_crop"}]' '{"size": 8}'
"$CTL" validate --pipeline "$WORK/bad2.json" > /dev/null 2> "$WORK/bad2.err"
check "unknown op is named" grep -q 'random_resize_crop' "$WORK/bad2.err"

# training pipeline: byte-identical dumps for 1 and 2 threads
TRAIN_OPS='[{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [224, 224]}, {"op": "random_horizontal_flip", "p": 0.5}, {"op": "rand_augment", "num_ops": 2, "magnitude": 9}, {"op": "normalize", "mean": '"$MEAN"', "std": '"$STD"'}]'
spec "$WORK/train.json" '{"format": "image_folder", "path": "'"$DATA"'/train", "shuffle": true, "seed": 7, "epochs": 2}' "$TRAIN_OPS" '{"size": 32}'
"$CTL" run --local --pipeline "$WORK/train.json" --threads 1 --dump "$WORK/d1" --json --quiet > "$WORK/t1.json"
r1=$?
"$CTL" run --local --pipeline "$WORK/train.json" --threads 2 --dump "$WORK/d2" --json --quiet > "$WORK/t2.json"
r2=$?
check "train run succeeds (1 and 2 threads)" test $r1 -eq 0 -a $r2 -eq 0
check "dumps byte-identical for --threads 1 and 2" diff -r -q "$WORK/d1" "$WORK/d2"
check "two epochs of 160 samples delivered" test "$(json_field "$WORK/t1.json" elements)" = 320
check "10 batches (5 per epoch)" test "$(ls "$WORK"/d1/b*_t0.npy | wc -l)" = 10
"$CTL" run --local --pipeline "$WORK/train.json" --threads 2 --consume-rate 100 --max-seconds 1.5 --json --quiet \
  > "$WORK/paced.json"
check "run --local --consume-rate 100 consumes at most 100 elements/s (one batch of slack)" \
  "$PY" -c "import json, sys; d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); assert d['consumed'] <= 100 * d['seconds'] + 32, d" \
  "$WORK/paced.json"
"$CTL" run --local --pipeline "$WORK/train.json" --threads 1 --consume-rate 100 > /dev/null 2> "$WORK/progress.err"
check "the progress line: epoch k/N, elements done of the total with %, the batch, rate, ETA; a last at 100%" \
  bash -c "grep -Eq '^spillctl: epoch [12]/2, [0-9]+ of 320 elements \([0-9.]+%\), batch [0-9]+ of 10, [0-9]+ elements/s, ETA 0:00:0[0-9]$' \
    '$WORK/progress.err' && grep -q '^spillctl: epoch 2/2, 320 of 320 elements (100.0%), batch 10 of 10' '$WORK/progress.err'"
"$CTL" run --local --pipeline "$WORK/train.json" --threads 1 --consume-rate 100 --quiet > /dev/null 2> "$WORK/quiet.err"
check "--quiet: no progress line" bash -c "! grep -q 'elements (' '$WORK/quiet.err'"
check "keys.txt has one line per element" test "$(wc -l < "$WORK/d1/keys.txt")" = 320
check "every epoch visits every sample once" bash -c "for e in 0 1; do [ \"\$(awk -v e=\$e '\$1==e {print \$2}' '$WORK/d1/keys.txt' | sort -n | uniq | wc -l)\" = 160 ] || exit 1; done"
check "epochs are shuffled differently" bash -c "! diff -q <(awk '\$1==0 {print \$2}' '$WORK/d1/keys.txt') <(awk '\$1==1 {print \$2}' '$WORK/d1/keys.txt') >/dev/null"
check "a batch mixes classes" bash -c "[ \$(head -32 '$WORK/d1/keys.txt' | awk '{print \$3}' | xargs -n1 dirname | sort -u | wc -l) -ge 3 ]"
"$PY" "$ROOT/tests/cli/run_checks.py" batch_tensors "$WORK/d1" && ok "batch tensors: [32,3,224,224] float32 + [32] int64 labels" || bad "batch tensor shapes"
"$PY" -c "import json; d=json.load(open('$WORK/t1.json')); assert d['elements_per_s'] > 0 and len(d['ops']) >= 2 and all(o['ns_per_element'] > 0 for o in d['ops']) and len(d['groups']) == 3" \
  && ok "--json has throughput, fusion groups and per-op stats" || bad "--json content"

# eval pipeline: no shuffle, resize + center_crop, partial last batch kept, uint8 CHW output
EVAL_OPS='[{"op": "decode_jpeg"}, {"op": "resize", "size": 256}, {"op": "center_crop", "size": 224}]'
spec "$WORK/eval.json" '{"format": "image_folder", "path": "'"$DATA"'/val", "shuffle": false}' "$EVAL_OPS" '{"size": 64, "drop_remainder": false, "layout": "CHW"}'
"$CTL" run --local --pipeline "$WORK/eval.json" --threads 2 --dump "$WORK/ev" --json --quiet > "$WORK/ev.json"
nval=$(find "$DATA/val" -name '*.JPEG' | wc -l)
check "eval delivers every val image once" test "$(json_field "$WORK/ev.json" elements)" = "$nval"
check "eval order is the sorted listing" bash -c "diff -q <(awk '{print \$3}' '$WORK/ev/keys.txt') <(find '$DATA/val' -name '*.JPEG' | LC_ALL=C sort) >/dev/null"
"$PY" "$ROOT/tests/cli/run_checks.py" eval_batches "$WORK/ev" "$nval" && ok "eval last batch is partial, uint8 CHW" || bad "eval batch shapes"

# tar shards (WebDataset convention)
spec "$WORK/tar.json" '{"format": "tar_shards", "path": "'"$DATA"'/shards/*.tar", "shuffle": true}' "$EVAL_OPS" '{"size": 16}'
"$CTL" run --local --pipeline "$WORK/tar.json" --threads 2 --json --quiet > "$WORK/tar.out"
check "tar shards: every member pair is a sample" test "$(json_field "$WORK/tar.out" elements)" = "$(json_field "$WORK/tar.out" samples_in_source)"

# corrupt inputs: skip counts and continues; fail stops naming the file
mkdir -p "$WORK/bad/a" "$WORK/bad/b"
find "$DATA/train" -name '*.JPEG' | LC_ALL=C sort | head -20 | while read -r f; do cp "$f" "$WORK/bad/a/"; done
good=$(find "$DATA/train" -name '*.JPEG' | LC_ALL=C sort | head -1)
"$PY" "$ROOT/tests/data/make_broken_jpegs.py" "$good" "$WORK/bad/b"
spec "$WORK/skip.json" '{"format": "image_folder", "path": "'"$WORK"'/bad", "shuffle": true, "seed": 1}' "$TRAIN_OPS" '{"size": 8}' ', "on_error": "skip"'
"$CTL" run --local --pipeline "$WORK/skip.json" --threads 2 --json --quiet > "$WORK/skip.out" 2> "$WORK/skip.err"
check "skip policy: run succeeds" test $? -eq 0
check "skip policy: 4 corrupt samples skipped" test "$(json_field "$WORK/skip.out" skipped)" = 4
check "skip policy: 20 good samples delivered" test "$(json_field "$WORK/skip.out" elements)" = 20
check "skip policy: each skip logged with its path" test "$(grep -c 'skipped sample=' "$WORK/skip.err")" = 4
check "absurd dimensions hit the pixel cap" grep -q 'huge.jpg.*exceeds max_pixels' "$WORK/skip.err"
spec "$WORK/fail.json" '{"format": "image_folder", "path": "'"$WORK"'/bad", "shuffle": false}' "$TRAIN_OPS" '{"size": 8}' ', "on_error": "fail"'
"$CTL" run --local --pipeline "$WORK/fail.json" --threads 2 --quiet > /dev/null 2> "$WORK/fail.err"
check "fail policy: exits 1" test $? -eq 1
check "fail policy: message names the file" grep -q 'run failed:.*/bad/b/' "$WORK/fail.err"

# A JPEG cut to half its bytes among good ones (issue 15): Pillow fails on it ("image file is truncated"), so
# it is skipped in every epoch whatever region the crop decodes, and fails a run naming it. class_01_00071's
# centre lies in its first half: the ROI decode that stopped after the crop's last row delivered it under
# center_crop in every epoch and under random_resized_crop in some.
TR=$WORK/trunc
mkdir -p "$TR/bad" "$TR/good"
find "$DATA/train/class_00" -name '*.JPEG' | LC_ALL=C sort | head -12 | while read -r f; do cp "$f" "$TR/good/"; done
half_src=$DATA/train/class_01/class_01_00071.JPEG
head -c $(( $(stat -c %s "$half_src") / 2 )) "$half_src" > "$TR/bad/half.jpg"
"$PY" "$ROOT/tests/cli/run_checks.py" pillow_fails "$TR/bad/half.jpg" && ok "Pillow fails on the half-truncated JPEG" || bad "Pillow fails on the half-truncated JPEG"
EPOCHS=5
for geo in '{"op": "center_crop", "size": 224}' '{"op": "random_resized_crop", "size": 224}' \
           '{"op": "resize", "size": [224, 224]}'; do
  op=$(sed 's/.*"op": "\([a-z_]*\)".*/\1/' <<<"$geo")
  spec "$TR/$op-skip.json" '{"format": "image_folder", "path": "'"$TR"'", "shuffle": true, "seed": 5, "epochs": '"$EPOCHS"'}' \
    "[{\"op\": \"decode_jpeg\"}, $geo]" '{"size": 4}' ', "on_error": "skip"'
  "$CTL" run --local --pipeline "$TR/$op-skip.json" --threads 2 --dump "$TR/$op-d" --json --quiet > "$TR/$op.out" 2> "$TR/$op.err"
  check "half-truncated, $op, on_error skip: run succeeds" test $? -eq 0
  check "half-truncated, $op: skipped once in each of $EPOCHS epochs" test "$(json_field "$TR/$op.out" skipped)" = "$EPOCHS"
  check "half-truncated, $op: every epoch delivers the 12 good files and never it" bash -c \
    "for e in \$(seq 0 $((EPOCHS - 1))); do [ \"\$(awk -v e=\$e '\$1==e {print \$3}' '$TR/$op-d/keys.txt' | grep -c '/good/')\" = 12 ] || exit 1; done; ! grep -q half.jpg '$TR/$op-d/keys.txt'"
  check "half-truncated, $op: each skip logged with the path and 'truncated JPEG'" \
    test "$(grep -c 'skipped sample=.*bad/half.jpg.*truncated JPEG' "$TR/$op.err")" = "$EPOCHS"
  spec "$TR/$op-fail.json" '{"format": "image_folder", "path": "'"$TR"'", "shuffle": true, "seed": 5, "epochs": '"$EPOCHS"'}' \
    "[{\"op\": \"decode_jpeg\"}, $geo]" '{"size": 4}' ', "on_error": "fail"'
  "$CTL" run --local --pipeline "$TR/$op-fail.json" --threads 2 --quiet > /dev/null 2> "$TR/$op-fail.err"
  check "half-truncated, $op, on_error fail: exits 1" test $? -eq 1
  check "half-truncated, $op, on_error fail: names the file and the reason" \
    grep -q 'run failed:.*bad/half.jpg.*truncated JPEG' "$TR/$op-fail.err"
done

# Each kind of damage against each decode path, judged by Pillow itself: the samples Spillway delivers are
# exactly the ones Pillow decodes. Cuts at 50/90/99%, no EOI, garbage after EOI, scan bytes zeroed or
# overwritten, a marker written into the scan, of a baseline photo and a progressive file, and the fixture
# without EOI that Pillow accepts (tests/unit/check_decode.c has the same cases with fixed verdicts).
MX=$WORK/matrix
"$PY" "$ROOT/tests/cli/run_checks.py" pillow_matrix "$MX/c" "$half_src" "$ROOT/tests/data/fixtures" > "$MX.pillow_ok"
npil=$(wc -l < "$MX.pillow_ok")
check "damage matrix: Pillow decodes some files and fails on others" \
  test "$npil" -gt 5 -a "$npil" -lt "$(find "$MX/c" -name '*.jpg' | wc -l)"
i=0
for ops in '[{"op": "decode_jpeg"}]' \
           '[{"op": "decode_jpeg"}, {"op": "center_crop", "size": 48}]' \
           '[{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": 48}]' \
           '[{"op": "decode_jpeg"}, {"op": "resize", "size": [40, 40]}]' \
           '[{"op": "decode_jpeg"}, {"op": "resize", "size": 256}, {"op": "center_crop", "size": 224}]'; do
  i=$((i + 1))
  spec "$MX/p$i.json" '{"format": "image_folder", "path": "'"$MX"'", "shuffle": true, "seed": 3, "epochs": 3}' "$ops" \
    '{"size": 1}' ', "on_error": "skip"'
  "$CTL" run --local --pipeline "$MX/p$i.json" --threads 2 --dump "$MX/d$i" --quiet > /dev/null 2>&1
  check "damage matrix, $ops: delivers exactly what Pillow decodes, in each of 3 epochs" bash -c \
    "for e in 0 1 2; do diff <(awk -v e=\$e '\$1==e {print \$3}' '$MX/d$i/keys.txt' | LC_ALL=C sort) <(LC_ALL=C sort '$MX.pillow_ok') || exit 1; done"
done

# epochs: 0 runs forever; no batch spans two epochs (160 samples, batches of 50: 50 50 50 10 | 50 50 ...)
spec "$WORK/forever.json" '{"format": "image_folder", "path": "'"$DATA"'/train", "epochs": 0, "seed": 3}' "$EVAL_OPS" '{"size": 50}'
"$CTL" run --local --pipeline "$WORK/forever.json" --max-batches 6 --threads 2 --dump "$WORK/fe" --json --quiet > "$WORK/fe.json"
check "epochs 0: runs past the first epoch" test "$(json_field "$WORK/fe.json" elements)" = 260
check "epochs 0: the epoch's last batch is partial" test "$(awk 'NR > 150 && NR <= 160' "$WORK/fe/keys.txt" | awk '{print $1}' | sort -u)" = 0
check "epochs 0: epoch 1 starts a new batch" test "$(sed -n '161p;260p' "$WORK/fe/keys.txt" | awk '{print $1}' | sort -u)" = 1
"$PY" "$ROOT/tests/cli/run_checks.py" epochs_zero_sizes "$WORK/fe" && ok "epochs 0: batch sizes 50 50 50 10 50 50" || bad "epochs 0: batch sizes"

# an op whose output would exceed max_pixels is refused before allocating
spec "$WORK/big.json" '{"format": "image_folder", "path": "'"$DATA"'/val"}' '[{"op": "decode_jpeg"}, {"op": "resize", "size": [60000, 60000]}]' '{"size": 1}' ', "on_error": "fail"'
"$CTL" run --local --pipeline "$WORK/big.json" --max-batches 1 --quiet > /dev/null 2> "$WORK/big.err"
check "oversized op output: exits 1" test $? -eq 1
check "oversized op output: names the cap" grep -q '60000x60000 output exceeds max_pixels' "$WORK/big.err"

# audio (tests/cli/audio.sh): malformed WAVs under skip and fail, decoding, resampling, caps, labels.tsv and
# WAV tar shards; its check lines count here, and it must not exit non-zero without a FAIL line
audio_fail=0
while IFS= read -r line; do
  case $line in
    "ok   "*) ok "${line#ok   }" ;;
    "FAIL "*) bad "${line#FAIL }"; audio_fail=1 ;;
    "audio: exit 0" | "audio: "*" passed, "*) ;;
    "audio: exit "*) [ "$audio_fail" -eq 1 ] || bad "tests/cli/audio.sh: ${line#audio: }" ;;
    *) echo "$line" ;;
  esac
done < <(bash "$ROOT/tests/cli/audio.sh" 2>&1; echo "audio: exit $?")

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
