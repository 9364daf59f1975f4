# tests/python/test_resume.py - checkpoint and resume, in process and through a real dispatcher and worker: a
# trainer process saves the Loader's state_dict() with the keys it consumed after every batch (one atomic
# file), kills itself with SIGKILL at a random batch (several seeds), and a new process resumes from the last
# saved state: over the whole 2-epoch run every (epoch, sample) is delivered exactly once (through the
# service unordered, so a checkpoint is a bitmap, not a count). The same for one rank of two killed and
# resumed while the other rank runs: the ranks' union is each epoch exactly once. Also: a state from another
# spec or rank is refused, and load_state_dict on a live Loader restarts it. Thread model: single-threaded
# (trainers are subprocesses).
import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import unittest

import spwtest
from spillway import Loader, Pipeline

TRAINER = textwrap.dedent("""
    import json, os, signal, sys
    from spillway import Loader, Pipeline
    data, state_file, kill_at, rank, world = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \\
        int(sys.argv[5])
    dispatcher = sys.argv[6] if len(sys.argv) > 6 else None
    p = (Pipeline.image_folder(data, seed=11, epochs=2).decode_jpeg().center_crop(16)
         .random_horizontal_flip().batch(12))
    saved = json.load(open(state_file)) if os.path.exists(state_file) else {"state": None, "keys": []}
    keys = saved["keys"]
    ld = Loader(p, resume=saved["state"], rank=rank, world_size=world, split_size=16, local_cores=2,
                dispatcher=dispatcher, job_name="resume-test" if dispatcher else None)
    for n, b in enumerate(ld.batches()):
        keys += [[k.epoch, k.sample] for k in b.keys]
        tmp = state_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"state": ld.state_dict(), "keys": keys}, f)
        os.replace(tmp, state_file)         # the keys and the state that delivered them, together
        if n + 1 == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
    print("done", len(keys))
""")


def pipeline():
    return (Pipeline.image_folder(spwtest.images(), seed=11, epochs=2).decode_jpeg().center_crop(16)
            .random_horizontal_flip().batch(12))


def trainer_argv(state_file, kill_at, rank, world, dispatcher):
    return ([sys.executable, "-c", TRAINER, spwtest.images(), state_file, str(kill_at), str(rank), str(world)] +
            ([dispatcher] if dispatcher else []))


TRAINER_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


class ResumeTest(unittest.TestCase):
    dispatcher = None

    def run_trainer(self, state_file, kill_at, rank=0, world=1):
        return subprocess.run(trainer_argv(state_file, kill_at, rank, world, self.dispatcher), env=TRAINER_ENV,
                              capture_output=True, text=True, timeout=300)

    def killed_and_resumed(self, kill_at, rank=0, world=1):
        with tempfile.TemporaryDirectory() as d:
            state_file = os.path.join(d, "state.json")
            first = self.run_trainer(state_file, kill_at, rank, world)
            self.assertEqual(first.returncode, -9, first.stderr)          # killed mid-run, as planned
            second = self.run_trainer(state_file, 0, rank, world)
            self.assertEqual(second.returncode, 0, second.stderr)
            with open(state_file) as f:
                return [tuple(k) for k in json.load(f)["keys"]]

    def test_killed_at_random_batches_resumes_exactly_once(self):
        batches = 2 * ((160 + 11) // 12)
        for seed in (1, 2, 3):
            kill_at = random.Random(seed).randrange(1, batches)
            keys = self.killed_and_resumed(kill_at)
            want = sorted((e, s) for e in (0, 1) for s in range(160))
            self.assertEqual(sorted(keys), want, "killed after batch %d" % kill_at)

    def test_a_rank_killed_and_resumed_keeps_the_job_exactly_once(self):
        keys = self.killed_and_resumed(4, rank=1, world=2)
        with Loader(pipeline(), rank=0, world_size=2, split_size=16) as other:
            keys += [(k.epoch, k.sample) for b in other.batches() for k in b.keys]
        self.assertEqual(sorted(keys), sorted((e, s) for e in (0, 1) for s in range(160)))

    def test_state_for_another_spec_or_rank_is_refused(self):
        with Loader(pipeline(), local_cores=1) as ld:
            next(iter(ld))
            state = ld.state_dict()
        other = pipeline().batch(10)
        with self.assertRaises(ValueError) as e:
            Loader(other, resume=state)
        self.assertIn("another spec: batch.size: 12 -> 10", str(e.exception))
        del state["spec"]           # a state without the spec's text (version 2 before it had one)
        with self.assertRaisesRegex(ValueError, "another spec"):
            Loader(other, resume=state)
        with self.assertRaises(ValueError):
            Loader(pipeline(), resume=state, rank=1, world_size=2)

    def test_load_state_dict_goes_on_from_the_next_batch(self):
        with Loader(pipeline(), local_cores=1) as ld:
            it = iter(ld)
            first = [next(it).keys for _ in range(3)]
            state = ld.state_dict()
            self.assertEqual(state["batches"], 3)
            rest = [b.keys for b in it]
        with Loader(pipeline(), local_cores=1) as again:
            again.load_state_dict(state)
            self.assertEqual([b.keys for b in again], rest)
        self.assertEqual(len(first) + len(rest), (160 + 11) // 12)


class ServiceResumeTest(spwtest.ServiceCase, unittest.TestCase):
    """The same through a dispatcher and a worker: a resumed trainer rejoins the job its state was taken in."""
    run_trainer = ResumeTest.run_trainer
    killed_and_resumed = ResumeTest.killed_and_resumed

    def setUp(self):
        super().setUp()
        self.dispatcher = self.service.address

    def test_service_killed_at_random_batches_resumes_exactly_once(self):
        batches = 2 * ((160 + 11) // 12)
        for seed in (4, 5, 6):
            kill_at = random.Random(seed).randrange(1, batches)
            keys = self.killed_and_resumed(kill_at)
            want = sorted((e, s) for e in (0, 1) for s in range(160))
            self.assertEqual(sorted(keys), want, "killed after batch %d" % kill_at)

    def test_service_fields_resume_exactly_once(self):
        """A state taken mid-run through the service, resumed by another Loader: every (key, caption) once."""
        with tempfile.TemporaryDirectory() as d:
            shard, want = spwtest.caption_shards(d)
            p = (Pipeline.tar_shards(shard, seed=3, labels=False, fields={"caption": {"from": "txt"}}, epochs=1)
                 .decode_jpeg().center_crop(16).batch(5))
            pairs = []
            with Loader(p, dispatcher=self.dispatcher, local_cores=0) as ld:
                it = iter(ld)
                for _ in range(2):
                    b = next(it)
                    pairs += [(k.path.split(":")[1], c) for k, c in zip(b.keys, b["caption"])]
                state = ld.state_dict()
            with Loader(p, dispatcher=self.dispatcher, local_cores=0, resume=state) as again:
                for b in again:
                    pairs += [(k.path.split(":")[1], c) for k, c in zip(b.keys, b["caption"])]
            self.assertEqual(sorted(pairs), sorted((k, v[0]) for k, v in want.items()))

    def test_service_rank_killed_and_resumed_while_the_other_runs(self):
        with tempfile.TemporaryDirectory() as d:
            other_file = os.path.join(d, "other.json")
            other = subprocess.Popen(trainer_argv(other_file, 0, 0, 2, self.dispatcher), env=TRAINER_ENV,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            keys = self.killed_and_resumed(5, rank=1, world=2)
            out, err = other.communicate(timeout=300)
            self.assertEqual(other.returncode, 0, err)
            with open(other_file) as f:
                keys += [tuple(k) for k in json.load(f)["keys"]]
        self.assertEqual(sorted(keys), sorted((e, s) for e in (0, 1) for s in range(160)))


if __name__ == "__main__":
    unittest.main()
