"""tests/data/make_fixtures.py - regenerates the small committed JPEG fixtures the C unit tests read
(no Python is needed to run those tests). Crops of a Debian wallpaper photo, in the encodings datasets hold.
usage: /usr/bin/python3 tests/data/make_fixtures.py tests/data/fixtures"""
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


if __name__ == "__main__":
    main(sys.argv[1])
