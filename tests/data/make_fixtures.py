"""tests/data/make_fixtures.py - regenerates the small committed JPEG fixtures the C unit tests read
(no Python is needed to run those tests). Crops of a Debian wallpaper photo, in the encodings datasets hold.
usage: /usr/bin/python3 tests/data/make_fixtures.py tests/data/fixtures"""
import io
import os
import sys

from PIL import Image

SRC = "/usr/share/wallpapers/Kite/contents/images/2560x1600.jpg"


def main(out):
    os.makedirs(out, exist_ok=True)
    im = Image.open(SRC).convert("RGB")
    a = im.crop((900, 500, 1800, 1100)).resize((97, 61), Image.BILINEAR)
    a.save(os.path.join(out, "rgb420.jpg"), quality=90)
    b = im.crop((100, 200, 1500, 1300)).resize((203, 150), Image.BILINEAR)
    b.save(os.path.join(out, "rgb444.jpg"), quality=92, subsampling=0)
    b.convert("L").save(os.path.join(out, "gray.jpg"), quality=90)
    b.save(os.path.join(out, "progressive.jpg"), quality=90, progressive=True)
    b.convert("CMYK").save(os.path.join(out, "cmyk.jpg"), quality=90)
    # the same pixels as rgb444.jpg, decoded by PIL, for an exactness check in C
    with open(os.path.join(out, "rgb444.rgb"), "wb") as f:
        f.write(Image.open(os.path.join(out, "rgb444.jpg")).convert("RGB").tobytes())
    with open(os.path.join(out, "cmyk.rgb"), "wb") as f:
        f.write(Image.open(os.path.join(out, "cmyk.jpg")).convert("RGB").tobytes())
    with open(os.path.join(out, "no_eoi_pillow_ok.jpg"), "wb") as f:
        f.write(no_eoi_pillow_accepts(im))


def no_eoi_pillow_accepts(im):
    """A baseline JPEG without its final EOI marker that Pillow still decodes: libjpeg never asks for bytes
    after the last MCU (its bit buffer already holds them), so Pillow's suspension comes only in
    jpeg_finish_decompress, which it accepts. About 1 file in 20 (1 in 70 at this size) is like that; the
    first of a fixed sequence of crops is kept."""
    for k in range(1000):
        x, y = 300 + 37 * k, 400 + 11 * k
        buf = io.BytesIO()
        im.crop((x, y, x + 640, y + 480)).resize((160, 120), Image.BILINEAR).save(buf, "JPEG", quality=90)
        b = buf.getvalue()[:-2]
        assert b[-2:] != b"\xff\xd9"
        try:
            Image.open(io.BytesIO(b)).convert("RGB")
        except OSError:
            continue
        return b
    raise SystemExit("make_fixtures: no crop without EOI that Pillow accepts")


if __name__ == "__main__":
    main(sys.argv[1])
