# tests/python/test_torch.py - spillway.torch: tensors share memory with the C batch (data_ptr is the
# batch's address, torch.from_numpy over the views), equal the C dump, and survive the next batches;
# loader() is a DataLoader(num_workers=0) passing batches through; dtype converts the data only;
# DataLoader(num_workers=2) fails at once with the documented message (fork: iter() in the worker; spawn:
# pickling); len, classes, class_to_idx and set_epoch; with views, one tensor per view instance, dtype
# converting every one. Thread model: single-threaded.
import os
import unittest
import warnings

import torch
import torch.utils.data

import spwtest
from spillway import Batch, Pipeline, SpecError, SpillwayError, ops, view
from spillway.torch import FORK_MESSAGE, SpillwayDataset, loader
from test_loader import audio_pipeline, image_pipeline


class TestTorch(spwtest.TempDir, unittest.TestCase):
    def test_torch_tensors_share_memory_and_survive(self):
        want, want_keys = spwtest.dump_local(image_pipeline().to_json(), self.tmp)
        with SpillwayDataset(image_pipeline(), local_cores=2) as ds:
            it = iter(ds)
            first = next(it)
            self.assertIsInstance(first, Batch)
            for t, address in zip(first, first._owner.addresses):
                self.assertIsInstance(t, torch.Tensor)
                self.assertEqual(t.data_ptr(), address)             # the C batch's memory: no copy
                self.assertEqual(t.data_ptr(), t.numpy().__array_interface__["data"][0])
            data, labels = first
            saved = data.clone()
            first_keys = spwtest.key_lines([first])
            del first
            rest = list(it)                 # fetch every later batch while the first one's tensors live
            self.assertTrue(torch.equal(data, saved))
            self.assertEqual(data.numpy().tobytes(), want[0][0].tobytes())
            self.assertEqual(labels.numpy().tobytes(), want[0][1].tobytes())
            for b, w in zip(rest, want[1:]):
                self.assertEqual([t.numpy().tobytes() for t in b], [a.tobytes() for a in w])
            self.assertEqual(first_keys + spwtest.key_lines(rest), want_keys)
            self.assertEqual(ds._loader._job.out, 1 + len(rest))
            del data, labels, rest, b, t
            self.assertEqual(ds._loader._job.out, 0)

    def test_torch_device_batches_through_dlpack(self):
        """gpu=0, device_batches with the emulated plugin (its device memory is host memory): the data tensor
        is torch.from_dlpack over the library's block (data_ptr is the batch's address), equal to the dump
        and unchanged while later batches come; the tensor's deleter gives the batch back."""
        os.environ["SPILLWAY_GPU_PLUGIN"] = os.path.join(os.environ["SPW_BUILD"], "lib", "libspillway-gpuemu.so")
        want, _ = spwtest.dump_local(image_pipeline().to_json(), self.tmp)
        with SpillwayDataset(image_pipeline(), gpu=0, device_batches=True, gpu_mem_budget="64Mi",
                             local_cores=1) as ds:
            got = []
            for b in ds:
                data, labels = b
                self.assertEqual(data.data_ptr(), b._owner.addresses[0])    # the library's block: no copy
                got.append((data, labels))
                del b
            for (data, labels), w in zip(got, want):
                self.assertEqual(data.numpy().tobytes(), w[0].tobytes())
                self.assertEqual(labels.numpy().tobytes(), w[1].tobytes())
            self.assertEqual(ds.stats()["device_batches"], len(want))
            self.assertEqual(ds._loader._job.out, len(want))
            del got, data, labels
            self.assertEqual(ds._loader._job.out, 0)
            self.assertEqual(ds.stats()["gpu_arena_used"], 0)

    def test_torch_loader_helper_passes_batches_through(self):
        dl = loader(audio_pipeline(), local_cores=2)
        self.assertIsInstance(dl, torch.utils.data.DataLoader)
        self.assertEqual(len(dl), 4)
        want, want_keys = spwtest.dump_local(audio_pipeline().to_json(), self.tmp)
        got = list(dl)
        self.assertEqual(len(got), len(want))
        for b, w in zip(got, want):
            self.assertEqual(len(b), 3)     # padded: data, labels, lengths
            for t, a in zip(b, w):
                self.assertEqual((str(t.dtype), tuple(t.shape)), ("torch." + str(a.dtype), a.shape))
                self.assertEqual(t.numpy().tobytes(), a.tobytes())
        self.assertEqual(spwtest.key_lines(got), want_keys)
        dl.dataset.close()

    def test_torch_dtype_converts_data_only(self):
        p = Pipeline.image_folder(spwtest.images(), seed=2, epochs=1).decode_jpeg().center_crop(16).batch(32)
        with SpillwayDataset(p, dtype="float32", local_cores=1) as ds:
            data, labels = next(iter(ds))
            self.assertEqual((data.dtype, labels.dtype), (torch.float32, torch.int64))
            self.assertGreater(float(data.max()), 1.0)          # no scaling: pixel values as they were
        with SpillwayDataset(p, local_cores=1) as ds:
            self.assertEqual(next(iter(ds))[0].dtype, torch.uint8)
        with self.assertRaises(ValueError):
            SpillwayDataset(p, dtype="float33")

    def test_torch_views_as_tensors(self):
        p = (Pipeline.image_folder(spwtest.images(), seed=4, epochs=1).decode_jpeg()
             .views(view([ops.random_resized_crop(24)], repeat=2), view([ops.center_crop(8)])).batch(16))
        with SpillwayDataset(p, dtype="float32", local_cores=1) as ds:
            b = next(iter(ds))
            self.assertEqual(len(b), 4)
            self.assertEqual([tuple(v.shape) for v in b.views], [(16, 24, 24, 3)] * 2 + [(16, 8, 8, 3)])
            self.assertEqual({v.dtype for v in b.data}, {torch.float32})   # every view converted
            self.assertEqual(b.labels.dtype, torch.int64)

    def test_torch_one_channel_outputs(self):
        """grayscale(1): [n, 1, H, W] tensors after normalize, [n, H, W, 1] uint8 images without; refused where
        the image needs three channels, naming the op."""
        p = (Pipeline.image_folder(spwtest.images(), seed=4, epochs=1).decode_jpeg().center_crop(20).grayscale(1)
             .normalize([0.5], [0.25]).batch(8))
        with SpillwayDataset(p, local_cores=1) as ds:
            b = next(iter(ds))
            self.assertEqual((tuple(b.data.shape), b.data.dtype), ((8, 1, 20, 20), torch.float32))
        p = Pipeline.image_folder(spwtest.images(), seed=4, epochs=1).decode_jpeg().center_crop(20).grayscale(1).batch(8)
        with SpillwayDataset(p, local_cores=1) as ds:
            self.assertEqual(tuple(next(iter(ds)).data.shape), (8, 20, 20, 1))
        p = Pipeline.image_folder(spwtest.images(), epochs=1).decode_jpeg().center_crop(20).grayscale(1).aug_mix().batch(8)
        with self.assertRaisesRegex(SpecError, r'^ops\[3\]: "aug_mix" after a grayscale with num_output_channels 1'):
            SpillwayDataset(p, local_cores=1)

    def test_torch_fields_by_name(self):
        """source.fields through SpillwayDataset: the tensors are torch's, the captions still str by name."""
        shard, want = spwtest.caption_shards(self.tmp, 12)
        p = (Pipeline.tar_shards(shard, seed=3, labels=False, fields={"caption": {"from": "txt"}}, epochs=1)
             .decode_jpeg().center_crop(16).batch(6))
        with SpillwayDataset(p, dtype="float32", local_cores=1) as ds:
            b = next(iter(ds))
            self.assertIsInstance(b.data, torch.Tensor)
            self.assertIsInstance(b[1], torch.Tensor)           # the padded caption bytes
            self.assertIsNone(b.labels)
            self.assertEqual(b["caption"], [want[k.path.split(":")[1]][0] for k in b.keys])

    def test_torch_pin_memory_without_cuda_is_a_noop(self):
        if torch.cuda.is_available():
            self.skipTest("CUDA is available: pin_memory pins")
        p = Pipeline.image_folder(spwtest.images(), epochs=1).decode_jpeg().center_crop(16).batch(32)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            ds = SpillwayDataset(p, pin_memory=True, local_cores=1)
        self.assertTrue(any("pin_memory" in str(x.message) for x in w))
        b = next(iter(ds))
        self.assertEqual(b[0].data_ptr(), b._owner.addresses[0])
        ds.close()

    def test_torch_dataloader_workers_raise(self):
        ds = SpillwayDataset(image_pipeline(), local_cores=1)
        for ctx in ("fork", "spawn"):
            dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=ctx)
            with self.assertRaises(RuntimeError) as cm:
                next(iter(dl))
            self.assertIn(FORK_MESSAGE, str(cm.exception), ctx)
            self.assertIn("num_workers=0", str(cm.exception))
        self.assertEqual(next(iter(ds))[0].shape, (24, 3, 48, 48))     # in this process it works
        ds.close()

    def test_torch_len_classes_set_epoch(self):
        with SpillwayDataset(image_pipeline(epochs=3), local_cores=1) as ds:
            self.assertEqual(len(ds), 7)
            names = sorted(os.listdir(spwtest.images()))
            self.assertEqual(ds.classes, names)
            self.assertEqual(ds.class_to_idx, {c: i for i, c in enumerate(names)})
            dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
            self.assertEqual(len(dl), 7)
            counts = []
            with warnings.catch_warnings():
                warnings.simplefilter("error")          # e.g. DataLoader's "length ... was reported to be"
                for epoch in range(3):                  # the usual loop: one iteration per epoch
                    ds.set_epoch(epoch)
                    self.assertEqual(ds.epoch, epoch)
                    counts.append(sum(1 for _ in dl))   # a plain DataLoader: items become lists
            self.assertEqual(counts, [7, 7, 7])
            with self.assertRaisesRegex(SpillwayError, "all 3 epochs"):    # a 4th epoch: the spec has 3
                sum(1 for _ in dl)


if __name__ == "__main__":
    unittest.main()
