# tests/python/test_logs.py - the library's log lines in a Python trainer, each run in a child python whose
# stderr is captured: a skipped sample's line reaches a handler on logger "spillway" as a WARNING record of
# spillway.executor and not stderr; SPILLWAY_LOG_TO=stderr writes it there as before (and a bad value is
# refused, naming it); a handler that raises breaks neither the loader nor the process; a level no logger
# takes keeps the lines in C (none crosses into Python); a trainer exiting while the library's threads log
# ends cleanly. Thread model: single-threaded test code (the children have the library's threads).
import json
import os
import shutil
import subprocess
import sys
import unittest
from unittest import mock

import spwtest
from spillway import _lib

BROKEN = 5              # the first 5 files (of 160, in the manifest's order) are made not-JPEGs

# A trainer: argv = folder, epochs, mode. Prints its records, the samples it got and the lines that crossed.
TRAINER = r"""
import atexit, json, logging, sys
sys.path.insert(0, %(here)r)
import spwtest

root, epochs, mode = sys.argv[1], int(sys.argv[2]) or None, sys.argv[3]
records = []


def late():
    # Registered before spillway is imported, so it runs after spillway's own exit hooks: a job made now
    # logs while the interpreter goes down, and its lines must go to stderr, not into logging.
    before = len(records)
    with Loader(pipeline(1), local_cores=2) as ld:
        n = sum(b.n for b in ld.batches())
    print("late", n, len(records) - before, flush=True)


if mode == "exit":
    atexit.register(late)
from spillway import Loader, Pipeline, _lib


class Keep(logging.Handler):
    def emit(self, record):
        records.append([record.name, record.levelname, record.getMessage()])


class Raise(logging.Handler):
    def emit(self, record):
        raise RuntimeError("this handler is broken")


def pipeline(epochs):
    return Pipeline.image_folder(root, epochs=epochs).decode_jpeg().center_crop(16).batch(8).on_error("skip")


log = logging.getLogger("spillway")
log.addHandler(Raise() if mode == "raise" else Keep())
if mode == "error-only":
    log.setLevel(logging.ERROR)
p = pipeline(epochs)
if mode == "exit":      # leave with the job's threads still skipping samples (and logging): no close
    ld = Loader(p, local_cores=2)
    next(iter(ld))
    print("took one batch", flush=True)
    sys.exit(0)
with Loader(p, local_cores=2) as ld:
    n = sum(b.n for b in ld.batches())
print(json.dumps({"records": records, "samples": n, "crossed": _lib.lines_crossed}))
"""


def broken_copy(tmp, n_broken=BROKEN):
    """The test set's train folder with its first n_broken files made text: (root, their paths)."""
    root = os.path.join(tmp, "broken")
    shutil.copytree(spwtest.images(), root)
    every = sorted(os.path.join(root, c, f) for c in os.listdir(root) for f in os.listdir(os.path.join(root, c)))
    paths = every[:n_broken]
    for path in paths:
        with open(path, "w") as out:
            out.write("not a jpeg\n")
    return root, paths


class LogLines(spwtest.TempDir, unittest.TestCase):
    def trainer(self, root, mode="keep", epochs=1, **env):
        code = TRAINER % {"here": os.path.dirname(os.path.abspath(__file__))}
        environ = dict(os.environ)
        environ.pop("SPILLWAY_LOG_TO", None)
        environ.pop("SPILLWAY_LOG_LEVEL", None)
        environ.update(env)
        r = subprocess.run([sys.executable, "-c", code, root, str(epochs), mode], capture_output=True, text=True,
                           env=environ, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def result(self, r):
        return json.loads(r.stdout.splitlines()[-1])

    def test_a_skipped_sample_reaches_logging_and_not_stderr(self):
        root, broken = broken_copy(self.tmp)
        r = self.trainer(root)
        got = self.result(r)
        self.assertEqual(got["samples"], 160 - BROKEN)
        self.assertEqual(len(got["records"]), BROKEN, got["records"])
        for name, level, msg in got["records"]:
            self.assertEqual((name, level), ("spillway.executor", "WARNING"))
            self.assertRegex(msg, r'^skipped sample=\d+ path="[^"]+" err="not a JPEG')
        self.assertEqual(sorted(msg.split('path="')[1].split('"')[0] for _, _, msg in got["records"]), broken)
        self.assertNotIn("skipped", r.stderr)
        self.assertNotIn(broken[0], r.stderr)

    def test_log_to_stderr_keeps_the_librarys_own_lines(self):
        root, broken = broken_copy(self.tmp)
        r = self.trainer(root, SPILLWAY_LOG_TO="stderr")
        got = self.result(r)
        self.assertEqual(got["samples"], 160 - BROKEN)
        self.assertEqual((got["records"], got["crossed"]), ([], 0))
        for path in broken:
            self.assertRegex(r.stderr, r'Z warn executor skipped sample=\d+ path="%s" err="not a JPEG' % path)

    def test_a_bad_log_to_value_is_refused_naming_it(self):
        with mock.patch.dict(os.environ, {"SPILLWAY_LOG_TO": "syslog"}):
            with self.assertRaises(ValueError) as cm:
                _lib.log_destination()
        self.assertIn("SPILLWAY_LOG_TO='syslog'", str(cm.exception))
        with mock.patch.dict(os.environ, {"SPILLWAY_LOG_TO": "stderr"}):
            self.assertEqual(_lib.log_destination(), "stderr")

    def test_a_handler_that_raises_breaks_neither_the_loader_nor_the_process(self):
        root, broken = broken_copy(self.tmp)
        r = self.trainer(root, mode="raise", epochs=2)
        got = self.result(r)
        self.assertEqual(got["samples"], 2 * (160 - BROKEN))
        self.assertEqual(got["crossed"], 2 * BROKEN)
        self.assertEqual(r.stderr.count("a logging handler raised RuntimeError: this handler is broken"), 1,
                         r.stderr)
        self.assertEqual(r.stderr.count("warn executor skipped sample="), 2 * BROKEN, r.stderr)   # not lost
        self.assertNotIn("Traceback", r.stderr)
        self.assertNotIn("Exception ignored", r.stderr)

    def test_lines_no_logger_takes_stay_in_the_library(self):
        """Logger "spillway" at ERROR: the warn lines are dropped in C, before the GIL (none crosses); at the
        default (WARNING, the root's) they cross, as the first test shows."""
        root, _ = broken_copy(self.tmp)
        got = self.result(self.trainer(root, mode="error-only"))
        self.assertEqual(got["samples"], 160 - BROKEN)
        self.assertEqual((got["records"], got["crossed"]), ([], 0))
        got = self.result(self.trainer(root))
        self.assertEqual(got["crossed"], BROKEN)

    def test_exiting_while_the_librarys_threads_log_ends_cleanly(self):
        """Most samples broken and the epochs unending: the job's threads log skip after skip as the trainer
        leaves without closing the Loader, and nothing crashes or hangs; once spillway's exit hooks ran, a
        job's lines go to stderr (the callback is unhooked), not into a logging going down."""
        root, _ = broken_copy(self.tmp, n_broken=150)
        for _ in range(3):
            r = self.trainer(root, mode="exit", epochs=0)       # 0: None, unending
            self.assertIn("took one batch", r.stdout)
            self.assertIn("late 10 0\n", r.stdout)        # 10 good samples; no record for the 150 skipped
            self.assertEqual(r.stderr.count(" warn executor skipped sample="), 150, r.stderr[-2000:])
            for bad in ("Fatal Python error", "Traceback", "Exception ignored", "Segmentation"):
                self.assertNotIn(bad, r.stderr)


if __name__ == "__main__":
    unittest.main()
