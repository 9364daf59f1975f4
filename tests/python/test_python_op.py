# tests/python/test_python_op.py - the Python op (pipeline/python_op.c) in-process, through spillctl and
# spillway.Loader: a stamp equals numpy's on the pipeline without it; with rng, batches do not depend on the
# thread count; Pipeline.map equals the JSON op; a function that raises, segfaults or hangs on one image
# fails that image only (skip: every other sample once, the reason and path logged; fail: the run stops
# naming both); lambdas and __main__ functions are refused. Data: 12 PNGs (exact pixels), one all black.
# Thread model: single-threaded test code (the library's threads and helpers are its own).
import os
import resource
import subprocess
import time
import unittest

import numpy as np
from PIL import Image

import pyops_fixture
import spwtest
from spillway import Loader, Pipeline, SpillwayError

HERE = os.path.dirname(os.path.abspath(__file__))


def make_pngs(root):
    """12 noise PNGs in two classes, and black.png in class b."""
    rng = np.random.default_rng(5)
    for i in range(12):
        d = os.path.join(root, "a" if i % 2 else "b")
        os.makedirs(d, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, size=(20 + i, 24, 3), dtype=np.uint8)).save(
            os.path.join(d, "img%02d.png" % i))
    Image.fromarray(np.zeros((20, 20, 3), np.uint8)).save(os.path.join(root, "b", "black.png"))


class TestPythonOp(spwtest.TempDir, unittest.TestCase):
    def setUp(self):
        super().setUp()
        self.data = os.path.join(self.tmp, "data")
        make_pngs(self.data)
        os.environ["SPILLWAY_PYTHONPATH"] = HERE        # spillctl's helpers import pyops_fixture from here

    def base(self, on_error="skip"):
        return (Pipeline.image_folder(self.data, seed=3, epochs=2).decode_image().center_crop(16)
                .batch(4).on_error(on_error))

    def with_op(self, p, op):
        d = p.to_dict()
        d["ops"].insert(2, op)
        return Pipeline.from_dict(d)

    def elements(self, p, **kw):
        """Both epochs' images and labels, in order, each as one array (how batches split them aside)."""
        loader = Loader(p, ordered=True, **kw)
        got = [[a.copy() for a in b[:2]] for _ in range(2) for b in loader]
        return np.concatenate([x for x, _ in got]), np.concatenate([y for _, y in got])

    def spillctl(self, p, *extra, preexec_fn=None):
        path = spwtest.write(self.tmp, "p.json", p.to_json())
        env = dict(os.environ, SPILLWAY_PYTHON="/usr/bin/python3")
        keys = os.path.join(self.tmp, "keys.txt")
        t0 = time.monotonic()
        r = subprocess.run([spwtest.SPILLCTL, "run", "--local", "--pipeline", path, "--threads", "2", "--keys", keys,
                            "--quiet"] + list(extra), capture_output=True, text=True, env=env, timeout=120,
                           preexec_fn=preexec_fn)
        lines = []
        if os.path.exists(keys):
            with open(keys) as f:
                lines = f.read().splitlines()
        return r, lines, time.monotonic() - t0

    def test_stamp_equals_numpy(self):
        x, y = self.elements(self.base().map(pyops_fixture.stamp, value=7), local_cores=2)
        wx, wy = self.elements(self.base(), local_cores=2)
        self.assertEqual(len(x), 26)
        np.testing.assert_array_equal(x, np.stack([pyops_fixture.stamp(e, value=7) for e in wx]))
        np.testing.assert_array_equal(y, wy)

    def test_rng_does_not_depend_on_threads(self):
        p = self.base().map(pyops_fixture.stamp_rng)
        (one, _), (three, _) = self.elements(p, local_cores=1), self.elements(p, local_cores=3)
        np.testing.assert_array_equal(one, three)
        corners = {bytes(e[0:4, 0:4].tobytes()) for e in one}
        self.assertEqual(len(corners), 26, "rng draws differ per sample and epoch")

    def test_map_is_the_json_op(self):
        m = self.base().map(pyops_fixture.stamp, value=7)
        j = self.with_op(self.base(), {"op": "python", "function": "pyops_fixture:stamp", "kwargs": {"value": 7}})
        self.assertEqual(m.to_dict(), j.to_dict())
        np.testing.assert_array_equal(self.elements(m)[0], self.elements(j)[0])

    def test_a_tensor_result_is_a_tensor(self):
        x = self.elements(self.base().map(pyops_fixture.to_chw_float))[0]
        self.assertEqual((x.dtype, x.shape[1:]), (np.float32, (3, 16, 16)))

    def test_raise_skip_and_fail(self):
        op = {"op": "python", "function": "pyops_fixture:raise_on_black"}
        r, keys, _ = self.spillctl(self.with_op(self.base(), op))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(keys), 2 * 12, "every other sample of both epochs, once each")
        self.assertFalse([k for k in keys if "black.png" in k])
        self.assertRegex(r.stderr, r'skipped sample=\d+ path="[^"]*black.png" err="ops\[2\] python '
                         r'pyops_fixture:raise_on_black: ValueError: black image \([^)]*pyops_fixture.py:\d+')
        r, _, _ = self.spillctl(self.with_op(self.base("fail"), op))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("black.png", r.stderr)
        self.assertIn("ValueError: black image", r.stderr)
        with self.assertRaises(SpillwayError) as cm:
            self.elements(self.base("fail").map(pyops_fixture.raise_on_black))
        self.assertIn("ValueError: black image", str(cm.exception))
        self.assertIn("black.png", str(cm.exception))

    def test_segfault_fails_one_element(self):
        r, keys, _ = self.spillctl(self.with_op(self.base(), {"op": "python",
                                                              "function": "pyops_fixture:crash_on_black"}))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(keys), 24)
        self.assertIn("its helper process died (signal 11 (Segmentation fault)) on this element", r.stderr)

    def test_hang_times_out(self):
        op = {"op": "python", "function": "pyops_fixture:hang_on_black", "timeout_s": 1}
        r, keys, took = self.spillctl(self.with_op(self.base(), op))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(keys), 24)
        self.assertIn("no result within its timeout_s of 1 s: the helper was killed", r.stderr)
        self.assertLess(took, 30)

    def test_unimportable_functions_refused(self):
        def nested(x):
            return x
        for fn, why in ((lambda x: x, "a lambda"), (nested, "a lambda or a function defined inside another")):
            with self.assertRaises(TypeError) as cm:
                self.base().map(fn)
            self.assertIn(why, str(cm.exception))
        for name, why in (("__main__:f", "(__main__), which workers cannot import"),
                          ("mod:<lambda>", "is a lambda or a nested function"), ("no_colon", "is not")):
            p = self.with_op(self.base(), {"op": "python", "function": name})
            r = spwtest.spillctl("validate", "--pipeline", spwtest.write(self.tmp, "v.json", p.to_json()),
                                 check=False)
            self.assertEqual(r.returncode, 2, name)
            self.assertIn("ops[2].function: ", r.stderr)
            self.assertIn(why, r.stderr)

    def test_validate_checks_the_function_imports(self):
        env = dict(os.environ, SPILLWAY_PYTHON="/usr/bin/python3")
        for name, rc in (("pyops_fixture:stamp", 0), ("pyops_fixture:no_such_function", 1)):
            p = self.with_op(self.base(), {"op": "python", "function": name})
            r = subprocess.run([spwtest.SPILLCTL, "validate", "--pipeline",
                                spwtest.write(self.tmp, "v.json", p.to_json())], capture_output=True, text=True,
                               env=env)
            self.assertEqual(r.returncode, rc, r.stderr)
            self.assertIn('"function": "%s"' % name, r.stdout)       # the spec itself is valid either way
        self.assertIn("ops[2].function: cannot import pyops_fixture:no_such_function: AttributeError", r.stderr)
        self.assertIn("workers need it on their --python-path", r.stderr)

    def test_helper_killed_between_elements_is_replaced(self):
        """The helpers are killed while their threads wait for the trainer (40 elements/s): the next element
        starts a new one, with a warning, and no element is lost (one that was being made at the very
        moment of the kill may fail: the margin below)."""
        p = (Pipeline.image_folder(spwtest.images(), seed=1, epochs=2).decode_jpeg().center_crop(16)
             .map(pyops_fixture.stamp).batch(8))
        path = spwtest.write(self.tmp, "p.json", p.to_json())
        keys = os.path.join(self.tmp, "k.txt")
        env = dict(os.environ, SPILLWAY_PYTHON="/usr/bin/python3")
        run = subprocess.Popen([spwtest.SPILLCTL, "run", "--local", "--pipeline", path, "--threads", "2",
                                "--consume-rate", "40", "--keys", keys, "--quiet"],
                               stderr=subprocess.PIPE, text=True, env=env)
        time.sleep(2.5)
        helpers = subprocess.run(["pgrep", "-P", str(run.pid)], capture_output=True, text=True).stdout.split()
        for pid in helpers:
            os.kill(int(pid), 9)
        _, err = run.communicate(timeout=60)
        self.assertEqual(run.returncode, 0, err)
        self.assertEqual(len(helpers), 2, "one helper per thread")
        self.assertIn("ended between elements (signal 9); starting another", err)
        with open(keys) as f:
            n = len(f.read().splitlines())
        self.assertGreaterEqual(n, 318, err)

    def test_results_that_cannot_be_elements_fail_them(self):
        for fn, why in (("as_float64", "pyops_fixture:as_float64 returned float64 data: return uint8, float32, "
                                       "float16 or int64"),
                        ("scalar", "pyops_fixture:scalar returned an array of 0 dimensions: 1 to 5")):
            r, keys, _ = self.spillctl(self.with_op(self.base(), {"op": "python", "function": "pyops_fixture:" + fn}))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(keys, [], fn)
            self.assertIn(why, r.stderr)

    def test_big_elements_grow_the_shared_memory(self):
        """A 640 x 640 element is more than the 1 MiB first mapped (the library grows it), and the result,
        4 times that, more than the helper's room (the helper grows it): both arrive intact."""
        base = (Pipeline.image_folder(spwtest.images(), seed=4, epochs=1).decode_jpeg().center_crop(640).batch(4)
                .limits(max_pixels=89478485))
        got = [b[0].copy() for b in Loader(base.map(pyops_fixture.grow), ordered=True, local_cores=2, max_batches=3)]
        want = [b[0].copy() for b in Loader(base, ordered=True, local_cores=2, max_batches=3)]
        self.assertEqual(len(got), 3)
        for x, w in zip(got, want):
            self.assertEqual(x.shape, (4, 1280, 1280, 3))
            np.testing.assert_array_equal(x, np.stack([pyops_fixture.grow(e) for e in w]))

    def test_outputs_past_the_room_are_asked_again(self):
        """The elements the prefetch window lets one thread claim (8) go to the helper in one request; their
        48 MiB outputs fill the room after 6, and the other 2 are asked for again (seen by logging the helper):
        every element arrives, each with its own image's sum."""
        base = self.base("fail")
        got = [b[0].copy() for b in Loader(base.map(pyops_fixture.sum_48mib), ordered=True, local_cores=1)]
        want = [b[0].copy() for b in Loader(base, ordered=True, local_cores=1)]
        self.assertEqual(sum(len(x) for x in got), 13)       # one epoch per pass over a Loader
        for x, w in zip(got, want):
            self.assertEqual(x.shape, (len(w), 12 << 20))
            np.testing.assert_array_equal(x, np.stack([pyops_fixture.sum_48mib(e) for e in w]))

    def test_declared_output(self):
        """A function that returns what the op declares runs as without the declaration; one that does not
        fails each element, naming what it returned and what was declared; Pipeline.map writes both fields."""
        ok = self.base().map(pyops_fixture.to_chw_float, output_shape=(3, 16, 16), output_dtype=np.float32)
        self.assertEqual(ok.to_dict()["ops"][2]["output_shape"], [3, 16, 16])
        self.assertEqual(ok.to_dict()["ops"][2]["output_dtype"], "float32")
        x, _ = self.elements(ok, local_cores=2)
        wx, _ = self.elements(self.base().map(pyops_fixture.to_chw_float), local_cores=2)
        np.testing.assert_array_equal(x, wx)
        r, keys, _ = self.spillctl(self.with_op(self.base(), {"op": "python", "function": "pyops_fixture:to_chw_float",
                                                              "output_shape": [16, 16, 3], "output_dtype": "uint8"}))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(keys, [])
        self.assertIn("pyops_fixture:to_chw_float: returned float32 [3, 16, 16] where the op declares uint8 "
                      "[16, 16, 3]", r.stderr)

    def test_address_space_limit_gets_a_smaller_room(self):
        """Under a 3 GiB address-space limit (ulimit -v) the 4 GiB range a thread's shared memory is mapped in
        cannot be had: the smaller one is used, and every element is made."""
        def limit():
            resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        r, keys, _ = self.spillctl(self.with_op(self.base("fail"), {"op": "python", "function": "pyops_fixture:stamp"}),
                                   preexec_fn=limit)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(keys), 26)

    def test_no_interpreter_is_said_once_per_element(self):
        env = dict(os.environ, SPILLWAY_PYTHON="/no/such/python3")
        p = self.with_op(self.base(), {"op": "python", "function": "pyops_fixture:stamp"})
        path = spwtest.write(self.tmp, "p.json", p.to_json())
        r = subprocess.run([spwtest.SPILLCTL, "run", "--local", "--pipeline", path, "--threads", "1", "--quiet"],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)          # skip: every element skipped, the run ends
        self.assertIn("cannot start the Python helper /no/such/python3: No such file or directory", r.stderr)
        self.assertEqual(r.stderr.count("skipped sample="), 26)

    def test_missing_module_is_the_elements_error(self):
        op = {"op": "python", "function": "no_such_module_xyz:f"}
        r, keys, _ = self.spillctl(self.with_op(self.base(), op))
        self.assertEqual(keys, [])
        self.assertIn("cannot import no_such_module_xyz:f: ModuleNotFoundError", r.stderr)


if __name__ == "__main__":
    unittest.main()
