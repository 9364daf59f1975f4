# tests/python/test_ranks.py - data-parallel ranks in process: two (and three) Loaders as ranks of one job
# take disjoint samples whose union is the epoch, with equal batch counts per rank per epoch (the short share
# pads by repeating its first samples; with drop_remainder the long share drops its last); rank/world_size
# default from RANK/WORLD_SIZE like torch.distributed; a dispatcher with world_size > 1 and no job_name is
# refused (test_service_ranks.py runs ranks through the service). Thread model: single-threaded.
import os
import unittest

import spwtest
from spillway import Loader, Pipeline, SpillwayError


def pipeline(epochs=1, drop=False, batch=16):
    return (Pipeline.image_folder(spwtest.images(), seed=3, epochs=epochs)
            .decode_jpeg().center_crop(16).batch(batch, drop_remainder=drop))


def rank_epochs(world, rank, **opts):
    """{epoch: [sample indices in delivery order]} and the batch count per epoch, for one rank."""
    samples, batches = {}, {}
    with Loader(pipeline(**opts.pop("spec", {})), rank=rank, world_size=world, local_cores=2, **opts) as ld:
        for b in ld.batches():
            samples.setdefault(b.epoch, []).extend(k.sample for k in b.keys)
            batches[b.epoch] = batches.get(b.epoch, 0) + 1
    return samples, batches


class RanksTest(unittest.TestCase):
    def test_ranks_disjoint_union_is_the_epoch(self):
        # 160 samples in splits of 16: 10 splits, 5 per rank; 2 epochs, each reshuffled
        per_rank = [rank_epochs(2, r, split_size=16, spec={"epochs": 2}) for r in range(2)]
        for epoch in (0, 1):
            a, b = per_rank[0][0][epoch], per_rank[1][0][epoch]
            self.assertEqual(len(a), 80)
            self.assertEqual(len(b), 80)
            self.assertFalse(set(a) & set(b), "ranks share samples")
            self.assertEqual(sorted(a + b), list(range(160)))
            self.assertEqual(per_rank[0][1][epoch], per_rank[1][1][epoch])
        self.assertNotEqual(per_rank[0][0][0], per_rank[0][0][1], "epochs are reshuffled")

    def test_ranks_pad_or_drop_to_equal_batch_counts(self):
        # 160 samples in splits of 64 (64, 64, 32): rank 0 owns 96, rank 1 owns 64
        pad = [rank_epochs(2, r) for r in range(2)]
        self.assertEqual(pad[0][1], pad[1][1])                    # equal batch counts
        self.assertEqual(pad[0][1][0], 6)                         # 96 / 16 each
        self.assertEqual(len(set(pad[1][0][0])), 64)              # 32 of rank 1's 96 places repeat samples
        self.assertEqual(sorted(set(pad[0][0][0]) | set(pad[1][0][0])), list(range(160)))
        self.assertFalse(set(pad[0][0][0]) & set(pad[1][0][0]))
        drop = [rank_epochs(2, r, spec={"drop": True}) for r in range(2)]
        self.assertEqual(drop[0][1], drop[1][1])
        self.assertEqual(drop[0][1][0], 4)                        # 64 / 16 each: rank 0 leaves 32 out
        self.assertFalse(set(drop[0][0][0]) & set(drop[1][0][0]))

    def test_three_ranks_and_len(self):
        loaders = [Loader(pipeline(), rank=r, world_size=3, split_size=8, local_cores=1) for r in range(3)]
        try:
            self.assertEqual({len(ld) for ld in loaders}, {len(loaders[0])})
            seen = [set(k.sample for b in ld for k in b.keys) for ld in loaders]
            self.assertEqual(set().union(*seen), set(range(160)))
            self.assertEqual(sum(len(s) for s in seen), 160)
        finally:
            for ld in loaders:
                ld.close()

    def test_rank_from_environment(self):
        os.environ["RANK"], os.environ["WORLD_SIZE"] = "1", "2"
        try:
            with Loader(pipeline(), split_size=16, local_cores=1) as ld:
                self.assertEqual((ld.rank, ld.world_size), (1, 2))
                self.assertEqual(len(ld), 5)                      # 80 samples / 16
        finally:
            del os.environ["RANK"], os.environ["WORLD_SIZE"]

    def test_bad_rank_and_service_refused(self):
        with self.assertRaises(SpillwayError) as e:
            Loader(pipeline(), rank=2, world_size=2)
        self.assertIn("rank 2 of 2", str(e.exception))
        with self.assertRaises(SpillwayError) as e:
            Loader(pipeline(), dispatcher="127.0.0.1:1", world_size=2, rank=0)
        self.assertIn("give every rank the same job_name", str(e.exception))


if __name__ == "__main__":
    unittest.main()
