# tests/python/test_loader.py - spillway.Loader in process: its numpy batches equal `spillctl run --local
# --dump` byte for byte (an image pipeline, and a padded audio one with lengths), keys included; the arrays
# view the C batch (no copy) and stay unchanged after later batches are fetched and after close(); 1000
# batches dropped as they come neither grow RSS nor leave a batch out; len(), classes, class_to_idx and
# stats() match the dataset, which also says the trainer's wait and each step's time (tqdm over a loader counts
# an epoch's batches); each iteration is one epoch (batches() the whole stream); errors and options
# come from C; use after os.fork() raises the documented RuntimeError (the Python check and the C library's
# SPW_EFORKED message); gpu=0 with the emulated CUDA plugin gives the same batches, and device_batches
# DLPack views of them that give every batch back. Thread model: single-threaded.
import gc
import glob
import io
import json
import os
import time
import unittest

import numpy as np

import spwtest
from spillway import Batch, ForkedError, Loader, Pipeline, SpecError, SpillwayError
from spillway.dlpack import DeviceTensor
from spillway.loader import FORK_MESSAGE


def image_pipeline(epochs=1):
    return (Pipeline.image_folder(spwtest.images(), seed=7, epochs=epochs)
            .decode_jpeg()
            .random_resized_crop(48, scale=(0.25, 1.0))
            .random_horizontal_flip()
            .rand_augment(2, 9)
            .normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
            .batch(24))


def audio_pipeline():
    return (Pipeline.wav_folder(spwtest.speech(), seed=11, epochs=1)
            .decode_wav()
            .stft(512, hop_length=160, win_length=400)
            .mel(80, 16000)
            .log(1e-6)
            .spec_augment(freq_mask_param=27, time_mask_param=100, num_time_masks=2)
            .batch(6))


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class TestLoader(spwtest.TempDir, unittest.TestCase):
    def assert_equals_dump(self, pipeline, **opts):
        want, want_keys = spwtest.dump_local(pipeline.to_json(), self.tmp)
        with Loader(pipeline, **opts) as loader:
            got = list(loader)          # all fetched before any is compared: earlier ones must still hold
        self.assertEqual(len(got), len(want))
        for i, (b, w) in enumerate(zip(got, want)):
            self.assertIsInstance(b, Batch)
            self.assertEqual(len(b), len(w), "batch %d: tensors" % i)
            for j, (a, ref) in enumerate(zip(b, w)):
                self.assertTrue(spwtest.same_array(a, ref), "batch %d tensor %d differs from the dump" % (i, j))
        self.assertEqual(spwtest.key_lines(got), want_keys)
        return got

    def test_loader_image_equals_c_dump(self):
        got = self.assert_equals_dump(image_pipeline(), local_cores=2)
        self.assertEqual(got[0].data.shape, (24, 3, 48, 48))
        self.assertEqual(got[0].data.dtype, np.float32)
        self.assertEqual(got[-1].n, 160 - 6 * 24)
        self.assertIsNone(got[0].lengths)
        self.assertEqual(got[0].names, ["data", "labels"])

    def test_loader_gpu_equals_c_dump(self):
        """gpu=0 with the host emulation of the CUDA plugin (the kernels' own per-pixel code): one more thread
        makes micro-batches on it, and the RandAugment batches still equal the CPU's dump byte for byte."""
        os.environ["SPILLWAY_GPU_PLUGIN"] = os.path.join(os.environ["SPW_BUILD"], "lib", "libspillway-gpuemu.so")
        with self.assertLogs("spillway", "INFO") as logs:     # the library's lines, through logging
            self.assert_equals_dump(image_pipeline(), gpu=0, gpu_mem_budget="64Mi", local_cores=1)
            gc.collect()
        text = "\n".join(r.getMessage() for r in logs.records)
        self.assertIn("gpu: making elements on device 0 (host emulation", text)
        self.assertIn("spillway.client", [r.name for r in logs.records])
        made = [int(line.split("gpu: ")[1].split()[0]) for line in text.splitlines() if "elements made on" in line]
        self.assertTrue(made and made[0] > 0, text)

    def test_loader_device_batches_are_dlpack_views(self):
        """device_batches with the emulated plugin (whose device memory is host memory, DLPack kDLCPU): the
        data is a DeviceTensor that numpy.from_dlpack views in place, equal to the dump; a capsule nobody
        consumes gives its batch back; once every view is gone no batch is out and the arena is empty."""
        os.environ["SPILLWAY_GPU_PLUGIN"] = os.path.join(os.environ["SPW_BUILD"], "lib", "libspillway-gpuemu.so")
        want, _ = spwtest.dump_local(image_pipeline().to_json(), self.tmp)
        with self.assertRaises(ValueError):
            Loader(image_pipeline(), device_batches=True)
        loader = Loader(image_pipeline(), gpu=0, gpu_mem_budget="64Mi", device_batches=True, local_cores=1)
        views = []
        for b, w in zip(loader, want):
            self.assertIsInstance(b.data, DeviceTensor)
            self.assertEqual((b.data.device, b.data.shape, b.data.dtype), ((1, 0), w[0].shape, "float32"))
            cap = b.data.__dlpack__()           # never consumed: its destructor deletes the tensor
            del cap
            a = np.from_dlpack(b.data)
            self.assertEqual(a.__array_interface__["data"][0], b._owner.addresses[0])     # no copy
            views.append((a, b.labels))
            del b
        for (a, labels), w in zip(views, want):  # all held at once: none was reused
            self.assertTrue(spwtest.same_array(a, w[0]) and spwtest.same_array(labels, w[1]))
        st = loader.stats()
        self.assertEqual(st["device_batches"], len(want))
        self.assertGreater(st["gpu_elements"], 0)
        self.assertGreater(st["gpu_arena_used"], 0)
        self.assertEqual(loader._job.out, len(want))
        del views, a, labels
        gc.collect()
        self.assertEqual(loader._job.out, 0)
        self.assertEqual(loader.stats()["gpu_arena_used"], 0)
        loader.close()

    def test_loader_uint8_chw_equals_c_dump(self):
        p = (Pipeline.image_folder(spwtest.images(), seed=3, epochs=1).decode_jpeg().random_crop(40, pad_if_needed=True)
             .batch(32, drop_remainder=True, layout="CHW"))
        got = self.assert_equals_dump(p, local_cores=1)
        self.assertEqual((got[0].data.dtype, got[0].data.shape), (np.uint8, (32, 3, 40, 40)))

    def test_loader_fields_without_labels(self):
        """source.labels false and source.fields: no labels part; captions as str, titles out of the .json,
        the .json itself as bytes, by name and in batch.fields; the tuple holds their padded bytes and
        lengths (equal to the C dump)."""
        shard, want = spwtest.caption_shards(self.tmp)
        p = (Pipeline.tar_shards(shard, seed=3, labels=False,
                                 fields={"caption": {"from": "txt"}, "title": {"from": "json", "key": "title"},
                                         "meta": {"from": "json", "as": "raw"}}, epochs=1)
             .decode_jpeg().center_crop(16).batch(10))
        got = self.assert_equals_dump(p, local_cores=2)
        b = got[0]
        self.assertEqual(b.names, ["data", "caption", "caption_lengths", "title", "title_lengths", "meta",
                                   "meta_lengths"])
        self.assertIsNone(b.labels)
        self.assertEqual(b["caption"][0], want[b.keys[0].path.split(":")[1]][0])
        self.assertEqual(set(b.fields), {"caption", "title", "meta"})
        seen = set()
        for b in got:
            for k, c, t, m in zip(b.keys, b["caption"], b["title"], b["meta"]):
                member = k.path.split(":")[1]
                self.assertEqual((c, t, m), want[member])
                self.assertIsInstance(m, bytes)
                seen.add(member)
        self.assertEqual(seen, set(want))

    def test_loader_image_folder_without_labels_any_nesting(self):
        """labels=False on a folder: every image at any depth, no classes, batches without labels."""
        root = os.path.join(self.tmp, "flat")
        for sub in ("", "a", os.path.join("a", "b", "c")):
            os.makedirs(os.path.join(root, sub), exist_ok=True)
        imgs = sorted(glob.glob(os.path.join(spwtest.images(), "*", "*.JPEG")))[:9]
        for i, img in enumerate(imgs):
            sub = ("", "a", os.path.join("a", "b", "c"))[i % 3]
            with open(img, "rb") as f, open(os.path.join(root, sub, "i%d.jpg" % i), "wb") as g:
                g.write(f.read())
        p = Pipeline.image_folder(root, shuffle=False, labels=False, epochs=1).decode_jpeg().center_crop(8).batch(4)
        with Loader(p, local_cores=1) as loader:
            got = list(loader)
            self.assertEqual(loader.classes, [])
        self.assertEqual([b.names for b in got], [["data"]] * 3)
        self.assertEqual(sum(b.n for b in got), 9)
        paths = [os.path.relpath(k.path, root) for b in got for k in b.keys]
        self.assertEqual(paths, ["i0.jpg", "i3.jpg", "i6.jpg", "a/i1.jpg", "a/i4.jpg", "a/i7.jpg",
                                 "a/b/c/i2.jpg", "a/b/c/i5.jpg", "a/b/c/i8.jpg"])
        with self.assertRaisesRegex(SpecError, "batch.mix: mixes labels, and source.labels is false"):
            Loader(Pipeline.image_folder(root, labels=False, epochs=1).decode_jpeg().center_crop(8).normalize(
                [0.5] * 3, [0.5] * 3).batch(4, mix={"num_classes": 2, "mixup_alpha": 0.2}))

    def test_loader_padded_audio_equals_c_dump(self):
        got = self.assert_equals_dump(audio_pipeline(), local_cores=2)
        data, labels, lengths = got[0]
        self.assertEqual((data.dtype, labels.dtype, lengths.dtype), (np.float32, np.int64, np.int64))
        self.assertEqual(data.shape[:2], (6, 80))
        self.assertEqual(data.shape[2], lengths.max())
        self.assertTrue(np.all(data[np.argmin(lengths), :, lengths.min():] == 0))   # the padding
        b = got[0]
        self.assertEqual(b.names, ["data", "labels", "lengths"])
        self.assertIs(b["lengths"], b.lengths)
        self.assertIs(b["labels"], b[1])
        self.assertIn("lengths", b)
        self.assertEqual(b.n, 6)
        with self.assertRaisesRegex(KeyError, "no part 'caption'.*data, labels, lengths"):
            b["caption"]
        self.assertIsNone(b.get("caption"))

    def test_loader_arrays_view_the_batch(self):
        with Loader(image_pipeline(), local_cores=1) as loader:
            it = iter(loader)
            b = next(it)
            for a, address in zip(b, b._owner.addresses):
                self.assertEqual(a.__array_interface__["data"][0], address)      # no copy
                self.assertTrue(a.flags.c_contiguous)
            data = b.data
            copy = data.copy()
            del b, a
            rest = list(it)             # the views' batch is still out: its memory is not reused
            self.assertEqual(loader._job.out, 1 + len(rest))
            self.assertTrue(spwtest.same_array(data, copy))
            del rest
            self.assertEqual(loader._job.out, 1)
            del data
            self.assertEqual(loader._job.out, 0)      # released when the last view died

    def test_loader_held_references_stay_valid(self):
        p = (Pipeline.image_folder(spwtest.images(), seed=5, epochs=5).decode_jpeg().random_resized_crop(32)
             .batch(8))
        held, copies = [], []
        with Loader(p, local_cores=2) as loader:
            for i, b in enumerate(loader.batches()):
                if i % 7 == 0:
                    held.append(b.labels if i % 2 else b.data)     # hold one array, drop the batch
                    copies.append(held[-1].copy())
            del b
            self.assertEqual(i + 1, 100)
            self.assertEqual(loader._job.out, len(held))
        for h, c in zip(held, copies):      # after 100 batches (and close): unchanged
            self.assertTrue(spwtest.same_array(h, c))
        job = loader._job
        self.assertIsNotNone(job.ptr)       # closed, but batches are out: not destroyed yet
        del h, held[:-1]
        self.assertIsNotNone(job.ptr)
        self.assertEqual(job.out, 1)
        del held
        gc.collect()
        self.assertIsNone(job.ptr)          # the last batch took the job with it
        self.assertEqual(job.out, 0)

    def test_loader_no_memory_growth_over_1000_batches(self):
        p = (Pipeline.image_folder(spwtest.images(), seed=1, epochs=25).decode_jpeg().random_resized_crop(64)
             .to_tensor().batch(4))            # 196 kB a batch: 900 leaked batches would be 176 MB
        with Loader(p, local_cores=2) as loader:
            n = 0
            for b in loader.batches():
                n += 1
                float(b.data[0, 0, 0, 0]) + len(b.keys)   # touch data and keys, then drop them
                if n == 100:
                    gc.collect()
                    before = rss_bytes()
            del b
            gc.collect()
            growth = rss_bytes() - before
            self.assertEqual(n, 1000)
            self.assertEqual(loader._job.out, 0)
            self.assertLess(growth, 16 << 20, "RSS grew %.1f MB over 900 batches" % (growth / 1e6))
            self.assertEqual(loader.stats()["batches"], 1000)

    def test_loader_len_classes_stats(self):
        train = spwtest.images()
        names = sorted(os.listdir(train))
        for size, drop, want in ((48, False, 4), (48, True, 3), (32, False, 5)):
            p = Pipeline.image_folder(train, shuffle=False, epochs=1).decode_jpeg().center_crop(16).batch(size, drop)
            with Loader(p, local_cores=1) as loader:
                self.assertEqual(len(loader), want)
                self.assertEqual(loader.classes, names)
                self.assertEqual(loader.class_to_idx, {c: i for i, c in enumerate(names)})
                batches = list(loader)
                self.assertEqual(len(batches), want)
                for b in batches:       # unshuffled: labels are the folders' indices
                    for k, label in zip(b.keys, b.labels):
                        self.assertEqual(names[label], os.path.basename(os.path.dirname(k.path)))
                st = loader.stats()
                self.assertEqual((st["samples"], st["batches"]), (160, want))
                self.assertEqual(st["elements"], sum(b.n for b in batches))
                self.assertEqual((st["job"], st["skipped"], st["planned"]), (0, 0, False))
                del batches, b
        with Loader(audio_pipeline(), local_cores=1) as loader:
            self.assertEqual(len(loader), 4)
            self.assertEqual(loader.classes, sorted(os.listdir(spwtest.speech())))

    def test_loader_iterates_one_epoch_at_a_time(self):
        with Loader(image_pipeline(epochs=3), local_cores=2) as loader:
            epochs = [[b.epoch for b in loader] for _ in range(3)]
            self.assertEqual(epochs, [[0] * 7, [1] * 7, [2] * 7])
            with self.assertRaisesRegex(SpillwayError, "all 3 epochs"):     # never a silently empty epoch
                list(loader)
        with Loader(image_pipeline(epochs=2), local_cores=2) as loader:
            it = iter(loader)
            next(it)
            self.assertEqual([b.epoch for b in loader.batches()], [0] * 6 + [1] * 7)

    def test_loader_dataloader_habits(self):
        """The torch DataLoader's rules: epochs=None by default (a 3-epoch loop runs), each iteration is the
        next epoch (after a break too, without producing the broken epoch's rest), len() per epoch,
        set_epoch ahead and back, max_batches counted across it all."""
        natural = {}
        with Loader(image_pipeline(epochs=None), local_cores=2) as loader:
            self.assertEqual(len(loader), 7)
            for epoch in range(4):
                keys = [k for b in loader for k in b.keys]
                self.assertEqual({k.epoch for k in keys}, {epoch})
                self.assertEqual(sorted(k.sample for k in keys), list(range(160)))  # each sample once
                natural[epoch] = [k.sample for k in keys]
        with Loader(image_pipeline(epochs=None), local_cores=2) as loader:
            for epoch in range(3):              # limit_train_batches=2
                for i, b in enumerate(loader):
                    self.assertEqual(b.epoch, epoch)
                    if i == 1:
                        break
            keys = [k for b in loader for k in b.keys]     # after a break: the next epoch, whole, in order
            self.assertEqual([k.sample for k in keys], natural[3])
        with Loader(image_pipeline(epochs=None), local_cores=2) as loader:
            loader.set_epoch(2)
            self.assertEqual([k.sample for b in loader for k in b.keys], natural[2])
            loader.set_epoch(1)                 # back
            self.assertEqual([k.sample for b in loader for k in b.keys], natural[1])
            self.assertEqual({b.epoch for b in loader}, {2})    # then on in turn
            loader.set_epoch(3)                 # the one it would start anyway: no restart
            job = loader._job
            self.assertEqual({b.epoch for b in loader}, {3})
            self.assertIs(loader._job, job)
            with self.assertRaisesRegex(ValueError, "epoch number"):
                loader.set_epoch(-1)
        with Loader(image_pipeline(epochs=2).to_json(), local_cores=2, max_batches=9) as loader:
            it = iter(loader)
            self.assertEqual([next(it).epoch for _ in range(3)], [0] * 3)
            del it                              # a break: the next iteration is the next epoch
            self.assertEqual([b.epoch for b in loader], [1] * 6)    # max_batches: 3 + 6
            with self.assertRaisesRegex(SpillwayError, "max_batches=9"):
                list(loader)
        with Loader(image_pipeline(epochs=2), local_cores=2) as loader:
            it = iter(loader)
            next(it)
            del it
            self.assertEqual({b.epoch for b in loader}, {1})
            with self.assertRaisesRegex(SpillwayError, "all 2 epochs"):
                list(loader)

    def test_loader_tqdm_and_where_the_time_went(self):
        """tqdm(loader) counts one epoch's batches against len(loader); stats() says where the trainer's time
        went in process: its wait in next() (a trainer faster than one producing core waits more of its time
        than one that sleeps per batch) and each pipeline step's time per element."""
        from tqdm import tqdm
        fractions = []
        for sleep in (0.0, 0.05):
            with Loader(image_pipeline(epochs=None), local_cores=1) as loader:
                for _ in range(2):
                    out = io.StringIO()
                    bar = tqdm(loader, file=out, mininterval=0)
                    self.assertEqual(bar.total, 7)
                    for _b in bar:
                        time.sleep(sleep)
                    self.assertEqual(bar.n, 7)
                    bar.close()
                    self.assertIn("7/7", out.getvalue())
                del _b
                st = loader.stats()
                self.assertTrue(0 <= st["wait_s"] <= st["elapsed_s"], st)
                self.assertAlmostEqual(st["wait_fraction"], st["wait_s"] / st["elapsed_s"], delta=0.05)
                self.assertGreaterEqual(st["starved_s"], 0)
                fractions.append(st["wait_fraction"])
                ops = st["ops"]
                self.assertTrue(ops, st)
                self.assertIn("decode_jpeg", ops[0]["op"])
                self.assertIn("normalize", ops[-1]["op"])
                for op in ops:
                    self.assertGreaterEqual(op["elements"], 320)     # two epochs made, at least
                    self.assertGreater(op["us_per_element"], 0)
                    self.assertAlmostEqual(op["us_per_element"], op["seconds"] * 1e6 / op["elements"], delta=0.01)
        self.assertGreater(fractions[0], 0.3, fractions)     # fast trainer: waits for its one core
        self.assertLess(fractions[1], fractions[0] / 2, fractions)

    def test_loader_errors(self):
        with self.assertRaises(SpillwayError) as cm:
            Loader(Pipeline.image_folder(os.path.join(self.tmp, "none"), epochs=1).decode_jpeg().batch(4))
        self.assertNotIsInstance(cm.exception, SpecError)
        self.assertIn("none", str(cm.exception))
        with self.assertRaises(ValueError):
            Loader(image_pipeline(), cut="sometimes")   # refused by spw_job_opts_set
        with self.assertRaises(SpecError):
            Loader(json.dumps({"source": {}, "ops": [], "batch": {"size": 1}}))
        loader = Loader(image_pipeline(), local_cores=1)
        loader.close()
        with self.assertRaises(SpillwayError):
            iter(loader)

    def test_loader_after_fork_raises(self):
        loader = Loader(image_pipeline(), local_cores=2)
        it = iter(loader)
        first = next(it)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:                    # the child: report through the pipe, never return into unittest
            code = 0
            try:
                msgs = []
                for use in (lambda: next(it), lambda: iter(loader), lambda: len(loader), lambda: loader.classes,
                            lambda: loader._job.next()):    # the last one skips the Python check: C's EFORKED
                    try:
                        use()
                        msgs.append("no error")
                    except RuntimeError as e:
                        msgs.append("%s: %s" % (type(e).__name__, e))
                loader.close()          # a no-op here
                del first               # nor does dropping the parent's batch touch the job
                gc.collect()
                os.write(w, json.dumps(msgs).encode())
            except BaseException as e:
                os.write(w, json.dumps(["child failed: %r" % e]).encode())
                code = 1
            os._exit(code)
        os.close(w)
        with os.fdopen(r) as f:
            msgs = json.loads(f.read())
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, msgs)
        self.assertEqual(len(msgs), 5, msgs)
        for m in msgs:
            self.assertTrue(m.startswith(ForkedError.__name__ + ": "), m)
            self.assertIn(FORK_MESSAGE, m)
            self.assertIn("num_workers=0", m)
        self.assertIn("libspillway: this Spillway job was created in process %d and used in a forked child"
                      % os.getpid(), msgs[4])
        self.assertEqual(len(list(it)), 6)              # the parent goes on
        self.assertEqual(first.n, 24)
        loader.close()


if __name__ == "__main__":
    unittest.main()
