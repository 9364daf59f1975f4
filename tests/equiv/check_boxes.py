"""tests/equiv/check_boxes.py - detection boxes (source.fields "as": "boxes") against torchvision's detection
math: WebDataset shards of images (odd sizes) with KEY.json {"boxes", "labels"} (xyxy, and COCO's xywh) go
through spillway.Loader in this process; fusedcheck reports each sample's draws (the crop rectangle, the flip,
the perspective corners) from the same keys. The reference moves the boxes as torchvision 0.14's detection
references do (references/detection/transforms.py: hflip x0' = W - x1; a resize scales by the size ratios;
a crop subtracts its corner, clamps to the crop and drops the boxes left empty; RandomShortestSize and
RandomResize scale by the sides they drew; pad_if_smaller leaves them) and as torchvision's box
transforms do for warps (the corners through the forward map, F._get_inverse_affine_matrix inverted, and
F._get_perspective_coeffs inverted for random_perspective; the spanning box, clamped). Every kept box within
1e-4 of the reference, the same boxes dropped, class ids with their boxes; min_size drops the small ones. A
COCO set of 50 images (instances JSON; crowds, boxes past the border, empty ones, an image missing, some with
no annotations) delivers every annotation the references keep, with its image, once. Padded image batches
(batch.pad) hold each element as a batch of one does, zero-padded, with its shape.
Prints one line per check and "N passed, M failed".
usage: check_boxes.py FUSEDCHECK"""
import io
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile

import numpy as np
import torchvision.transforms.functional as F
from PIL import Image

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
os.environ.setdefault("SPILLWAY_LIB", os.path.join(ROOT, "build", "lib", "libspillway.so"))
from spillway import Loader  # noqa: E402

FUSED, TMP = sys.argv[1], tempfile.mkdtemp(prefix="spw-boxes-")
passed = failed = 0


def result(name, ok, detail=""):
    global passed, failed
    print("%s %-66s %s" % ("ok  " if ok else "FAIL", name, detail))
    passed, failed = passed + ok, failed + (not ok)


def make_samples(n=10, seed=3):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        w, h = rng.randint(61, 301) | 1, rng.randint(47, 257) | 1
        im = Image.fromarray(np.full((h, w, 3), (i * 20) % 256, np.uint8))
        k = rng.randint(0, 9)
        boxes, labels = [], []
        for _ in range(k):
            x0, y0 = rng.uniform(-0.0, w - 2), rng.uniform(0, h - 2)
            x1, y1 = rng.uniform(x0 + 0.5, min(w, x0 + w / 2)), rng.uniform(y0 + 0.5, min(h, y0 + h / 2))
            boxes.append([round(x0, 2), round(y0, 2), round(x1, 2), round(y1, 2)])
            labels.append(rng.randint(1, 90))
        out.append(("k%02d" % i, im, np.array(boxes, np.float64).reshape(-1, 4), np.array(labels, np.int64)))
    return out


def write_shard(path, samples, xywh=False):
    with tarfile.open(path, "w") as t:
        for key, im, boxes, labels in samples:
            b = io.BytesIO()
            im.save(b, "PNG")
            bx = boxes.copy()
            if xywh:
                bx[:, 2:] -= bx[:, :2]
            meta = json.dumps({"bb": bx.tolist(), "cat": labels.tolist(), "id": key}).encode()
            for name, data in ((key + ".png", b.getvalue()), (key + ".json", meta)):
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))


def spec_of(shard, ops, xywh=False, min_size=None, seed=5):
    f = {"from": "json", "as": "boxes", "key": "bb", "labels_key": "cat", "format": "xywh" if xywh else "xyxy"}
    if min_size is not None:
        f["min_size"] = min_size
    return {"source": {"format": "tar_shards", "path": shard, "shuffle": False, "labels": False, "seed": seed,
                       "fields": {"boxes": f}},
            "ops": [{"op": "decode_image"}] + ops, "batch": {"size": 1}}


def draws(spec, png_path, sample):
    """fusedcheck's report of sample's draws (rect, crop, perspective, hflip, vflip)."""
    sp = os.path.join(TMP, "spec.json")
    with open(sp, "w") as f:
        json.dump(spec, f)
    r = subprocess.run([FUSED, "run", sp, png_path, os.path.join(TMP, "out.npy"), str(sample)],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def clamp_drop(b, lab, w, h, min_size=0.0):
    b = b.copy()
    b[:, 0::2] = b[:, 0::2].clip(0, w)
    b[:, 1::2] = b[:, 1::2].clip(0, h)
    bw, bh = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
    keep = (bw >= min_size) & (bh >= min_size) if min_size > 0 else (bw > 0) & (bh > 0)
    return b[keep], lab[keep]


def warp(b, m):
    """Boxes through a 3x3 map: the corners, then the box spanning them."""
    xs = b[:, [0, 2, 2, 0]]
    ys = b[:, [1, 1, 3, 3]]
    den = m[2, 0] * xs + m[2, 1] * ys + m[2, 2]
    X = (m[0, 0] * xs + m[0, 1] * ys + m[0, 2]) / den
    Y = (m[1, 0] * xs + m[1, 1] * ys + m[1, 2]) / den
    return np.stack([X.min(1), Y.min(1), X.max(1), Y.max(1)], 1)


def affine_forward(w, h, angle, translate, scale, shear):
    inv = F._get_inverse_affine_matrix([w * 0.5, h * 0.5], angle, translate, scale, shear)
    return np.linalg.inv(np.array([inv[0:3], inv[3:6], [0, 0, 1]], np.float64))


def reference(op, d, b, lab, w, h, min_size):
    """One op of torchvision's detection rules on boxes b of a w x h image: the boxes, labels and new size."""
    kind = op["op"]
    if kind == "random_horizontal_flip" or kind == "horizontal_flip":
        if kind == "horizontal_flip" or d["hflip"]:
            b = np.stack([w - b[:, 2], b[:, 1], w - b[:, 0], b[:, 3]], 1)
        return b, lab, w, h
    if kind == "vertical_flip":
        return np.stack([b[:, 0], h - b[:, 3], b[:, 2], h - b[:, 1]], 1), lab, w, h
    if kind == "resize":
        size = op["size"]
        if isinstance(size, int):
            short, long_ = (w, h) if w <= h else (h, w)
            ns, nl = size, int(size * long_ / short)
            ow, oh = (ns, nl) if w <= h else (nl, ns)
        else:
            oh, ow = size
        b = b * np.array([ow / w, oh / h, ow / w, oh / h])
        b, lab = clamp_drop(b, lab, ow, oh, min_size)
        return b, lab, ow, oh
    if kind in ("random_resize", "random_shortest_size"):      # the references' RandomResize / ShortestSize
        if kind == "random_resize":
            short, long_ = (w, h) if w <= h else (h, w)
            ns, nl = d["edge"], int(d["edge"] * long_ / short)
            ow, oh = (ns, nl) if w <= h else (nl, ns)
        else:
            r = min(d["edge"] / min(h, w), op["max_size"] / max(h, w))
            ow, oh = int(w * r), int(h * r)
        b = b * np.array([ow / w, oh / h, ow / w, oh / h])
        b, lab = clamp_drop(b, lab, ow, oh, min_size)
        return b, lab, ow, oh
    if kind == "pad_if_smaller":                                # right and bottom: the boxes stay
        size = op["size"]
        return b, lab, max(w, size), max(h, size)
    if kind in ("crop", "random_crop", "center_crop", "random_resized_crop"):
        if kind == "crop":
            x, y, cw, ch = op["left"], op["top"], op["width"], op["height"]
        elif kind == "center_crop":
            ch, cw = op["size"] if isinstance(op["size"], list) else (op["size"], op["size"])
            x, y = int(round((w - cw) / 2.0)), int(round((h - ch) / 2.0))
        else:
            x, y, cw, ch = d["rect" if kind == "random_resized_crop" else "crop"]
        b = b - np.array([x, y, x, y])
        b, lab = clamp_drop(b, lab, cw, ch, 0.0 if kind == "random_resized_crop" else min_size)
        if kind == "random_resized_crop":
            oh, ow = op["size"] if isinstance(op["size"], list) else (op["size"], op["size"])
            b = b * np.array([ow / cw, oh / ch, ow / cw, oh / ch])
            b, lab = clamp_drop(b, lab, ow, oh, min_size)
            return b, lab, ow, oh
        return b, lab, cw, ch
    if kind in ("affine", "rotate"):
        m = (affine_forward(w, h, -op["angle"], [0, 0], 1.0, [0.0, 0.0]) if kind == "rotate" else
             affine_forward(w, h, op["angle"], op["translate"], op["scale"], op["shear"]))
        b, lab = clamp_drop(warp(b, m), lab, w, h, min_size)
        return b, lab, w, h
    if kind == "random_perspective":
        if "perspective" in d:
            start = [[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]]
            c = F._get_perspective_coeffs(start, d["perspective"])
            m = np.linalg.inv(np.array([c[0:3], c[3:6], [c[6], c[7], 1.0]], np.float64))
            b, lab = clamp_drop(warp(b, m), lab, w, h, min_size)
        return b, lab, w, h
    raise ValueError(kind)


def check(name, ops, xywh=False, min_size=None, n=10):
    samples = make_samples(n)
    shard = os.path.join(TMP, "boxes.tar")
    write_shard(shard, samples, xywh)
    spec = spec_of(shard, ops, xywh, min_size)
    got = {}
    with Loader(spec, local_cores=1) as ld:
        for bt in ld:
            key = bt.keys[0].path.rsplit(":", 1)[1][:-4]
            got[key] = (np.asarray(bt["boxes"][0], np.float64), np.asarray(bt.targets[0]["labels"]),
                        tuple(np.asarray(bt.data).shape[1:3]))
    bad, kept, dropped, worst = [], 0, 0, 0.0
    for i, (key, im, boxes, labels) in enumerate(samples):
        png_path = os.path.join(TMP, "in.png")
        im.save(png_path)
        d = draws(spec, png_path, i)
        b, lab, w, h = boxes, labels, im.size[0], im.size[1]
        for op in ops:
            b, lab, w, h = reference(op, d, b, lab, w, h, min_size or 0.0)
        gb, gl, shape = got[key]
        if shape != (h, w) or gb.shape != b.shape or not np.array_equal(gl, lab):
            bad.append("%s: %d boxes %s, want %d %s" % (key, len(gb), shape, len(b), (h, w)))
            continue
        err = float(np.abs(gb - b).max()) if len(b) else 0.0
        worst = max(worst, err)
        if err > 1e-4:
            bad.append("%s: off by %.2g" % (key, err))
        kept += len(b)
        dropped += len(boxes) - len(b)
    result(name, not bad, "; ".join(bad[:3]) or "%d kept, %d dropped, worst %.1e" % (kept, dropped, worst))


check("random_horizontal_flip", [{"op": "random_horizontal_flip"}])
check("vertical_flip", [{"op": "vertical_flip"}])
check("resize [h, w]", [{"op": "resize", "size": [77, 131]}])
check("resize edge (COCO xywh boxes)", [{"op": "resize", "size": 97}], xywh=True)
check("crop", [{"op": "crop", "top": 9, "left": 13, "height": 40, "width": 51}])
check("center_crop", [{"op": "center_crop", "size": [45, 57]}])
check("random_crop padded", [{"op": "random_crop", "size": [60, 70], "padding": [5, 3], "pad_if_needed": True}])
check("random_resized_crop", [{"op": "random_resized_crop", "size": [64, 48], "scale": [0.2, 1.0]}])
check("random_resized_crop + flip, min_size 4", [{"op": "random_resized_crop", "size": 56, "scale": [0.1, 0.6]},
                                               {"op": "random_horizontal_flip"}], min_size=4.0)
check("random_resize", [{"op": "random_resize", "min_size": 40, "max_size": 140}])
check("random_shortest_size + flip (the references' multiscale preset)",
      [{"op": "random_shortest_size", "min_size": [48, 64, 80, 96], "max_size": 133},
       {"op": "random_horizontal_flip"}])
check("pad_if_smaller", [{"op": "pad_if_smaller", "size": 120}])
check("affine", [{"op": "affine", "angle": 17.0, "translate": [6, -3], "scale": 0.85, "shear": [7.0, -4.0]}])
check("rotate", [{"op": "rotate", "angle": -28.0}])
check("random_perspective", [{"op": "random_perspective", "p": 1.0, "distortion_scale": 0.5}])


def make_coco(root, n=50, seed=9):
    """A COCO set of n images (one listed but missing, some without annotations) with crowds, boxes past the
    border and empty ones: the annotations file and {file_name: (boxes, category ids)} as the references keep
    them (crowds dropped, xywh to xyxy, clamped to the image, empty ones dropped)."""
    rng = random.Random(seed)
    os.makedirs(os.path.join(root, "images", "sub"), exist_ok=True)
    images, anns, want = [], [], {}
    for i in range(n):
        w, h = rng.randint(40, 90), rng.randint(30, 70)
        name = ("sub/" if i % 5 == 0 else "") + "img%03d.png" % i
        images.append({"id": 1000 + 7 * i, "file_name": name, "width": w, "height": h})
        if i != 17:
            Image.fromarray(np.full((h, w, 3), i, np.uint8)).save(os.path.join(root, "images", name))
        for k in range(rng.choice([0, 0, 1, 3, 6])):
            x, y = rng.uniform(-10, w), rng.uniform(-10, h)
            bw, bh = rng.choice([0.0, rng.uniform(0.5, 40)]), rng.uniform(0.5, 30)
            anns.append({"id": len(anns) + 1, "image_id": 1000 + 7 * i, "bbox": [x, y, bw, bh],
                         "category_id": rng.randint(1, 90), "iscrowd": int(rng.random() < 0.15), "area": bw * bh})
    rng.shuffle(anns)
    keep = {im["id"]: [] for im in images}
    for a in anns:              # pycocotools' imgToAnns: each image's annotations in the file's order
        im = images[(a["image_id"] - 1000) // 7]
        x, y, bw, bh = a["bbox"]
        x0, y0 = min(max(x, 0), im["width"]), min(max(y, 0), im["height"])
        x1, y1 = min(max(x + bw, 0), im["width"]), min(max(y + bh, 0), im["height"])
        if not a["iscrowd"] and x1 > x0 and y1 > y0:
            keep[a["image_id"]].append(([x0, y0, x1, y1], a["category_id"]))
    for i, im in enumerate(images):
        k = keep[im["id"]]
        if i != 17:
            want[im["file_name"]] = (np.array([b for b, _ in k], np.float64).reshape(-1, 4), [c for _, c in k])
    path = os.path.join(root, "instances_train.json")
    with open(path, "w") as f:
        json.dump({"images": images, "annotations": anns, "categories": [{"id": c} for c in range(1, 91)]}, f)
    return path, want, sum(len(v[1]) for v in want.values())


def check_coco():
    root = os.path.join(TMP, "coco")
    ann, want, n_boxes = make_coco(root)
    spec = {"source": {"format": "coco", "path": os.path.join(root, "images"), "annotations": ann, "seed": 2},
            "ops": [{"op": "decode_image"}], "batch": {"size": 1}}
    got, bad = {}, []
    with Loader(spec, local_cores=2) as ld:
        for bt in ld:
            name = os.path.relpath(bt.keys[0].path, os.path.join(root, "images"))
            t = bt.targets[0]
            if name in got:
                bad.append(name + " twice")
            got[name] = (np.asarray(t["boxes"], np.float64), list(np.asarray(t["labels"])))
    for name, (b, cats) in want.items():
        g = got.get(name)
        if g is None or g[1] != cats or g[0].shape != b.shape or (len(b) and np.abs(g[0] - b).max() > 1e-4):
            bad.append("%s: got %s %s, want %s %s" % (name, None if g is None else g[0].tolist(),
                                                    None if g is None else g[1], b.tolist(), cats))
    result("coco: %d images, every kept annotation with its image once" % len(want),
           not bad and len(got) == len(want), ", ".join(bad[:4]) or "%d boxes" % n_boxes)


def check_padded_batches():
    """batch.pad on images (the detection references' multiscale preset, to_tensor, batches of 4): each element
    is the image a batch of one gives, zero-padded at the bottom and right to the batch's largest, its shape in
    "shapes"; .images and .targets give torchvision's detection model inputs."""
    samples = make_samples(10)
    shard = os.path.join(TMP, "padded.tar")
    write_shard(shard, samples)
    ops = [{"op": "random_shortest_size", "min_size": [48, 64, 80], "max_size": 133},
           {"op": "random_horizontal_flip"}, {"op": "to_tensor"}]
    one, bad, padded = {}, [], 0
    with Loader(spec_of(shard, ops), local_cores=1) as ld:
        for bt in ld:
            one[bt.keys[0].path] = (np.array(bt.data[0]), np.array(bt["boxes"][0]))
    spec = spec_of(shard, ops)
    spec["batch"] = {"size": 4, "pad": True}
    with Loader(spec, local_cores=2) as ld:
        for bt in ld:
            data, shapes = np.asarray(bt.data), np.asarray(bt["shapes"])
            if data.shape[1:] != tuple(shapes.max(0)) or shapes.shape != (bt.n, 3):
                bad.append("batch %s, shapes %s" % (data.shape, shapes.tolist()))
            for i, (key, im, t) in enumerate(zip(bt.keys, bt.images, bt.targets)):
                want, boxes = one[key.path]
                region = tuple(slice(0, d) for d in want.shape)
                rest = data[i].copy()
                rest[region] = 0
                padded += want.shape != data.shape[1:]
                if (list(shapes[i]) != list(want.shape) or not np.array_equal(np.asarray(im), want) or rest.any()
                        or not np.array_equal(np.asarray(t["boxes"]), boxes)):
                    bad.append(key.path.rsplit(":", 1)[1])
    result("batch.pad: images of different sizes in one batch", not bad and len(one) == 10,
           ", ".join(bad[:4]) or "10 elements, %d padded" % padded)


check_coco()
check_padded_batches()
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
