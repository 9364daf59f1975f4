# tests/data/make_broken_jpegs.py - the broken inputs the corrupt-input tests share, made from one good JPEG:
# truncated.jpg (its first 3000 bytes), empty.jpg (0 bytes), text.jpg (not a JPEG) and huge.jpg (its frame
# header claims 60000 x 60000 pixels, over max_pixels).
#   python3 make_broken_jpegs.py GOOD.jpg OUT_DIR
import os
import sys

good, out = sys.argv[1], sys.argv[2]
b = bytearray(open(good, "rb").read())
open(os.path.join(out, "truncated.jpg"), "wb").write(b[:3000])
open(os.path.join(out, "empty.jpg"), "wb").close()
open(os.path.join(out, "text.jpg"), "w").write("this is not a jpeg\n")
i = 2
while i < len(b):                       # find SOF0/SOF1/SOF2 and claim 60000 x 60000 pixels
    m, n = b[i + 1], (b[i + 2] << 8) | b[i + 3]
    if m in (0xC0, 0xC1, 0xC2):
        b[i + 5:i + 9] = bytes([0xEA, 0x60, 0xEA, 0x60])
        break
    i += 2 + n
open(os.path.join(out, "huge.jpg"), "wb").write(b)
