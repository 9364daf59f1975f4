"""tests/equiv/check_masks.py - segmentation masks (source.fields "as": "mask") against torchvision 0.14 +
Pillow on real photos: WebDataset shards of a photo (PNG, odd sizes) and its label map (a palette PNG, and a
greyscale one) go through spillway.Loader in this process.
Fixed parameters: each geometric op alone (resize to [h, w] and to an edge, crop, center_crop, pad, rotate
(nearest and bilinear), affine, both flips, random_resize and random_shortest_size at one size,
pad_if_smaller, and those resizes run as one resample with the ops after them) gives the image byte-equal to
the torchvision functional op on the PIL image and the mask byte-equal to the same op on the PIL mask with
NEAREST and fill = ignore_index, as torchvision's segmentation references do.
Random forms: a synthetic image whose colours are a lookup of its own mask (nothing maps to black), every
random geometric op with nearest sampling and black fill: after each pipeline, the mask equals the inverse
lookup of the image at every pixel, and is ignore_index exactly where the image is fill: image and mask
aligned, whatever was drawn (the segmentation references' preset among them); that preset, run as one
resample of the crop's window, byte-equal to the references' transforms at the draws fusedcheck reports.
The sizes random_resize and random_shortest_size draw cover their range and nothing else; padded batches
(batch.pad) pad masks with ignore_index. Also: a mask of another size than its image fails its sample,
saying so (so does a drawn resize past max_pixels, fused with its crop or not); a colour PNG as a mask fails
naming the field; VOC's folder layout (masks in a parallel folder under the same relative names, an image
without one not a sample). Prints one line per check and "N passed, M failed".
usage: check_masks.py PHOTO_DIR FUSEDCHECK"""
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile

import numpy as np
import torchvision.transforms.functional as F
from PIL import Image
from torchvision.transforms import InterpolationMode as IM

sys.path.insert(0, os.path.dirname(__file__))
import photos  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
os.environ.setdefault("SPILLWAY_LIB", os.path.join(ROOT, "build", "lib", "libspillway.so"))
from spillway import Loader  # noqa: E402

TMP = tempfile.mkdtemp(prefix="spw-masks-")
FUSED = sys.argv[2]
IGNORE = 255
passed = failed = 0


def result(name, ok, detail=""):
    global passed, failed
    print("%s %-66s %s" % ("ok  " if ok else "FAIL", name, detail))
    passed, failed = passed + ok, failed + (not ok)


def png(im):
    b = io.BytesIO()
    im.save(b, "PNG")
    return b.getvalue()


def write_shard(path, samples):
    """samples: [(key, image PIL, mask PIL)] as KEY.png + KEY.seg.png."""
    with tarfile.open(path, "w") as t:
        for key, im, mask in samples:
            for name, data in ((key + ".png", png(im)), (key + ".seg.png", png(mask))):
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))


def label_map(im, mode):
    """A label map of a photo: its grey level in 6 classes, as a palette ("P") or greyscale ("L") PNG."""
    lab = (np.asarray(im.convert("L"), dtype=np.uint16) * 6 // 256).astype(np.uint8)
    m = Image.fromarray(lab, "L")
    if mode == "P":
        m = m.convert("P")
        m.putpalette([c for i in range(256) for c in ((i * 40) % 256, (i * 90) % 256, (i * 160) % 256)])
    return m


def run(shard, ops, n, seed=0, max_pixels=None, **loader):
    spec = {"source": {"format": "tar_shards", "path": shard, "shuffle": False, "labels": False, "seed": seed,
                       "fields": {"mask": {"from": "seg.png", "as": "mask", "ignore_index": IGNORE}}},
            "ops": [{"op": "decode_image"}] + ops, "batch": {"size": 1}, "on_error": "skip"}
    if max_pixels:
        spec["max_pixels"] = max_pixels
    out = {}
    with Loader(spec, local_cores=1, **loader) as ld:
        for b in ld:
            out[b.keys[0].path.rsplit(":", 1)[1][:-4]] = (np.array(b.data[0]), np.array(b["mask"][0]))
    return out


def photo_samples(count):
    made = photos.make(os.path.join(ROOT, "build", "equiv", "photos"), count=24)
    samples = []
    for i, p in enumerate(made[:count]):
        im = Image.open(p).convert("RGB")
        samples.append(("p%02d" % i, im, label_map(im, "P" if i % 2 == 0 else "L")))
    return samples


def shortest_size(min_size, max_size):
    """The detection references' RandomShortestSize at one size (image bilinear, mask nearest)."""
    def ref(x, m):
        w, h = x.size
        r = min(min_size / min(h, w), max_size / max(h, w))
        return F.resize(x, [int(h * r), int(w * r)], IM.NEAREST if m else IM.BILINEAR, antialias=True)
    return ref


def pad_if_smaller(img, size, fill=0):
    """The segmentation references' pad_if_smaller, as written there."""
    min_size = min(img.size)
    if min_size < size:
        ow, oh = img.size
        padh = size - oh if oh < size else 0
        padw = size - ow if ow < size else 0
        img = F.pad(img, (0, 0, padw, padh), fill=fill)
    return img


def check_fixed():
    samples = photo_samples(6)
    shard = os.path.join(TMP, "fixed.tar")
    write_shard(shard, samples)
    cases = [
        ("resize [h, w]", [{"op": "resize", "size": [91, 67]}],
         lambda x, m: F.resize(x, [91, 67], IM.BILINEAR, antialias=True) if not m else F.resize(x, [91, 67], IM.NEAREST)),
        ("resize edge", [{"op": "resize", "size": 75}],
         lambda x, m: F.resize(x, 75, IM.BILINEAR, antialias=True) if not m else F.resize(x, 75, IM.NEAREST)),
        ("crop", [{"op": "crop", "top": 7, "left": 11, "height": 53, "width": 61}],
         lambda x, m: F.crop(x, 7, 11, 53, 61)),
        ("crop + resize (resized_crop)", [{"op": "crop", "top": 9, "left": 4, "height": 71, "width": 58},
                                          {"op": "resize", "size": [40, 31]}],
         lambda x, m: F.resized_crop(x, 9, 4, 71, 58, [40, 31], IM.NEAREST if m else IM.BILINEAR, antialias=True)),
        ("center_crop", [{"op": "center_crop", "size": [101, 77]}], lambda x, m: F.center_crop(x, [101, 77])),
        ("pad", [{"op": "pad", "padding": [3, 5, 7, 2], "fill": 9}],
         lambda x, m: F.pad(x, [3, 5, 7, 2], fill=IGNORE if m else 9)),
        ("rotate", [{"op": "rotate", "angle": 33.0, "fill": 9}],
         lambda x, m: F.rotate(x, 33.0, IM.NEAREST, fill=IGNORE if m else 9)),
        ("rotate bilinear", [{"op": "rotate", "angle": -21.5, "interpolation": "bilinear"}],
         lambda x, m: F.rotate(x, -21.5, IM.NEAREST if m else IM.BILINEAR, fill=IGNORE if m else 0)),
        ("affine", [{"op": "affine", "angle": 12.0, "translate": [5, -4], "scale": 0.9, "shear": [8.0, 3.0],
                     "fill": 9}],
         lambda x, m: F.affine(x, 12.0, [5, -4], 0.9, [8.0, 3.0], IM.NEAREST, fill=IGNORE if m else 9)),
        ("random_resize at one size", [{"op": "random_resize", "min_size": 83, "max_size": 83}],
         lambda x, m: F.resize(x, 83, IM.NEAREST if m else IM.BILINEAR, antialias=True)),
        ("random_shortest_size at one size", [{"op": "random_shortest_size", "min_size": 150, "max_size": 200}],
         shortest_size(150, 200)),
        ("pad_if_smaller", [{"op": "pad_if_smaller", "size": 400, "fill": 9}],
         lambda x, m: pad_if_smaller(x, 400, IGNORE if m else 9)),
        ("random_shortest_size + horizontal_flip (one resample)",
         [{"op": "random_shortest_size", "min_size": 150, "max_size": 200}, {"op": "horizontal_flip"}],
         lambda x, m: F.hflip(shortest_size(150, 200)(x, m))),
        ("random_shortest_size + horizontal_flip + to_tensor (one pass)",
         [{"op": "random_shortest_size", "min_size": 150, "max_size": 200}, {"op": "horizontal_flip"},
          {"op": "to_tensor"}],
         lambda x, m: F.hflip(shortest_size(150, 200)(x, m)) if m else
         F.to_tensor(F.hflip(shortest_size(150, 200)(x, m)))),
        ("random_resize, vertical_flip, pad_if_smaller (one resample)",
         [{"op": "random_resize", "min_size": 290, "max_size": 290}, {"op": "vertical_flip"},
          {"op": "pad_if_smaller", "size": 400, "fill": 9}],
         lambda x, m: pad_if_smaller(F.vflip(F.resize(x, 290, IM.NEAREST if m else IM.BILINEAR, antialias=True)),
                                     400, IGNORE if m else 9)),
        ("horizontal_flip", [{"op": "horizontal_flip"}], lambda x, m: F.hflip(x)),
        ("vertical_flip", [{"op": "vertical_flip"}], lambda x, m: F.vflip(x)),
    ]
    for name, ops, ref in cases:
        got = run(shard, ops, len(samples))
        bad = []
        for key, im, mask in samples:
            gi, gm = got.get(key, (None, None))
            wi = np.asarray(ref(im, False))
            wm = np.asarray(ref(mask, True).convert("L") if mask.mode != "P" else ref(mask, True))
            if gi is None or gi.shape != wi.shape or not np.array_equal(gi, wi):
                bad.append(key + " image")
            if gm is None or gm.shape != wm.shape or not np.array_equal(gm, wm):
                bad.append(key + " mask")
        result("%s: image and mask byte-equal to torchvision (P and L masks)" % name, not bad,
               ", ".join(bad[:4]) or "%d samples" % len(samples))


LUT = np.array([[200, 40, 40], [40, 200, 40], [40, 40, 200], [200, 200, 40], [40, 200, 200], [120, 60, 160]],
               dtype=np.uint8)


def synthetic(i, w, h):
    """A label map of blobs and stripes, and the image that is its lookup (no class maps to black)."""
    yy, xx = np.mgrid[0:h, 0:w]
    lab = ((xx // (7 + i) + yy // (5 + 2 * i) + (xx * yy) // (97 + 13 * i)) % 6).astype(np.uint8)
    return Image.fromarray(LUT[lab], "RGB"), Image.fromarray(lab, "L")


def check_aligned():
    samples = []
    for i in range(8):
        im, mask = synthetic(i, 83 + 14 * i, 61 + 9 * i)
        samples.append(("s%02d" % i, im, mask))
    shard = os.path.join(TMP, "aligned.tar")
    write_shard(shard, samples)
    nearest = {"interpolation": "nearest"}
    pipelines = [
        ("random_resized_crop + flips", [dict({"op": "random_resized_crop", "size": [48, 40]}, **nearest),
                                          {"op": "random_horizontal_flip"}, {"op": "random_vertical_flip"}]),
        ("random_crop padded", [{"op": "random_crop", "size": [90, 120], "padding": [4, 9], "pad_if_needed": True}]),
        ("random_perspective", [dict({"op": "random_perspective", "p": 1.0, "distortion_scale": 0.6}, **nearest)]),
        ("resize, rotate, pad, crop", [dict({"op": "resize", "size": 57}, **nearest),
                                       {"op": "rotate", "angle": 17.0},
                                       {"op": "pad", "padding": [2, 3]}, {"op": "center_crop", "size": 50}]),
        ("segmentation preset (random_resize, flip, pad_if_smaller, random_crop)",
         [dict({"op": "random_resize", "min_size": 40, "max_size": 160}, **nearest),
          {"op": "random_horizontal_flip"}, {"op": "pad_if_smaller", "size": 96},
          {"op": "random_crop", "size": 96}]),
        ("random_shortest_size", [dict({"op": "random_shortest_size", "min_size": [50, 70, 90], "max_size": 110},
                                       **nearest)]),
        ("affine then random_resized_crop", [{"op": "affine", "angle": -9.0, "translate": [3, 2], "scale": 1.1,
                                              "shear": [5.0, 0.0]},
                                             dict({"op": "random_resized_crop", "size": 37}, **nearest)]),
    ]
    inverse = {tuple(c): k for k, c in enumerate(LUT)}
    for name, ops in pipelines:
        bad, pixels = [], 0
        for seed in range(3):
            got = run(shard, ops, len(samples), seed=seed)
            for key, (img, mask) in got.items():
                flat = img.reshape(-1, 3)
                lab = np.array([inverse.get(tuple(p), IGNORE if not p.any() else 254) for p in flat], np.uint8)
                want = lab.reshape(mask.shape)
                pixels += want.size
                if img.shape[:2] != mask.shape or not np.array_equal(want, mask):
                    bad.append(key)
        result("%s: mask = the image's classes, ignore where filled" % name, not bad,
               ", ".join(bad[:4]) or "%d pixels" % pixels)


def check_preset():
    """The segmentation references' training preset (RandomResize, RandomHorizontalFlip, RandomCrop with its
    pad_if_smaller), which Spillway runs as one resample of the crop's window: image and mask byte-equal to
    the references' transforms at the draws fusedcheck reports (the edge, the flip, the crop), on real photos
    at crop sizes that pad some of them; with normalize after it (written by the same pass where nothing is
    padded) equal to ToTensor + Normalize of that."""
    samples = photo_samples(6)
    shard = os.path.join(TMP, "preset.tar")
    write_shard(shard, samples)
    ops = [{"op": "random_resize", "min_size": 150, "max_size": 600}, {"op": "random_horizontal_flip"},
           {"op": "pad_if_smaller", "size": 320, "fill": 9}, {"op": "random_crop", "size": 320}]
    norm = {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}
    bad, flips, pads = [], 0, 0
    for seed in range(3):
        got = run(shard, ops, len(samples), seed=seed)
        normed = run(shard, ops + [norm], len(samples), seed=seed)     # the tensor written by the resample
        spec = {"source": {"format": "tar_shards", "path": shard, "shuffle": False, "labels": False, "seed": seed},
                "ops": [{"op": "decode_image"}] + ops, "batch": {"size": 1}}
        sp = os.path.join(TMP, "preset.json")
        with open(sp, "w") as f:
            json.dump(spec, f)
        for i, (key, im, mask) in enumerate(samples):
            png_path = os.path.join(TMP, "preset.png")
            im.save(png_path)
            r = subprocess.run([FUSED, "run", sp, png_path, os.path.join(TMP, "preset.npy"), str(i)],
                               capture_output=True, text=True, check=True)
            d = json.loads(r.stdout)
            x, y, cw, ch = d["crop"]
            want = []
            for t, m in ((im, False), (mask, True)):
                t = F.resize(t, d["edge"], IM.NEAREST if m else IM.BILINEAR, antialias=True)
                t = F.hflip(t) if d["hflip"] else t
                pads += not m and min(t.size) < 320
                t = pad_if_smaller(t, 320, IGNORE if m else 9)
                t = F.crop(t, y, x, ch, cw)
                want.append(np.asarray(t.convert("L") if m and t.mode != "P" else t))
            flips += d["hflip"]
            gi, gm = got.get(key, (None, None))
            if gi is None or not np.array_equal(gi, want[0]) or not np.array_equal(gm, want[1]):
                bad.append("%s seed %d" % (key, seed))
            wt = F.normalize(F.to_tensor(want[0]), norm["mean"], norm["std"]).numpy()
            nt, nm = normed.get(key, (None, None))
            if nt is None or not np.array_equal(nt, wt) or not np.array_equal(nm, want[1]):
                bad.append("%s seed %d normalized" % (key, seed))
    result("segmentation preset: image, mask, normalized tensor equal to the references' at the same draws", not bad,
           ", ".join(bad[:4]) or "18 samples, %d flipped, %d padded" % (flips, pads))


def check_draws():
    """The sizes random_resize and random_shortest_size draw, over 8 samples x 12 epochs: every allowed smaller
    edge comes up, no other (the chance that one of 5 is missed in 96 draws is below 1e-8). random_shortest_size's
    edge is int() of a scaled side, as the references compute it: 29 where 61 * (30 / 61) falls below 30."""
    sizes = [(83 + 14 * i, 61 + 9 * i) for i in range(8)]
    samples = [("s%02d" % i,) + synthetic(i, w, h) for i, (w, h) in enumerate(sizes)]
    shard = os.path.join(TMP, "draws.tar")
    write_shard(shard, samples)

    def shortest(s, w, h):
        r = min(s / min(h, w), 1000 / max(h, w))
        return min(int(h * r), int(w * r))
    for op, allowed in (({"op": "random_resize", "min_size": 20, "max_size": 24},
                         lambda i: {(s, s) for s in range(20, 25)}),
                        ({"op": "random_shortest_size", "min_size": [30, 45, 60], "max_size": 1000},
                         lambda i: {(s, shortest(s, *sizes[i])) for s in (30, 45, 60)})):
        spec = {"source": {"format": "tar_shards", "path": shard, "labels": False, "seed": 4, "epochs": 12,
                           "fields": {"mask": {"from": "seg.png", "as": "mask"}}},
                "ops": [{"op": "decode_image"}, op], "batch": {"size": 1}}
        seen, bad = set(), []
        with Loader(spec, local_cores=1) as ld:
            for _ in range(12):
                for b in ld:
                    i = int(b.keys[0].path.rsplit(":s", 1)[1][:2])
                    img, mask = np.array(b.data[0]), np.array(b["mask"][0])
                    drawn = [s for s, edge in allowed(i) if edge == min(img.shape[:2])]
                    seen.update(drawn)
                    if not drawn or img.shape[:2] != mask.shape:
                        bad.append("s%02d: %s, mask %s" % (i, img.shape, mask.shape))
        want = {s for s, _ in allowed(0)}
        result("%s draws: smaller edges %s" % (op["op"], sorted(want)), seen == want and not bad,
               "seen %s %s" % (sorted(seen), ", ".join(bad[:2])))


def check_padded():
    """batch.pad: images of different sizes (random_resize, no crop) in batches of 3: each image and mask as a
    batch of one gives them, the image zero-padded and the mask padded with ignore_index to the largest."""
    samples = [("s%02d" % i,) + synthetic(i, 83 + 14 * i, 61 + 9 * i) for i in range(8)]
    shard = os.path.join(TMP, "padded.tar")
    write_shard(shard, samples)
    ops = [{"op": "random_resize", "min_size": 30, "max_size": 70, "interpolation": "nearest"}]
    one = run(shard, ops, len(samples))
    spec = {"source": {"format": "tar_shards", "path": shard, "shuffle": False, "labels": False,
                       "fields": {"mask": {"from": "seg.png", "as": "mask", "ignore_index": IGNORE}}},
            "ops": [{"op": "decode_image"}] + ops, "batch": {"size": 3, "pad": True}}
    bad, n = [], 0
    with Loader(spec, local_cores=1) as ld:
        for b in ld:
            data, masks = np.asarray(b.data), np.asarray(b["mask"])
            for i, key in enumerate(b.keys):
                img, mask = one[key.path.rsplit(":", 1)[1][:-4]]
                h, w = img.shape[:2]
                n += 1
                if (list(b["shapes"][i]) != list(img.shape) or not np.array_equal(data[i, :h, :w], img)
                        or data[i, h:].any() or data[i, :, w:].any() or not np.array_equal(masks[i, :h, :w], mask)
                        or (masks[i, h:] != IGNORE).any() or (masks[i, :, w:] != IGNORE).any()):
                    bad.append(key.path)
    result("batch.pad: images zero-padded, masks padded with ignore_index", not bad and n == len(samples),
           ", ".join(bad[:3]) or "%d elements" % n)


def check_refused():
    im, mask = synthetic(1, 40, 30)
    shard = os.path.join(TMP, "bad.tar")
    write_shard(shard, [("a", im, mask.resize((41, 30))), ("b", im, Image.new("RGB", (40, 30))), ("c", im, mask)])
    log = os.path.join(TMP, "stderr")
    saved = os.dup(2)
    with open(log, "w") as f:
        os.dup2(f.fileno(), 2)
        try:
            got = run(shard, [{"op": "center_crop", "size": 20}], 3)
        finally:
            os.dup2(saved, 2)
    text = open(log).read()
    result("a mask of another size fails its sample, saying so",
           "a.png" in text and "field mask: a 41x30 mask for a 40x30 image" in text and "a" not in got, "")
    result("a colour PNG as a mask fails, naming the field",
           "field mask: a label map is a palette or 8-bit greyscale PNG" in text and "b" not in got, "")
    result("... the good sample is delivered", "c" in got, "")
    # A drawn resize past max_pixels: refused as the resize alone refuses it, also where it runs as one
    # resample with the crop after it (which never makes the large image).
    shard = os.path.join(TMP, "big.tar")
    write_shard(shard, [("c", im, mask)])
    texts = []
    for ops in ([{"op": "random_resize", "min_size": 200}],
                [{"op": "random_resize", "min_size": 200}, {"op": "random_crop", "size": 32}]):
        with open(log, "w") as f:
            os.dup2(f.fileno(), 2)
            try:
                got = run(shard, ops, 1, max_pixels=20000)
            finally:
                os.dup2(saved, 2)
        texts.append(("c" not in got, "a 266x200 output exceeds max_pixels 20000" in open(log).read()))
    result("a drawn resize past max_pixels fails its sample, alone and as one resample with its crop",
           texts == [(True, True), (True, True)], str(texts))


def check_folders():
    """VOC's layout: JPEGImages/*.png beside SegmentationClass/*.png (one image without a mask), at any depth."""
    root = os.path.join(TMP, "voc")
    samples = photo_samples(4)
    for i, (key, im, mask) in enumerate(samples):
        sub = "" if i % 2 else "nested"
        os.makedirs(os.path.join(root, "JPEGImages", sub), exist_ok=True)
        os.makedirs(os.path.join(root, "SegmentationClass", sub), exist_ok=True)
        im.save(os.path.join(root, "JPEGImages", sub, key + ".png"))
        if i != 3:
            mask.save(os.path.join(root, "SegmentationClass", sub, key + ".png"))
    spec = {"source": {"format": "image_folder", "path": os.path.join(root, "JPEGImages"), "shuffle": False,
                       "labels": False,
                       "fields": {"mask": {"path": os.path.join(root, "SegmentationClass"), "from": "png",
                                           "as": "mask"}}},
            "ops": [{"op": "decode_image"}, {"op": "rotate", "angle": 8.0}, {"op": "center_crop", "size": 61}],
            "batch": {"size": 1}}
    got = {}
    with Loader(spec, local_cores=1) as ld:
        for b in ld:
            got[os.path.basename(b.keys[0].path)[:-4]] = np.array(b["mask"][0])
    bad = []
    for key, im, mask in samples[:3]:
        want = np.asarray(F.center_crop(F.rotate(mask, 8.0, IM.NEAREST, fill=IGNORE), 61))
        if key not in got or not np.array_equal(got[key], want):
            bad.append(key)
    result("folder layout (VOC): each image's mask from the parallel folder", not bad and len(got) == 3,
           ", ".join(bad) or "%d of 4 images have masks" % len(got))


check_fixed()
check_aligned()
check_preset()
check_draws()
check_padded()
check_refused()
check_folders()
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
