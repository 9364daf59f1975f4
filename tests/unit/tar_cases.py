#!/usr/bin/env python3
"""tests/unit/tar_cases.py OUTDIR - the tar shards tests/unit/check_tar.c reads, written with Python's
tarfile (the writer WebDataset users have): the same three samples as ustar with short names, and with
150-character names as pax, GNU long-name and ustar prefix/name headers; a WebDataset jpg+json shard;
.cls/.txt labels; a gzip shard; and shards that must be refused."""
import gzip
import io
import json
import os
import sys
import tarfile

FIX = "tests/data/fixtures/"
out = sys.argv[1]
jpgs = [open(FIX + n, "rb").read() for n in ("rgb420.jpg", "gray.jpg", "rgb444.jpg")]
labels = [3, 7, 1]


def write(name, members, fmt=tarfile.PAX_FORMAT):
    with tarfile.open(os.path.join(out, name), "w", format=fmt) as t:
        for path, data in members:
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mtime = 1700000000
            t.addfile(info, io.BytesIO(data))


def samples(prefix):
    m = []
    for i, (jpg, label) in enumerate(zip(jpgs, labels)):
        m.append((f"{prefix}k{i:03d}.jpg", jpg))
        m.append((f"{prefix}k{i:03d}.cls", f"{label}\n".encode()))
    return m


# A directory path that brings every member name to 150 characters ("k000.jpg" is 8).
long_dir = ("d" * 70 + "/") + ("e" * (150 - 8 - 71 - 1)) + "/"
assert len(long_dir + "k000.jpg") == 150
write("short.tar", samples(""), tarfile.USTAR_FORMAT)
write("pax.tar", samples(long_dir), tarfile.PAX_FORMAT)
write("gnu.tar", samples(long_dir), tarfile.GNU_FORMAT)
write("ustar.tar", samples(long_dir), tarfile.USTAR_FORMAT)   # the prefix/name split
with open(os.path.join(out, "short.tar"), "rb") as f:
    raw = f.read()
with open(os.path.join(out, "short.tar.gz"), "wb") as f:
    f.write(gzip.compress(raw, mtime=0))

# WebDataset: KEY is the path up to the basename's first dot; the image is the member whose last
# extension is jpg; labels from KEY.json's "label".
write("wds.tar", [
    ("a/b/x.y.jpg", jpgs[0]), ("a/b/x.json", json.dumps({"label": 5, "caption": "a cat"}).encode()),
    ("a/b/x.txt", b"a caption, not a label"),
    ("s1.seg.jpg", jpgs[1]), ("s1.jpg", jpgs[2]), ("s1.json", b'{"label": 0}'),
    ("nolabel.jpg", jpgs[1]), ("nolabel.json", b'{"caption": "no label here"}'),
    (".hidden.jpg", jpgs[0]), ("README", b"not a member of any sample"),
])
# Labels from .cls, from .txt, and .cls before .txt.
write("labels.tar", [
    ("c.jpg", jpgs[0]), ("c.cls", b"4"),
    ("t.txt", b" 9\n"), ("t.jpg", jpgs[1]),
    ("both.jpg", jpgs[2]), ("both.txt", b"a caption"), ("both.cls", b"2\n"),
])
write("bad-txt.tar", [("x.jpg", jpgs[0]), ("x.txt", b"a caption")])
# Boxes: a good .json (xyxy or xywh by the spec), one with a short box, one with a far corner before its near
# one, an empty one, one whose ids and boxes differ in count.
write("boxes.tar", [
    ("b1.jpg", jpgs[0]), ("b1.json", json.dumps({"bb": [[1, 2, 3, 4], [0, 0.5, 10, 5]], "cat": [7, 9]}).encode()),
    ("b2.jpg", jpgs[1]), ("b2.json", json.dumps({"bb": [[1, 2, 3]], "cat": [1]}).encode()),
    ("b3.jpg", jpgs[2]), ("b3.json", json.dumps({"bb": [[5, 5, 2, 8]], "cat": [1]}).encode()),
    ("b4.jpg", jpgs[0]), ("b4.json", json.dumps({"bb": [], "cat": []}).encode()),
    ("b5.jpg", jpgs[1]), ("b5.json", json.dumps({"bb": [[0, 0, 1, 1]], "cat": [1, 2]}).encode()),
])
# Fields: captions (.txt, once as .TXT), a .json with and without its "caption", a key without a .txt, a
# caption that is not UTF-8, a member over the 1 MiB cap.
write("fields.tar", [
    ("k1.jpg", jpgs[0]), ("k1.txt", "h\u00e9llo \u2713".encode()), ("k1.json", b'{"caption": "c1", "id": 1}'),
    ("k2.jpg", jpgs[1]), ("k2.txt", b"two"), ("k2.json", b'{"id": 2}'),
    ("k3.jpg", jpgs[2]), ("k3.json", b'{"caption": "c3"}'),
    ("k4.TXT", b"\xff\xfe"), ("k4.jpg", jpgs[0]), ("k4.json", b'{"caption": 4}'),
    ("k5.jpg", jpgs[1]), ("k5.txt", b"x" * ((1 << 20) + 1)), ("k5.json", b'[]'),
])
write("bad-json.tar", [("x.jpg", jpgs[0]), ("x.json", b'{"label": "cat"}')])
write("long-name.tar", [("n" * 5000 + ".jpg", jpgs[0]), ("n" * 5000 + ".cls", b"1")])
