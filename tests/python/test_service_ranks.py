# tests/python/test_service_ranks.py - data-parallel ranks through a real dispatcher and worker: two Loaders
# with the same job_name share one job; with ordered=True each rank's batches equal the in-process rank's
# byte for byte (keys too), padding included (the short rank's repeated samples are made by its own client);
# unordered, the ranks' samples are disjoint, their union is every epoch and their batch counts are equal;
# ranks planned to run in their clients (--cut auto) all do, by name; joining a named job with another spec
# or world size is refused with a message. Thread model: one thread
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
        opts.setdefault("local_cores", 0)
        return [Loader(pipeline(**opts.pop("spec", {})), dispatcher=self.service.address, job_name=name, rank=r,
                       world_size=world, **opts) for r in range(world)]

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

    def test_planned_no_offload_holds_for_every_rank(self):
        # A trainer the client alone keeps up with: rank 0's plan runs it in its client; rank 1 is given the
        # same decision by name (not a job of its own on the service that rank 0 would never stream).
        loaders = self.ranks("local", cut="auto", trainer_rate=20, split_size=16, local_cores=1)
        try:
            got = lockstep(loaders)
            stats = [ld.stats() for ld in loaders]
        finally:
            for ld in loaders:
                ld.close()
        self.assertEqual([st["job"] for st in stats], [0, 0])
        self.assertTrue(all(st["planned"] and not st["offloaded"] for st in stats), stats)
        with open(self.tmp + "/dispatcher.err") as f:
            self.assertIn('no offload for rank 1 of job name "local", as planned for another rank', f.read())
        for epoch in (0, 1):
            mine = [[k.sample for b in got[r] if b.epoch == epoch for k in b.keys] for r in range(2)]
            self.assertFalse(set(mine[0]) & set(mine[1]))
            self.assertEqual(sorted(mine[0] + mine[1]), list(range(160)))

    def test_planned_offload_is_joined_by_every_rank(self):
        loaders = self.ranks("planned", cut="auto", split_size=16)    # no local share: it must offload
        try:
            got = lockstep(loaders)
            stats = [ld.stats() for ld in loaders]
        finally:
            for ld in loaders:
                ld.close()
        self.assertGreater(stats[0]["job"], 0)
        self.assertEqual(stats[0]["job"], stats[1]["job"])
        self.assertEqual(len(got[0]), len(got[1]))
        keys = sorted(k.sample for r in range(2) for b in got[r] if b.epoch == 0 for k in b.keys)
        self.assertEqual(keys, list(range(160)))

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
