# tests/python/test_pipeline.py - the Pipeline builder: builder -> JSON -> builder is the same pipeline;
# the builder's JSON passes `spillctl validate` with the canonical form of a hand-written equivalent (image
# and audio); positional arguments land in each op's main fields; a field the op does not have is a
# TypeError at the call (through op() it reaches the C validator), and values the C validator refuses reach
# it unchanged and come back as SpecError with its message. spillway.ops makes a combinator's ops: an SSL
# augmentation (SimCLR's colour part) built with them runs, its nested ops in the JSON as written, and a
# nested op the C validator refuses is named by its place. Views (spillway.view) give one array per view
# instance, each repeat its own draws, and a view op out of order is named as views[0].ops[3].
# Thread model: single-threaded.
import json
import unittest

import numpy as np

import spwtest
from spillway import Loader, Pipeline, SpecError, ops, view

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def image_pipeline(path):
    return (Pipeline.image_folder(path, seed=7, epochs=2)
            .decode_jpeg()
            .random_resized_crop(224, scale=(0.25, 1.0), interpolation="bicubic")
            .random_horizontal_flip(0.3)
            .color_jitter(0.4, 0.4, hue=0.1)
            .rand_augment(2, 9)
            .normalize(np.array(MEAN), STD, dtype="float16")
            .random_erasing(p=0.25, value="random")
            .batch(64, drop_remainder=True)
            .on_error("fail"))


def audio_pipeline(path):
    return (Pipeline.wav_folder(path, shuffle=False, epochs=1)
            .decode_wav()
            .resample(8000)
            .random_crop_audio(32000)
            .pad_audio(16000)
            .normalize_audio()
            .stft(256, hop_length=80)
            .mel(40, 8000, f_max=None)
            .amplitude_to_db(top_db=80)
            .spec_augment(freq_mask_param=8, time_mask_param=20, num_time_masks=2)
            .batch(8))


class TestPipeline(spwtest.TempDir, unittest.TestCase):
    def test_pipeline_round_trip_equal(self):
        for p in (image_pipeline("/data/train"), audio_pipeline("/data/speech")):
            q = Pipeline.from_json(p.to_json())
            self.assertEqual(q, p)
            self.assertEqual(q.to_json(), p.to_json())
            self.assertEqual(Pipeline.from_json(p.to_json(indent=2)), p)

    def test_pipeline_is_immutable(self):
        base = Pipeline.image_folder("/d", epochs=1).decode_jpeg()
        a = base.resize(64)
        b = base.center_crop(32)
        self.assertEqual(len(base.to_dict()["ops"]), 1)
        self.assertEqual(a.to_dict()["ops"][1], {"op": "resize", "size": 64})
        self.assertEqual(b.to_dict()["ops"][1], {"op": "center_crop", "size": 32})

    def test_pipeline_positional_fields(self):
        d = image_pipeline("/d").to_dict()
        self.assertEqual(d["source"], {"format": "image_folder", "path": "/d", "shuffle": True, "seed": 7,
                                       "epochs": 2})
        self.assertEqual(d["ops"][1], {"op": "random_resized_crop", "size": 224, "scale": [0.25, 1.0],
                                       "interpolation": "bicubic"})
        self.assertEqual(d["ops"][2], {"op": "random_horizontal_flip", "p": 0.3})
        self.assertEqual(d["ops"][3], {"op": "color_jitter", "brightness": 0.4, "contrast": 0.4, "hue": 0.1})
        self.assertEqual(d["ops"][4], {"op": "rand_augment", "num_ops": 2, "magnitude": 9})
        self.assertEqual(d["ops"][5], {"op": "normalize", "mean": MEAN, "std": STD, "dtype": "float16"})
        self.assertEqual(d["batch"], {"size": 64, "drop_remainder": True})
        self.assertEqual(d["on_error"], "fail")
        a = audio_pipeline("/s").to_dict()
        self.assertEqual(a["ops"][1], {"op": "resample", "rate": 8000})
        self.assertEqual(a["ops"][2], {"op": "random_crop_audio", "samples": 32000})
        self.assertEqual(a["ops"][5], {"op": "stft", "n_fft": 256, "hop_length": 80})
        self.assertEqual(a["ops"][6], {"op": "mel", "n_mels": 40, "sample_rate": 8000, "f_max": None})
        with self.assertRaises(TypeError):
            Pipeline.image_folder("/d", epochs=1).resize(1, 2)                  # resize has one positional field
        with self.assertRaises(TypeError):
            Pipeline.image_folder("/d", epochs=1).resize(1, size=2)

    def _canonical(self, name, text):
        r = spwtest.spillctl("validate", "--pipeline", spwtest.write(self.tmp, name, text), check=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_pipeline_validates_as_hand_written(self):
        path = spwtest.images()
        hand = {"batch": {"drop_remainder": True, "size": 64},
                "ops": [{"op": "decode_jpeg"},
                        {"size": 224, "op": "random_resized_crop", "interpolation": "bicubic", "scale": [0.25, 1]},
                        {"op": "random_horizontal_flip", "p": 0.3},
                        {"op": "color_jitter", "hue": 0.1, "contrast": 0.4, "brightness": 0.4},
                        {"op": "rand_augment", "magnitude": 9},
                        {"op": "normalize", "std": STD, "mean": MEAN, "dtype": "float16"},
                        {"op": "random_erasing", "value": "random", "p": 0.25}],
                "on_error": "fail",
                "source": {"path": path, "format": "image_folder", "seed": 7, "epochs": 2}}
        built = self._canonical("built.json", image_pipeline(path).to_json())
        self.assertEqual(built, self._canonical("hand.json", json.dumps(hand, indent=1)))
        self.assertIn('"op": "random_resized_crop", "size": 224, "scale": [0.25, 1.0]', built)

    def test_pipeline_audio_validates_as_hand_written(self):
        path = spwtest.speech()
        hand = ('{"source": {"format": "wav_folder", "path": %s, "shuffle": false},\n'
                ' "ops": [{"op": "decode_wav"}, {"op": "resample", "rate": 8000},\n'
                '   {"op": "random_crop_audio", "samples": 32000}, {"op": "pad_audio", "samples": 16000},\n'
                '   {"op": "normalize_audio"}, {"op": "stft", "n_fft": 256, "hop_length": 80},\n'
                '   {"op": "mel", "sample_rate": 8000, "n_mels": 40},\n'
                '   {"op": "amplitude_to_db", "top_db": 80},\n'
                '   {"op": "spec_augment", "freq_mask_param": 8, "time_mask_param": 20, "num_time_masks": 2}],\n'
                ' "batch": {"size": 8}}' % json.dumps(path))
        self.assertEqual(self._canonical("built.json", audio_pipeline(path).to_json()),
                         self._canonical("hand.json", hand))

    def test_pipeline_unknown_field(self):
        with self.assertRaises(TypeError) as cm:         # the method knows the op's fields
            Pipeline.image_folder(spwtest.images(), epochs=1).decode_jpeg().random_horizontal_flip(prob=0.5)
        self.assertEqual(str(cm.exception), "random_horizontal_flip(): got an unexpected keyword argument 'prob' "
                         "(its fields: p; docs/pipeline.md)")
        p = Pipeline.image_folder(spwtest.images(), epochs=1).decode_jpeg().op("random_horizontal_flip", prob=0.5).batch(4)
        with self.assertRaises(SpecError) as cm:          # op() passes it to the C parser
            Loader(p, local_cores=1)
        self.assertEqual(str(cm.exception), 'ops[1]: unknown field "prob" for "random_horizontal_flip"')
        self.assertIsInstance(cm.exception, ValueError)

    def test_pipeline_c_validator_reports_bad_value(self):
        p = Pipeline.image_folder(spwtest.images(), epochs=1).decode_jpeg().center_crop(8).rand_augment(magnitude=40).batch(4)
        with self.assertRaises(SpecError) as cm:
            Loader(p, local_cores=1)
        self.assertEqual(str(cm.exception), "ops[2].magnitude: 40 is outside [0, 30]")
        with self.assertRaises(SpecError) as cm:
            Loader(Pipeline.image_folder(spwtest.images(), epochs=1).op("random_resize_crop", size=8).batch(4))
        self.assertIn('unknown op "random_resize_crop"', str(cm.exception))

    def test_pipeline_views(self):
        norm = ops.normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
        p = (Pipeline.image_folder(spwtest.images(), seed=5, epochs=1).decode_jpeg()
             .views(view([ops.random_resized_crop(32, scale=(0.4, 1.0)), ops.random_horizontal_flip(), norm],
                         repeat=2),
                    view([ops.random_resized_crop(16, scale=(0.05, 0.4)), norm], repeat=3))
             .batch(8))
        self.assertEqual(p.to_dict()["views"][1], {"repeat": 3, "ops": [
            {"op": "random_resized_crop", "size": 16, "scale": [0.05, 0.4]}, norm]})
        ld = Loader(p, local_cores=1)
        try:
            b = next(iter(ld.batches()))
            self.assertEqual(len(b), 6)
            self.assertEqual([v.shape for v in b.views], [(8, 3, 32, 32)] * 2 + [(8, 3, 16, 16)] * 3)
            self.assertIs(b.data[0], b.views[0])
            self.assertEqual((b.labels.shape, b.labels.dtype, b.n, b.lengths), ((8,), np.int64, 8, None))
            self.assertFalse(np.array_equal(b.views[0], b.views[1]))      # each repeat its own draws
        finally:
            ld.close()
        bad = p.to_dict()
        bad["views"][0]["ops"].append({"op": "center_crop", "size": 8})
        with self.assertRaises(SpecError) as cm:
            Loader(Pipeline.from_dict(bad), local_cores=1)
        self.assertEqual(str(cm.exception), 'views[0].ops[3]: image op "center_crop" must come before "normalize" '
                         "(views[0].ops[2])")

    def test_pipeline_combinators_with_ops(self):
        p = (Pipeline.image_folder(spwtest.images(), seed=3, epochs=1).decode_jpeg().random_resized_crop(32)
             .random_apply([ops.color_jitter(0.4, 0.4, 0.2, 0.1)], p=0.8).random_grayscale(p=0.2)
             .random_choice([ops.grayscale(3), ops.random_solarize(128, p=1)], p=[1, 3])
             .to_tensor().batch(8))
        self.assertEqual(p.to_dict()["ops"][2], {"op": "random_apply", "ops": [
            {"op": "color_jitter", "brightness": 0.4, "contrast": 0.4, "saturation": 0.2, "hue": 0.1}], "p": 0.8})
        self.assertEqual(ops.random_posterize(4), {"op": "random_posterize", "bits": 4})
        with self.assertRaises(TypeError):
            ops.random_apply(p=0.5)                        # ops is required
        ld = Loader(p, local_cores=1)
        try:
            b = next(iter(ld.batches()))
            self.assertEqual(b.data.shape, (8, 3, 32, 32))
        finally:
            ld.close()
        bad = Pipeline.image_folder(spwtest.images(), epochs=1).decode_jpeg().random_order([ops.invert(), ops.resize(8)])
        with self.assertRaises(SpecError) as cm:
            Loader(bad.batch(4), local_cores=1)
        self.assertEqual(str(cm.exception), 'ops[1].ops[1]: "resize" cannot be one of random_order\'s ops: only '
                         "image ops that keep the image's size (colour ops, flips, warps, policies, combinators) can")


if __name__ == "__main__":
    unittest.main()
