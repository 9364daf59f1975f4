#!/usr/bin/python3
"""scripts/data/make_targets.py IMAGES OUT - segmentation and detection targets for a folder of photos, so the
segmentation and detection recipes (examples/pipelines/) run on the benchmark and test photos:
OUT/masks/<the image's relative path, .png> - a label map per photo (its grey level in 21 classes, VOC's
count, as an 8-bit greyscale PNG, a band of 255 "ignore" along the left edge as VOC's borders), and
OUT/instances.json - a COCO instances file over the same photos (file_name relative to IMAGES), 1 to 8 boxes
per photo inside it with category ids 1 to 90, seeded by the file's name. Deterministic; skips the work when
OUT/stamp.json records the same image list. One process; thread-free."""
import hashlib
import json
import os
import random
import sys

import numpy as np
from PIL import Image

EXTS = (".jpeg", ".jpg", ".png", ".webp")


def main():
    images, out = sys.argv[1], sys.argv[2]
    names = sorted(os.path.relpath(os.path.join(d, f), images) for d, _, fs in os.walk(images, followlinks=True)
                   for f in fs if f.lower().endswith(EXTS))
    digest = hashlib.sha256("\n".join(names).encode()).hexdigest()
    stamp = os.path.join(out, "stamp.json")
    if os.path.exists(stamp) and json.load(open(stamp)).get("images") == digest:
        return
    coco = {"images": [], "annotations": [], "categories": [{"id": c, "name": "c%d" % c} for c in range(1, 91)]}
    for i, name in enumerate(names):
        im = Image.open(os.path.join(images, name))
        w, h = im.size
        lab = (np.asarray(im.convert("L"), dtype=np.uint16) * 21 // 256).astype(np.uint8)
        lab[:, :max(1, w // 50)] = 255
        path = os.path.join(out, "masks", os.path.splitext(name)[0] + ".png")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Image.fromarray(lab, "L").save(path)
        rng = random.Random(name)
        coco["images"].append({"id": i + 1, "file_name": name, "width": w, "height": h})
        for _ in range(rng.randint(1, 8)):
            bw, bh = rng.uniform(8, w / 2), rng.uniform(8, h / 2)
            x, y = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
            coco["annotations"].append({"id": len(coco["annotations"]) + 1, "image_id": i + 1,
                                        "bbox": [round(x, 2), round(y, 2), round(bw, 2), round(bh, 2)],
                                        "area": round(bw * bh, 2), "iscrowd": 0,
                                        "category_id": rng.randint(1, 90)})
    with open(os.path.join(out, "instances.json"), "w") as f:
        json.dump(coco, f)
    with open(stamp, "w") as f:
        json.dump({"images": digest}, f)


if __name__ == "__main__":
    main()
