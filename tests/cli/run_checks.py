#!/usr/bin/env python3
"""tests/cli/run_checks.py - the Python checks of tests/cli/run.sh, one function each: run as
run_checks.py NAME ARGS...; the function reads ARGS as sys.argv[1:] and exits non-zero when
its check fails."""
import sys


def batch_tensors():
    import sys, numpy as np
    x, y = np.load(sys.argv[1] + "/b000000_t0.npy"), np.load(sys.argv[1] + "/b000000_t1.npy")
    assert x.shape == (32, 3, 224, 224) and x.dtype == np.float32, (x.shape, x.dtype)
    assert y.shape == (32,) and y.dtype == np.int64 and y.min() >= 0 and y.max() < 10
    assert np.isfinite(x).all() and -3 < x.min() < 0 < x.max() < 3


def eval_batches():
    import sys, glob, numpy as np
    files = sorted(glob.glob(sys.argv[1] + "/b*_t0.npy")); n = int(sys.argv[2])
    last = np.load(files[-1])
    assert last.dtype == np.uint8 and last.shape[1:] == (3, 224, 224), last.shape
    assert last.shape[0] == n - 64 * (len(files) - 1) and 0 < last.shape[0] <= 64


def pillow_fails():
    import sys
    from PIL import Image
    try:
        Image.open(sys.argv[1]).convert("RGB")
    except OSError as e:
        sys.exit(0 if "truncated" in str(e) else f"unexpected Pillow error: {e}")
    sys.exit("Pillow decoded it")


def pillow_matrix():
    import os, random, sys
    from PIL import Image
    out, photo, fix = sys.argv[1:4]
    os.makedirs(out)

    def scan_start(b):
        i = 2
        while b[i + 1] != 0xDA:
            i += 2 + (b[i + 2] << 8 | b[i + 3])
        return i + 2 + (b[i + 2] << 8 | b[i + 3])

    def cases(b):
        mid = scan_start(b) + (len(b) - scan_start(b)) // 2
        def put(data, at=mid):
            v = bytearray(b)
            v[at:at + len(data)] = data
            return bytes(v)
        rng = random.Random(len(b))
        yield "intact", b
        for pct in (50, 90, 99):
            yield f"cut{pct}", b[:len(b) * pct // 100]
        yield "no-eoi", b[:-2]
        yield "garbage-after-eoi", b + b"\xff\xd8\xff\xe0" + bytes(rng.randrange(256) for _ in range(500))
        yield "zeroed", put(bytes(64))
        yield "overwritten", put(b"\x55" * 64)
        yield "random-bytes", put(bytes(rng.randrange(256) for _ in range(16)))
        for code in (0xD8, 0xD9, 0xD3, 0xC4):
            yield f"marker-{code:02x}", put(bytes([0xFF, code]))

    for src, name in ((photo, "photo"), (fix + "/progressive.jpg", "progressive")):
        for case, data in cases(open(src, "rb").read()):
            with open(f"{out}/{name}-{case}.jpg", "wb") as f:
                f.write(data)
    with open(f"{out}/fixture-no-eoi-pillow-ok.jpg", "wb") as f:
        f.write(open(fix + "/no_eoi_pillow_ok.jpg", "rb").read())
    for p in sorted(os.listdir(out)):
        try:
            Image.open(f"{out}/{p}").convert("RGB")
            print(f"{out}/{p}")
        except OSError:
            pass


def epochs_zero_sizes():
    import sys, numpy as np
    sizes = [np.load("%s/b%06d_t1.npy" % (sys.argv[1], i)).shape[0] for i in range(6)]
    assert sizes == [50, 50, 50, 10, 50, 50], sizes


if __name__ == "__main__":
    check = globals()[sys.argv[1]]
    sys.argv = [sys.argv[0]] + sys.argv[2:]
    check()
