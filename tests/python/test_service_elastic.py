# tests/python/test_service_elastic.py - resuming a data-parallel run onto another world size through a real
# dispatcher and worker: two ranks of a named job stop mid-epoch (their job kept paused), three ranks resume
# from both states: the rest of the epoch is made in each new rank's process and divided among them (every
# sample exactly once but the padding), then the next epoch runs on the service as one job of the three ranks
# (named NAME-w3: the old ranks' job is still paused under NAME). Thread model: one thread drives all ranks in
# lockstep, as data-parallel trainers do.
import unittest
from collections import Counter

import spwtest
from spillway import Loader, Pipeline


def pipeline():
    return (Pipeline.image_folder(spwtest.images(), seed=7, epochs=2)
            .decode_jpeg().center_crop(16).batch(16))


class TestServiceElastic(spwtest.ServiceCase, unittest.TestCase):
    def test_two_ranks_onto_three_through_the_service(self):
        old = [Loader(pipeline(), dispatcher=self.service.address, job_name="elastic", rank=r, world_size=2,
                      split_size=16, local_cores=0) for r in range(2)]
        before, states = [], []
        try:
            its = [ld.batches() for ld in old]
            for _ in range(3):
                for it in its:
                    before.extend(k.sample for k in next(it).keys)
            states = [ld.state_dict() for ld in old]
            old_job = old[0].stats()["job"]
        finally:
            for ld in old:
                ld.close()
        self.assertEqual(len(before), 96)
        new = [Loader(pipeline(), dispatcher=self.service.address, job_name="elastic", rank=r, world_size=3,
                      resume=states, local_cores=1) for r in range(3)]
        got = {r: {} for r in range(3)}
        jobs, remote = set(), 0
        try:
            its = [ld.batches() for ld in new]
            live = set(range(3))
            while live:
                for r in sorted(live):
                    b = next(its[r], None)
                    if b is None:
                        live.discard(r)
                        continue
                    got[r].setdefault(b.epoch, []).append([k.sample for k in b.keys])
            for ld in new:
                jobs.add(ld.stats()["job"])
                remote += ld.stats()["remote_elements"]
                self.assertEqual(ld.state_dict().get("job_name"), "elastic-w3")
        finally:
            for ld in new:
                ld.close()
        rest = [s for r in range(3) for b in got[r][0] for s in b]
        counts = Counter(before + rest)
        self.assertEqual(set(counts), set(range(160)))
        self.assertFalse(set(before) & set(rest), "a delivered sample came again")
        self.assertEqual(sum(c - 1 for c in counts.values()), len(rest) - 64)     # the padding only
        self.assertLess(len(rest) - 64, 3)
        self.assertEqual(len({len(got[r][0]) for r in range(3)}), 1)               # equal batch counts
        whole = [s for r in range(3) for b in got[r][1] for s in b]
        self.assertEqual(set(whole), set(range(160)))
        self.assertEqual(len({len(got[r][1]) for r in range(3)}), 1)
        self.assertEqual(len(jobs), 1, "the new ranks did not share one job")
        self.assertNotEqual(jobs, {old_job})
        self.assertGreater(remote, 0, "epoch 1 did not run on the service")


if __name__ == "__main__":
    unittest.main()
