# tests/python/spwtest.py - shared by the Python tests (not a test itself): paths ($SPW_BUILD, default
# build/), the cached test datasets, `spillctl` runs and dumps, dump comparison, and a dispatcher plus one
# worker on 127.0.0.1 (port 0) that are always killed. Makes `import spillway` work without PYTHONPATH.
# Thread model: single-threaded test code.
import glob
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.abspath(os.environ.get("SPW_BUILD", os.path.join(ROOT, "build")))
SPILLCTL = os.path.join(BUILD, "bin", "spillctl")
IMAGES = os.path.join(BUILD, "data", "cli-test")
SPEECH = os.path.join(BUILD, "data", "speech-test")

if os.path.join(ROOT, "client", "python") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "client", "python"))
os.environ.setdefault("SPILLWAY_LIB", os.path.join(BUILD, "lib", "libspillway.so"))
# Service tests check what workers send: every fusion group offloaded unless a test says otherwise (the users'
# default, planned, is tested with SPILLWAY_CUT removed: test_service.py).
os.environ["SPILLWAY_CUT"] = "all"

_made = set()


def _make(script, out, n):
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "data", script), out, n], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("%s %s %s failed:\n%s%s" % (script, out, n, r.stdout, r.stderr))


def images():
    """The 160-image, 10-class dataset's train folder (generated once; the script caches by stamp)."""
    if "images" not in _made:
        _make("make-dataset.sh", IMAGES, "160")
        _made.add("images")
    return os.path.join(IMAGES, "train")


def speech():
    """The 20-clip speech dataset's train folder (2-10 s clips, 10 word classes)."""
    if "speech" not in _made:
        _make("make-audio-dataset.sh", SPEECH, "20")
        _made.add("speech")
    return os.path.join(SPEECH, "train")


def caption_shards(dirname, n=24):
    """A WebDataset shard of n of the test images as KEY.jpg + KEY.txt (a non-ASCII caption) + KEY.json
    ({"title", "id"}): its path, and {member path: (caption, title, json bytes)}."""
    import io
    import tarfile
    imgs = sorted(glob.glob(os.path.join(images(), "*", "*.JPEG")))[:n]
    path, want = os.path.join(dirname, "caps-0.tar"), {}
    with tarfile.open(path, "w") as t:
        for i, img in enumerate(imgs):
            key = "k%03d" % i
            caption, title = "caption %d: ünïcödé ✓ %s" % (i, "x" * i), "título %d" % i
            meta = ('{"title": "%s", "id": %d}' % (title, i)).encode()
            with open(img, "rb") as f:
                jpg = f.read()
            for name, data in ((key + ".jpg", jpg), (key + ".txt", caption.encode()), (key + ".json", meta)):
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            want[key + ".jpg"] = (caption, title, meta)
    return path, want


def spillctl(*args, check=True):
    return subprocess.run([SPILLCTL] + list(args), check=check, capture_output=True, text=True)


def write(dirname, name, text):
    path = os.path.join(dirname, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def dump_local(spec_text, workdir, threads=2):
    """`spillctl run --local --dump` of spec_text: [batch: [arrays]] and the keys.txt lines."""
    spec = write(workdir, "dump.json", spec_text)
    out = os.path.join(workdir, "dump")
    spillctl("run", "--local", "--pipeline", spec, "--threads", str(threads), "--dump", out, "--quiet")
    batches = []
    for i in range(len(glob.glob(os.path.join(out, "b*_t0.npy")))):
        batches.append([np.load(p) for p in sorted(glob.glob(os.path.join(out, "b%06d_t*.npy" % i)))])
    with open(os.path.join(out, "keys.txt")) as f:
        keys = f.read().splitlines()
    return batches, keys


def key_lines(batches):
    return ["%d %d %s" % k for b in batches for k in b.keys]


def same_array(a, b):
    """dtype, shape and every byte equal."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


class TempDir:
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="spw-py-")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()


class ServiceCase(TempDir):
    """A test case with a Service on self.service (and self.tmp), stopped after each test."""

    def setUp(self):
        super().setUp()
        self.service = Service(self.tmp)

    def tearDown(self):
        self.service.stop()
        super().tearDown()


class Service:
    """A dispatcher and one worker (1 thread) on 127.0.0.1, on ports they choose; stop() kills both."""

    def __init__(self, workdir):
        self.procs = []
        self.workdir = workdir
        try:
            port = self._start("dispatcher", [os.path.join(BUILD, "bin", "spillway-dispatcher"), "--listen",
                                              "127.0.0.1", "--port", "0", "--heartbeat-ms", "100"])
            self.address = "127.0.0.1:%d" % port
            self._start("worker", [os.path.join(BUILD, "bin", "spillway-worker"), "--dispatcher", self.address,
                                   "--listen", "127.0.0.1", "--port", "0", "--threads", "1"])
            time.sleep(0.3)     # the worker's registration
        except BaseException:
            self.stop()
            raise

    def _start(self, name, argv):
        out = os.path.join(self.workdir, name + ".out")
        with open(out, "w") as o, open(os.path.join(self.workdir, name + ".err"), "w") as e:
            self.procs.append(subprocess.Popen(argv, stdout=o, stderr=e))
        for _ in range(200):
            with open(out) as f:
                m = re.search(r"^listening on .*:(\d+)$", f.read(), re.M)
            if m:
                return int(m.group(1))
            if self.procs[-1].poll() is not None:
                break
            time.sleep(0.025)
        raise RuntimeError("%s did not start (see %s)" % (name, out))

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()
        self.procs = []
