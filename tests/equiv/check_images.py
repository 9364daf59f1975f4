"""tests/equiv/check_images.py - decode_image (PNG, WebP, JPEG by content) and exif_transpose against Pillow
9.4 on real files, through the real element runner (fusedcheck). Real PNGs: the plasma wallpapers' PNGs up
to 2000 pixels a side, libpng's own pngtest.png (Adam7, RGBA) and up to 3 PNGs of every other (bit depth,
colour type, interlace) class found under /usr/share. The equivalence test's photos re-encoded by Pillow as
PNG (RGB, RGBA, L, LA, palette with tRNS, 16-bit grey) and WebP (lossless and lossy, with and without alpha),
and as JPEGs carrying EXIF orientations 1..8. Proves: PNG decode equals convert("RGB") exactly; WebP lossless
and lossy exactly (same libwebp 1.2.4, same fancy upsampling: tolerance 0); exif_transpose equals
ImageOps.exif_transpose exactly; decode_image on a JPEG gives decode_jpeg's bytes on the fused ROI path;
random_resized_crop after a PNG/WebP decode is within 1 level of torchvision (mean absolute difference).
usage: check_images.py FUSEDCHECK PHOTO_DIR"""
import collections
import glob
import io
import os
import shutil
import struct
import sys
import tempfile
import zlib

import numpy as np
import torchvision.transforms.functional as F
from PIL import Image, ImageOps

sys.path.insert(0, os.path.dirname(__file__))
import photos  # noqa: E402
from fused_run import fused_run  # noqa: E402

FUSED, TMP = sys.argv[1], tempfile.mkdtemp(prefix="spw-images-")
passed = failed = 0


def run(ops, img, sample=0):
    return fused_run(FUSED, TMP, ops, img, sample)


def check(name, ours, ref, mad_max=0.0):
    global passed, failed
    ours, ref = np.asarray(ours, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if ours.shape != ref.shape:
        print("FAIL %-60s shape %s vs %s" % (name, ours.shape, ref.shape))
        failed += 1
        return
    d = np.abs(ours - ref)
    mad, mx = d.mean(), d.max()
    ok = mx == 0 if mad_max == 0 else mad <= mad_max
    print("%s %-60s mad=%.4f max=%.0f" % ("ok  " if ok else "FAIL", name, mad, mx))
    if ok:
        passed += 1
    else:
        failed += 1


def decode_exact(path, label, transpose=False):
    op = {"op": "decode_image"}
    if transpose:
        op["exif_transpose"] = True
    try:
        ours, _ = run([op], path)
    except RuntimeError as e:
        global failed
        print("FAIL %-60s %s" % (label, e))
        failed += 1
        return
    im = Image.open(path)
    if transpose:
        im = ImageOps.exif_transpose(im)
    check(label, ours, np.asarray(im.convert("RGB")))


def png_class(path):
    with open(path, "rb") as f:
        d = f.read(29)
    if len(d) < 29 or d[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return d[24], d[25], d[28]          # bit depth, colour type, interlace


def real_pngs():
    """(path, class) of the real PNGs; the wallpapers and pngtest.png must be there."""
    walls = [p for p in sorted(glob.glob("/usr/share/wallpapers/*/contents/images*/*.png"))
             if max(int(v) for v in os.path.basename(p)[:-4].split("x")) <= 2000]
    pngtest = "/usr/share/doc/libpng-dev/examples/pngtest.png"
    if not walls or not os.path.exists(pngtest):
        sys.exit("check_images.py: plasma-workspace-wallpapers or libpng-dev missing; run scripts/install-deps.sh")
    per_class = collections.defaultdict(list)
    for p in sorted(glob.glob("/usr/share/**/*.png", recursive=True)):
        c = png_class(p)
        if c and len(per_class[c]) < 3:
            per_class[c].append(p)
    picked = walls + [pngtest] + [p for c in sorted(per_class) for p in per_class[c]]
    return [(p, png_class(p)) for p in dict.fromkeys(picked)]


def raw_png16_grey(a):
    """A 16-bit greyscale PNG of uint16 array a (Pillow writes I;16 as 16-bit grey too; this keeps the bytes
    explicit)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    h, w = a.shape
    raw = b"".join(b"\0" + a[y].astype(">u2").tobytes() for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def variants(src, i):
    """Pillow-written PNG and WebP files of one photo: (name, bytes, lossy)."""
    im = Image.open(src).convert("RGB")
    a = np.asarray(im)
    h, w = a.shape[:2]
    alpha = (np.add.outer(np.arange(h), np.arange(w)) * 7 % 256).astype(np.uint8)
    alpha[: h // 5] = 0                                  # fully transparent band: stored colour kept
    rgba = Image.fromarray(np.dstack([a, alpha]), "RGBA")
    grey = im.convert("L")
    out = []

    def save(name, img, fmt, **kw):
        b = io.BytesIO()
        img.save(b, fmt, **kw)
        out.append(("%02d_%s" % (i, name), b.getvalue()))

    save("rgb.png", im, "PNG")
    save("rgba.png", rgba, "PNG")
    save("grey.png", grey, "PNG")
    save("la.png", Image.fromarray(np.dstack([np.asarray(grey), alpha]), "LA"), "PNG")
    pal = im.quantize(colors=200)
    save("palette_trns.png", pal, "PNG", transparency=bytes(range(0, 200)))
    out.append(("%02d_grey16.png" % i, raw_png16_grey(np.asarray(grey).astype(np.uint16) * 3)))
    save("lossless.webp", im, "WEBP", lossless=True)
    save("lossless_alpha.webp", rgba, "WEBP", lossless=True, exact=True)
    save("lossy.webp", im, "WEBP", quality=75)
    save("lossy_alpha.webp", rgba, "WEBP", quality=90)
    return out


def main():
    imgs = photos.make(sys.argv[2])

    # 1. real PNGs: exact
    classes = collections.Counter()
    for path, c in real_pngs():
        classes[c] += 1
        decode_exact(path, "%s %s" % (path.replace("/usr/share/", ""), "%d-bit type %d interlace %d" % c))
    print("real PNG classes (depth, colour type, interlace): %s" % dict(classes))

    # 2. the photos as PNG and WebP: exact; 3. a random_resized_crop after them: within 1 level of torchvision
    for i, src in enumerate(imgs[:8]):
        for name, data in variants(src, i):
            path = os.path.join(TMP, name)
            with open(path, "wb") as f:
                f.write(data)
            decode_exact(path, name)
            if name.endswith(("rgba.png", "lossy.webp")):
                ops = [{"op": "decode_image"}, {"op": "random_resized_crop", "size": [96, 96]},
                       {"op": "random_horizontal_flip"}]
                ours, info = run(ops, path, sample=i)
                left, top, w, h = info["rect"]
                ref = F.resized_crop(Image.open(path).convert("RGB"), top, left, h, w, [96, 96])
                if info["hflip"]:
                    ref = F.hflip(ref)
                check(name + " rrc96+flip", ours, np.asarray(ref), mad_max=1.0)

    # 4. EXIF orientations: exact with exif_transpose, for decode_image and decode_jpeg
    for k in range(1, 9):
        src = imgs[k]
        exif = Image.Exif()
        exif[0x0112] = k
        path = os.path.join(TMP, "exif%d.jpg" % k)
        Image.open(src).save(path, quality=92, exif=exif.tobytes())
        decode_exact(path, "exif%d.jpg exif_transpose" % k, transpose=True)
        ours, _ = run([{"op": "decode_jpeg", "exif_transpose": True}], path)
        check("exif%d.jpg decode_jpeg exif_transpose" % k, ours,
              np.asarray(ImageOps.exif_transpose(Image.open(path)).convert("RGB")))
        ours, _ = run([{"op": "decode_image"}], path)
        check("exif%d.jpg exif_transpose off: stored pixels" % k, ours, np.asarray(Image.open(path).convert("RGB")))

    # 5. decode_image on JPEGs: decode_jpeg's bytes, fused ROI and DCT-scaled paths included
    for i, src in enumerate(imgs[:8]):
        for tail in ([{"op": "random_resized_crop", "size": [224, 224]}, {"op": "random_horizontal_flip"}],
                     [{"op": "resize", "size": 64}, {"op": "center_crop", "size": 56}]):
            a, _ = run([{"op": "decode_jpeg"}] + tail, src, sample=i)
            b, _ = run([{"op": "decode_image"}] + tail, src, sample=i)
            check("%s decode_image = decode_jpeg, %s" % (os.path.basename(src), tail[0]["op"]), b, a)

    shutil.rmtree(TMP, ignore_errors=True)
    print("check_images: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
