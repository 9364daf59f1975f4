# tests/python/test_elastic.py - resuming a data-parallel run onto another world size (elastic training), in
# process: two ranks stop mid-epoch, and 1 or 3 ranks resume from both ranks' states: the rest of the epoch is
# divided among them (every sample of the epoch exactly once across the change, but for the padding that keeps
# the new ranks' batch counts equal), then the next epoch runs at the new size; a state taken during the rest
# resumes it; mismatched lists are refused. Through a dispatcher: test_service_elastic.py. Single-threaded.
import unittest
from collections import Counter

import spwtest
from spillway import Loader, Pipeline, SpillwayError


def pipeline():
    return (Pipeline.image_folder(spwtest.images(), seed=5, epochs=2)
            .decode_jpeg().center_crop(16).batch(16))


def old_run(steps=3, world=2):
    """`world` ranks each take `steps` batches of epoch 0; their states and the samples they delivered."""
    states, seen = [], []
    for r in range(world):
        with Loader(pipeline(), rank=r, world_size=world, split_size=16, local_cores=1) as ld:
            it = iter(ld)
            for _ in range(steps):
                seen.extend(k.sample for k in next(it).keys)
            states.append(ld.state_dict())
    return states, seen


def new_run(states, world):
    """{rank: {epoch: [samples]}} and {rank: {epoch: batches}} of `world` ranks resumed from states."""
    samples, batches = {}, {}
    for r in range(world):
        with Loader(pipeline(), rank=r, world_size=world, resume=states, local_cores=1) as ld:
            for epoch in (0, 1):
                ld.set_epoch(epoch)         # as spillway.torch's DistributedSampler habit does
                for b in ld:
                    self_e = samples.setdefault(r, {}).setdefault(b.epoch, [])
                    self_e.extend(k.sample for k in b.keys)
                    batches.setdefault(r, Counter())[b.epoch] += 1
    return samples, batches


class ElasticTest(unittest.TestCase):
    def check_change(self, world):
        states, before = old_run()
        self.assertEqual(len(before), 96)
        samples, batches = new_run(states, world)
        rest = [s for r in range(world) for s in samples[r].get(0, [])]
        counts = Counter(before + rest)
        self.assertEqual(set(counts), set(range(160)), "every sample of epoch 0")
        self.assertFalse(set(before) & set(rest), "a delivered sample came again")
        pad = len(rest) - 64                        # 64 left: the new ranks' equal shares pad the short ones
        self.assertTrue(0 <= pad < world, pad)
        self.assertEqual(sum(c - 1 for c in counts.values()), pad)
        self.assertEqual(len({batches[r][0] for r in range(world)}), 1, batches)    # equal batch counts
        whole = [s for r in range(world) for s in samples[r][1]]
        self.assertEqual(set(whole), set(range(160)), "epoch 1 at the new world size")
        self.assertEqual(len({batches[r][1] for r in range(world)}), 1, batches)
        return samples

    def test_two_ranks_onto_one(self):
        samples = self.check_change(1)
        self.assertEqual(len(samples[0][0]), 64)
        self.assertEqual(len(samples[0][1]), 160)

    def test_two_ranks_onto_three(self):
        self.check_change(3)

    def test_state_in_the_rest_resumes_it(self):
        states, before = old_run()
        got = []
        with Loader(pipeline(), rank=0, world_size=1, resume=states, local_cores=1) as ld:
            it = iter(ld)
            got.extend(k.sample for k in next(it).keys)
            mid = ld.state_dict()
        self.assertTrue(mid.get("rest_of"))
        with Loader(pipeline(), rank=0, world_size=1, resume=mid, local_cores=1) as ld:
            epochs = Counter()
            for b in ld.batches():
                epochs[b.epoch] += len(b.keys)
                if b.epoch == 0:
                    got.extend(k.sample for k in b.keys)
        self.assertEqual(sorted(before + got), list(range(160)))
        self.assertEqual(epochs[1], 160)
        with self.assertRaisesRegex(ValueError, "rest of an epoch"):
            Loader(pipeline(), rank=0, world_size=2, resume=mid)
        other = (Pipeline.image_folder(spwtest.images(), seed=6, epochs=2).decode_jpeg().center_crop(16).batch(16))
        with self.assertRaisesRegex(ValueError, "another spec"):
            Loader(other, rank=0, world_size=1, resume=mid)

    def test_broken_states_are_refused_naming_why(self):
        # states that lie or were taken apart: each refused with the reason, nothing made
        states, _ = old_run(steps=1)
        bad = [dict(s) for s in states]
        bad[1]["manifest"] = "%016x" % (int(bad[1]["manifest"], 16) ^ 1)       # another listing
        with self.assertRaisesRegex(SpillwayError, "rank 1's checkpoint was taken on another dataset listing"):
            Loader(pipeline(), rank=0, world_size=1, resume=bad)
        bad = [dict(s) for s in states]
        bad[1]["batches"] = states[1]["batches"] + len(Loader(pipeline(), rank=1, world_size=2, split_size=16))
        with self.assertRaisesRegex(SpillwayError, "from different epochs"):
            Loader(pipeline(), rank=0, world_size=1, resume=bad)
        bad = [dict(s) for s in states]
        bad[0]["places"] = "ff"                                                  # a bitmap of the wrong length
        with self.assertRaisesRegex(SpillwayError, "bitmap does not fit"):
            Loader(pipeline(), rank=0, world_size=1, resume=bad)
        bad[0]["places"] = "zz"                                                  # not hex
        with self.assertRaises(ValueError):
            Loader(pipeline(), rank=0, world_size=1, resume=bad)

    def test_refusals(self):
        states, _ = old_run(steps=1)
        with self.assertRaisesRegex(ValueError, "give every old rank's state_dict"):
            Loader(pipeline(), rank=0, world_size=1, resume=states[0])
        with self.assertRaisesRegex(ValueError, "rank order"):
            Loader(pipeline(), rank=0, world_size=1, resume=[states[1], states[0]])
        other = (Pipeline.image_folder(spwtest.images(), seed=6, epochs=2).decode_jpeg().center_crop(16).batch(16))
        with self.assertRaisesRegex(ValueError, "another spec"):
            Loader(other, rank=0, world_size=1, resume=states)
        # the same world size: a list is each rank's own state
        with Loader(pipeline(), rank=1, world_size=2, resume=states, local_cores=1) as ld:
            self.assertEqual(ld.state_dict()["batches"], 1)


if __name__ == "__main__":
    unittest.main()
