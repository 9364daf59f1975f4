#!/usr/bin/env bash
# tests/equiv/run.sh - equivalence with torchvision 0.14 + Pillow (Debian's python3-torchvision), with
# references made at test time from real photos: the fused decode group (check_fused.py), the colour,
# geometry and policy kernels (check_ops.py), the random ops' distributions (check_distributions.py), and
# decode_image's PNG, WebP and EXIF orientation against Pillow on real files (check_images.py), and
# batch.mix against torchvision's references' MixUp / CutMix (check_mix.py), aug_mix against AugMix
# (check_augmix.py), segmentation masks and detection boxes through every geometric op (check_masks.py,
# check_boxes.py; COCO's annotations too).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
PHOTOS=$ROOT/build/equiv/photos
mkdir -p "$PHOTOS"
status=0
"$PY" "$ROOT/tests/equiv/check_fused.py" "$ROOT/build/tests/fusedcheck" "$PHOTOS" || status=1
"$PY" "$ROOT/tests/equiv/check_ops.py" "$ROOT/build/tests/opcheck" || status=1
"$PY" "$ROOT/tests/equiv/check_distributions.py" "$ROOT/build/tests/fusedcheck" || status=1
"$PY" "$ROOT/tests/equiv/check_augmix.py" "$ROOT/build/tests/fusedcheck" "$PHOTOS" || status=1
"$PY" "$ROOT/tests/equiv/check_images.py" "$ROOT/build/tests/fusedcheck" "$PHOTOS" || status=1
"$PY" "$ROOT/tests/equiv/check_masks.py" "$PHOTOS" "$ROOT/build/tests/fusedcheck" || status=1
"$PY" "$ROOT/tests/equiv/check_boxes.py" "$ROOT/build/tests/fusedcheck" || status=1
bash "$ROOT/scripts/data/make-dataset.sh" "$ROOT/build/data/cli-test" 160 > /dev/null
"$PY" "$ROOT/tests/equiv/check_mix.py" "$ROOT/build/bin/spillctl" "$ROOT/build/tests/fusedcheck" \
  "$ROOT/build/data/cli-test/train" || status=1
exit $status
