# tests/python/test_service.py - spillway.Loader through a real dispatcher and worker on 127.0.0.1 (port 0,
# killed in tearDown): with ordered=True and no local share, every batch (image; padded audio with lengths)
# and every key equals `spillctl run --local --dump` byte for byte, the elements came from the worker, and
# stats() reports the dispatcher's job; with no cut given and SPILLWAY_CUT unset the job is planned, "all" and
# an explicit cut override it, a bad cut is refused. Thread model: single-threaded (the daemons are processes).
import os
import unittest

import spwtest
from spillway import Loader, Pipeline
from test_loader import audio_pipeline, image_pipeline


class TestService(spwtest.ServiceCase, unittest.TestCase):
    def assert_service_equals_dump(self, pipeline):
        want, want_keys = spwtest.dump_local(pipeline.to_json(), self.tmp)
        with Loader(pipeline, dispatcher=self.service.address, ordered=True, local_cores=0) as loader:
            got = list(loader)
            st = loader.stats()
            self.assertEqual(len(loader), len(want))
        self.assertEqual(len(got), len(want))
        for i, (b, w) in enumerate(zip(got, want)):
            self.assertEqual(len(b), len(w))
            for j, (a, ref) in enumerate(zip(b, w)):
                self.assertTrue(spwtest.same_array(a, ref), "batch %d tensor %d differs from the dump" % (i, j))
        self.assertEqual(spwtest.key_lines(got), want_keys)
        self.assertGreater(st["job"], 0)
        self.assertEqual(st["elements"], len(want_keys))
        self.assertGreater(st["remote_elements"], 0)
        self.assertGreaterEqual(st["workers"], 1)
        return got

    def test_service_image_ordered_equals_local_dump(self):
        self.assert_service_equals_dump(image_pipeline())

    def test_service_padded_audio_ordered_equals_local_dump(self):
        got = self.assert_service_equals_dump(audio_pipeline())
        self.assertEqual(len(got[0]), 3)

    def test_service_fields_without_labels_equal_local_dump(self):
        """Captions, titles and raw .json bytes travel with their elements from the worker."""
        shard, want = spwtest.caption_shards(self.tmp)
        p = (Pipeline.tar_shards(shard, seed=3, labels=False,
                                 fields={"caption": {"from": "txt"}, "title": {"from": "json", "key": "title"},
                                         "meta": {"from": "json", "as": "raw"}}, epochs=1)
             .decode_jpeg().center_crop(16).batch(10))
        got = self.assert_service_equals_dump(p)
        pairs = [(k.path.split(":")[1], c, t, m) for b in got for k, c, t, m in
                 zip(b.keys, b["caption"], b["title"], b["meta"])]
        self.assertEqual(sorted(pairs), sorted((k,) + v for k, v in want.items()))

    def test_service_coco_boxes_equal_local_dump(self):
        """A COCO set's boxes come from the dispatcher's listing to the worker, and travel with their images
        through random crops and flips, equal to the in-process run."""
        import json
        import numpy as np
        from PIL import Image
        root = os.path.join(self.tmp, "coco")
        os.makedirs(root)
        images, anns = [], []
        for i in range(24):
            Image.fromarray(np.full((40 + i, 50, 3), 9 * i, np.uint8)).save(os.path.join(root, "i%02d.png" % i))
            images.append({"id": i, "file_name": "i%02d.png" % i, "width": 50, "height": 40 + i})
            for k in range(i % 4):
                anns.append({"image_id": i, "bbox": [3 * k, 2 + k, 20, 15], "category_id": k + 1, "iscrowd": 0})
        with open(os.path.join(self.tmp, "ann.json"), "w") as f:
            json.dump({"images": images, "annotations": anns}, f)
        p = (Pipeline.coco(root, os.path.join(self.tmp, "ann.json"), seed=4, epochs=1).decode_image()
             .random_resized_crop(32, scale=(0.3, 1.0)).random_horizontal_flip().batch(6))
        got = self.assert_service_equals_dump(p)
        self.assertEqual(got[0].names, ["data", "boxes", "boxes_labels", "boxes_counts"])
        t = got[0].targets
        self.assertEqual(len(t), 6)
        self.assertEqual(sorted(t[0]), ["boxes", "labels"])
        self.assertEqual(sum(len(d["labels"]) for b in got for d in b.targets) > 0, True)

    def test_service_default_cut_is_planned_and_explicit_cuts_override_it(self):
        pipeline = image_pipeline()
        _, want_keys = spwtest.dump_local(pipeline.to_json(), self.tmp)
        pinned = os.environ.pop("SPILLWAY_CUT")       # spwtest pins "all" for the other tests
        try:
            with Loader(pipeline, dispatcher=self.service.address, ordered=True) as loader:
                got = list(loader)
                st = loader.stats()
            self.assertTrue(st["planned"], st)
            self.assertEqual(spwtest.key_lines(got), want_keys)
            with Loader(pipeline, dispatcher=self.service.address, cut="all", local_cores=0, max_batches=2) as ld:
                list(ld)
                st = ld.stats()
            self.assertFalse(st["planned"], st)
            self.assertEqual(st["cut"], st["groups"])
            with Loader(pipeline, dispatcher=self.service.address, cut=1, local_cores=0, max_batches=2) as ld:
                list(ld)
                self.assertEqual((ld.stats()["cut"], ld.stats()["planned"]), (1, False))
            with self.assertRaises(Exception):
                Loader(pipeline, dispatcher=self.service.address, cut="sideways")
        finally:
            os.environ["SPILLWAY_CUT"] = pinned


if __name__ == "__main__":
    unittest.main()
