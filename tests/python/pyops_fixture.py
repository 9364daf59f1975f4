# tests/python/pyops_fixture.py - module-level functions the Python-op tests name (helper processes import
# them as pyops_fixture:NAME): stamps with and without rng, functions that raise, crash (a segfault through
# ctypes) or hang on an all-black image, one of a known CPU cost, results that cannot be elements, one that
# outgrows the shared memory, one whose outputs fill a request's room, and scripts/bench/python-op.sh's identity and numpy-heavy ones.
# Thread model: pure functions, one call at a time.
import ctypes
import time

import numpy as np


def stamp(img, value=255):
    out = img.copy()
    out[0:4, 0:4, :] = value
    return out


def stamp_rng(img, rng):
    out = img.copy()
    out[0:4, 0:4, :] = rng.integers(0, 256, size=(4, 4, 3), dtype=np.uint8)
    return out


def to_chw_float(img):
    return (img.astype(np.float32) / 255.0).transpose(2, 0, 1)


def raise_on_black(img):
    if img.max() == 0:
        raise ValueError("black image")
    return img


def crash_on_black(img):
    if img.max() == 0:
        ctypes.string_at(0)         # SIGSEGV in the helper
    return img


def hang_on_black(img):
    if img.max() == 0:
        time.sleep(3600)
    return img


def identity(img):
    return img


def heavy(img):
    """numpy work of about a millisecond per 224 x 224 image: a 5-tap blur both ways, in float32."""
    x = img.astype(np.float32)
    for axis in (0, 1):
        x = (np.roll(x, -2, axis) + np.roll(x, -1, axis) + x + np.roll(x, 1, axis) + np.roll(x, 2, axis)) / 5
    return x.astype(np.uint8)


def busy(img, ms=2.0):
    """ms of CPU, then the image: a known cost for the profile's accounting."""
    import time as t
    end = t.process_time() + ms / 1000
    while t.process_time() < end:
        pass
    return img


def as_float64(img):
    return img.astype(np.float64)


def scalar(img):
    return np.float32(img.mean())


def sum_48mib(img):
    """48 MiB of float32 holding the image's sum: a request of 6 such outputs passes the 256 MiB after which a
    helper answers part of a request, and the parent sends the rest again."""
    return np.full(12 << 20, float(img.sum()), np.float32)


def grow(img):
    """Four times the input's bytes: the output outgrows the shared memory the input fitted."""
    return np.tile(img, (2, 2, 1))
