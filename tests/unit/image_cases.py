#!/usr/bin/python3
"""tests/unit/image_cases.py OUTDIR - the PNG, WebP and EXIF files tests/unit/check_image_decode.c reads, each
NAME.EXT with NAME.EXT.ref: "W H\\n" then Pillow 9.4's convert("RGB") bytes (after ImageOps.exif_transpose for
the exif_* files). PNGs Pillow cannot write (2/4/16-bit grey, 16-bit colour, Adam7 interlaced) are written
chunk by chunk here and read back by Pillow for the reference. NAME.EXT.pillow_ok lists the prefix lengths of
the file Pillow decodes (the prefix test's verdicts)."""
import io
import os
import struct
import sys
import warnings
import zlib

import numpy as np
from PIL import Image, ImageOps

out = sys.argv[1]
warnings.simplefilter("ignore")               # Pillow warns on palette transparency given as bytes
rng = np.random.default_rng(22)
W, H = 37, 23
rgb = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
alpha = rng.integers(0, 256, (H, W), dtype=np.uint8)
alpha[:4] = 0                                   # fully transparent rows: their stored colour must survive
rgba = np.dstack([rgb, alpha])


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def raw_png(w, h, depth, ctype, rows, interlace=False, extra=b""):
    """rows: h byte strings of packed samples. Adam7 when interlace (filter 0 on every row)."""
    bpp_bits = depth * {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[ctype]
    if not interlace:
        data = b"".join(b"\0" + r for r in rows)
    else:
        assert bpp_bits % 8 == 0
        bpp = bpp_bits // 8
        data = b""
        for x0, y0, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4),
                               (1, 0, 2, 2), (0, 1, 1, 2)):
            if x0 >= w or y0 >= h:
                continue
            for y in range(y0, h, dy):
                data += b"\0" + b"".join(rows[y][x * bpp:(x + 1) * bpp] for x in range(x0, w, dx))
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 1 if interlace else 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra + chunk(b"IDAT", zlib.compress(data)) +
            chunk(b"IEND", b""))


def ref(name, data, transpose=False):
    im = Image.open(io.BytesIO(data))
    if transpose:
        im = ImageOps.exif_transpose(im)
    im = im.convert("RGB")
    with open(os.path.join(out, name + ".ref"), "wb") as f:
        f.write(b"%d %d\n" % im.size + im.tobytes())


def save(name, data, transpose=False):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
    ref(name, data, transpose)


def pil(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def pillow_ok(name, data):
    ok = []
    for n in range(len(data) + 1):
        try:
            Image.open(io.BytesIO(data[:n])).convert("RGB")
            ok.append(n)
        except Exception:                       # noqa: BLE001 - any refusal counts
            pass
    with open(os.path.join(out, name + ".pillow_ok"), "w") as f:
        f.write("".join("%d\n" % n for n in ok))


# ---- PNG: every colour type and depth ------------------------------------------------------------------
grey = rgb[:, :, 0]
save("rgb8.png", pil(Image.fromarray(rgb), "PNG"))
save("rgba8.png", pil(Image.fromarray(rgba, "RGBA"), "PNG"))
save("grey8.png", pil(Image.fromarray(grey, "L"), "PNG"))
save("la8.png", pil(Image.fromarray(np.dstack([grey, alpha]), "LA"), "PNG"))
save("grey_trns.png", pil(Image.fromarray(grey, "L"), "PNG", transparency=int(grey[0, 0])))
save("rgb_trns.png", pil(Image.fromarray(rgb), "PNG", transparency=tuple(int(v) for v in rgb[0, 0])))
pal = Image.fromarray(rgb).quantize(colors=50)
save("palette.png", pil(pal, "PNG"))
save("palette_trns.png", pil(pal, "PNG", transparency=bytes(range(0, 250, 5))))
save("palette4.png", pil(Image.fromarray(rgb).quantize(colors=16), "PNG", bits=4))
save("grey1.png", pil(Image.fromarray(grey > 127), "PNG"))
for depth in (2, 4):
    vals = (grey >> (8 - depth)).astype(np.uint8)
    rows = []
    for y in range(H):
        bits = "".join(format(int(v), "0%db" % depth) for v in vals[y])
        bits += "0" * (-len(bits) % 8)
        rows.append(int(bits, 2).to_bytes(len(bits) // 8, "big"))
    save("grey%d.png" % depth, raw_png(W, H, depth, 0, rows))
g16 = rng.integers(0, 65536, (H, W), dtype=np.uint16)
g16[0, :8] = [0, 1, 100, 255, 256, 1000, 65535, 300]     # Pillow clips 16-bit grey at 255
save("grey16.png", raw_png(W, H, 16, 0, [g16[y].astype(">u2").tobytes() for y in range(H)]))
c16 = rng.integers(0, 65536, (H, W, 4), dtype=np.uint16)
save("rgb16.png", raw_png(W, H, 16, 2, [c16[y, :, :3].astype(">u2").tobytes() for y in range(H)]))
save("rgba16.png", raw_png(W, H, 16, 6, [c16[y].astype(">u2").tobytes() for y in range(H)]))
save("la16.png", raw_png(W, H, 16, 4, [c16[y, :, :2].astype(">u2").tobytes() for y in range(H)]))
save("rgb8_adam7.png", raw_png(W, H, 8, 2, [rgb[y].tobytes() for y in range(H)], interlace=True))
save("rgba16_adam7.png", raw_png(W, H, 16, 6, [c16[y].astype(">u2").tobytes() for y in range(H)],
                                 interlace=True))
save("grey16_adam7.png", raw_png(W, H, 16, 0, [g16[y].astype(">u2").tobytes() for y in range(H)],
                                 interlace=True))

# ---- WebP: lossless and lossy, with and without alpha ---------------------------------------------------
save("lossless.webp", pil(Image.fromarray(rgb), "WEBP", lossless=True))
save("lossless_alpha.webp", pil(Image.fromarray(rgba, "RGBA"), "WEBP", lossless=True, exact=True))
save("lossless_alpha_inexact.webp", pil(Image.fromarray(rgba, "RGBA"), "WEBP", lossless=True))
save("lossy.webp", pil(Image.fromarray(rgb), "WEBP", quality=80))
save("lossy_alpha.webp", pil(Image.fromarray(rgba, "RGBA"), "WEBP", quality=80, exact=True))

# ---- EXIF orientation 1..8 in JPEG, PNG and WebP ---------------------------------------------------------
for k in range(1, 9):
    exif = Image.Exif()
    exif[0x0112] = k
    e = exif.tobytes()
    save("exif%d.jpg" % k, pil(Image.fromarray(rgb), "JPEG", quality=90, exif=e), transpose=True)
    save("exif%d.png" % k, pil(Image.fromarray(rgb), "PNG", exif=e), transpose=True)
    save("exif%d.webp" % k, pil(Image.fromarray(rgb), "WEBP", lossless=True, exif=e), transpose=True)

# ---- prefix verdicts -------------------------------------------------------------------------------------
for name in ("rgb8.png", "rgb8_adam7.png", "lossless_alpha.webp", "lossy.webp"):
    with open(os.path.join(out, name), "rb") as f:
        pillow_ok(name, f.read())
