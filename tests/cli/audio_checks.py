#!/usr/bin/env python3
"""tests/cli/audio_checks.py - the Python checks of tests/cli/audio.sh, one function each: run as
audio_checks.py NAME ARGS...; the function reads ARGS as sys.argv[1:] and exits non-zero when
its check fails."""
import sys


def skip_batches():
    import glob, sys, numpy as np
    d = sys.argv[1]
    keys = [l.split()[2] for l in open(d + "/keys.txt")]
    xs = [np.load(f) for f in sorted(glob.glob(d + "/b*_t0.npy"))]
    ys = np.concatenate([np.load(f) for f in sorted(glob.glob(d + "/b*_t1.npy"))])
    xs = [x for x in xs if x.shape[0]]      # a batch whose samples were all skipped comes out empty
    assert all(x.shape[1:] == (80, 101) and x.dtype == np.float32 and np.isfinite(x).all() for x in xs)
    assert sum(x.shape[0] for x in xs) == len(keys) == len(ys)
    assert list(ys) == [0 if "/cat/" in k else 1 for k in keys], (list(ys), keys)


def decode_equals_soundfile():
    import sys, numpy as np, soundfile as sf
    d, mono = sys.argv[1], sys.argv[2] == "true"
    keys = [l.split()[2] for l in open(d + "/keys.txt")]
    assert len(keys) == int(sys.argv[3]), keys
    for i, k in enumerate(keys):
        x = np.load("%s/b%06d_t0.npy" % (d, i))[0]
        ref = sf.read(k, dtype="float32", always_2d=True)[0].T
        if mono:
            ref = ref.mean(axis=0, keepdims=True)
        assert x.shape == ref.shape and x.dtype == np.float32, (k, x.shape, ref.shape)
        assert np.abs(x - ref).max() <= (1e-6 if mono else 0.0), (k, np.abs(x - ref).max())


def mono_false_shapes():
    import sys, numpy as np
    x, s = np.load(sys.argv[1] + "/st/b000000_t0.npy"), np.load(sys.argv[1] + "/st2/b000000_t0.npy")
    assert x.shape == (3, 2, 12000) and s.shape == (3, 2, 257, 101), (x.shape, s.shape)
    assert not np.allclose(x[:, 0], x[:, 1])


def resample_lengths():
    import os, sys, numpy as np
    d = sys.argv[1]
    keys = [l.split()[2] for l in open(d + "/keys.txt")]
    assert len(keys) == 4
    for i, k in enumerate(keys):
        rate, n = map(int, os.path.basename(k)[1:-4].split("_"))
        want = -(-16000 * n // rate)
        x = np.load("%s/b%06d_t0.npy" % (d, i))
        assert x.shape == (1, 1, want), (k, x.shape, want)


def labels_tsv():
    import glob, sys, numpy as np
    d = sys.argv[1]
    keys = [l.split()[2] for l in open(d + "/keys.txt")]
    ys = np.concatenate([np.load(f) for f in sorted(glob.glob(d + "/b*_t1.npy"))])
    expect = [l.rstrip("\n").split("\t") for l in open(sys.argv[2])]
    assert keys == [p for p, _ in expect], keys                 # unlisted.wav left out
    assert list(ys) == [int(y) for _, y in expect], list(ys)


def tar_shards():
    import glob, sys, numpy as np
    d = sys.argv[1]
    keys = [l.split()[2] for l in open(d + "/keys.txt")]
    ys = np.concatenate([np.load(f) for f in sorted(glob.glob(d + "/b*_t1.npy"))])
    got = sorted("%s\t%d" % (k, y) for k, y in zip(keys, ys))
    assert got == [l.rstrip("\n") for l in open(sys.argv[2])], got


if __name__ == "__main__":
    check = globals()[sys.argv[1]]
    sys.argv = [sys.argv[0]] + sys.argv[2:]
    check()
