# tests/python/test_service_ranks.py - data-parallel ranks through a real dispatcher and worker: two Loaders
# with the same job_name share one job; with ordered=True each rank's batches equal the in-process rank's
# byte for byte (keys too), padding included (the short rank's repeated samples are made by its own client);
# unordered, the ranks' samples are disjoint, their union is every epoch and their batch counts are equal;
# joining a named job with another spec or world size is refused with a message. Thread model: one thread
# drives both ranks, alternately, as lockstep data-parallel trainers do.
import unittest

import spwtest
from spillway import Loader, Pipeline, SpillwayError


def pipeline(epochs=2, batch=16, seed=3):
    return (Pipeline.image_folder(spwtest.images(), seed=seed, epochs=epochs)
            .decode_jpeg().center_crop(16).random_horizontal_flip().batch(batch))


def lockstep(loaders):
    """Every rank's batches, taking one batch from each rank in turn (as DDP ranks do)."""
    streams = [ld.batches() for ld in loaders]
    got = [[] for _ in loaders]
    live = set(range(len(loaders)))
    while live:
        for r in sorted(live):
            b = next(streams[r], None)
            if b is None:
                live.discard(r)
            else:
                got[r].append(b)
    return got


class TestServiceRanks(spwtest.ServiceCase, unittest.TestCase):
    def ranks(self, name, world=2, **opts):
        return [Loader(pipeline(**opts.pop("spec", {})), dispatcher=self.service.address, job_name=name, rank=r,
                       world_size=world, local_cores=0, **opts) for r in range(world)]

    def test_ordered_ranks_equal_in_process_ranks(self):
        # splits of 64 over 160 samples: rank 0 owns 96, rank 1 64 and pads 32 (repeating its first ones)
        loaders = self.ranks("ordered", ordered=True)
        try:
            got = lockstep(loaders)
            jobs = {ld.stats()["job"] for ld in loaders}
            remote = [ld.stats()["remote_elements"] for ld in loaders]
        finally:
            for ld in loaders:
                ld.close()
        self.assertEqual(len(jobs), 1, "the ranks did not share one job")
        self.assertTrue(all(n > 0 for n in remote), remote)
        for r in range(2):
            with Loader(pipeline(), rank=r, world_size=2, local_cores=1) as local:
                want = list(local.batches())
            self.assertEqual(len(got[r]), len(want))
            self.assertEqual(len(want), 12)                        # 6 batches of 16 per epoch, 2 epochs
            for i, (b, w) in enumerate(zip(got[r], want)):
                self.assertEqual([k.sample for k in b.keys], [k.sample for k in w.keys], "rank %d batch %d" % (r, i))
                for a, ref in zip(b, w):
                    self.assertTrue(spwtest.same_array(a, ref), "rank %d batch %d differs" % (r, i))

    def test_unordered_ranks_disjoint_union_equal_counts(self):
        loaders = self.ranks("unordered", split_size=16)
        try:
            got = lockstep(loaders)
        finally:
            for ld in loaders:
                ld.close()
        self.assertEqual(len(got[0]), len(got[1]))
        for epoch in (0, 1):
            mine = [[k.sample for b in got[r] if b.epoch == epoch for k in b.keys] for r in range(2)]
            self.assertEqual(len(mine[0]), 80)
            self.assertFalse(set(mine[0]) & set(mine[1]), "ranks share samples")
            self.assertEqual(sorted(mine[0] + mine[1]), list(range(160)))

    def test_joining_with_another_spec_or_world_is_refused(self):
        first = Loader(pipeline(), dispatcher=self.service.address, job_name="taken", rank=0, world_size=2,
                       local_cores=0)
        try:
            with self.assertRaises(SpillwayError) as e:
                Loader(pipeline(seed=4), dispatcher=self.service.address, job_name="taken", rank=1, world_size=2)
            self.assertIn("runs another pipeline", str(e.exception))
            with self.assertRaises(SpillwayError) as e:
                Loader(pipeline(), dispatcher=self.service.address, job_name="taken", rank=1, world_size=3)
            self.assertIn("world of 2 ranks", str(e.exception))
            with self.assertRaises(SpillwayError) as e:
                Loader(pipeline(), dispatcher=self.service.address, job_name="bad name!", rank=1, world_size=2)
            self.assertIn("job_name", str(e.exception))
        finally:
            first.close()


if __name__ == "__main__":
    unittest.main()
