# spillway/pipeline.py - a builder for the JSON pipeline spec (docs/pipeline.md): a source, one chainable
# method per op named as the JSON op, batch and on_error; to_json() / Pipeline.from_json(). It validates
# nothing: fields go to the C parser as given (unknown ones too), which reports errors when a job is made.
# Thread model: a Pipeline is an immutable value (every method returns a new one); share it freely.
import copy
import json

# op -> its positional parameters, in torchvision / torchaudio order (the rest are keywords:
# decode_image(exif_transpose=True), decode_audio(mono=False), ...).
OPS = {
    "decode_jpeg": (), "decode_image": (), "resize": ("size",), "center_crop": ("size",),
    "crop": ("top", "left", "height", "width"), "random_crop": ("size",), "random_resized_crop": ("size",),
    "horizontal_flip": (), "vertical_flip": (), "random_horizontal_flip": ("p",), "random_vertical_flip": ("p",),
    "rotate": ("angle",), "affine": ("angle",),
    "adjust_brightness": ("factor",), "adjust_contrast": ("factor",), "adjust_saturation": ("factor",),
    "adjust_sharpness": ("factor",), "adjust_hue": ("factor",), "posterize": ("bits",),
    "solarize": ("threshold",), "equalize": (), "autocontrast": (), "invert": (),
    "color_jitter": ("brightness", "contrast", "saturation", "hue"),
    "rand_augment": ("num_ops", "magnitude"), "auto_augment": ("policy",),
    "trivial_augment_wide": ("num_magnitude_bins",),
    "normalize": ("mean", "std"), "to_tensor": (), "random_erasing": ("p",),
    "decode_audio": (), "decode_wav": (), "resample": ("rate",), "random_crop_audio": ("samples",), "pad_audio": ("samples",),
    "normalize_audio": (), "stft": ("n_fft",), "mel": ("n_mels", "sample_rate"), "log": ("eps",),
    "amplitude_to_db": ("stype", "top_db"), "spec_augment": (),
}


def _plain(v):
    """v as JSON-ready Python values: tuples become lists, numpy arrays and scalars Python ones."""
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
        return _plain(v.tolist())
    return v


class Pipeline:
    """A pipeline spec. Start from a source (image_folder, audio_folder, tar_shards), chain ops, end with
    batch(); Loader(pipeline) runs it. Equal pipelines have equal spec dicts."""

    def __init__(self, spec):
        self._spec = _plain(spec)

    # ---- sources ----
    @classmethod
    def _source(cls, fmt, path, shuffle, seed, epochs, extra):
        if epochs is not None and (not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 1):
            raise ValueError("spillway: epochs=%r: a positive number of epochs, or None for as many as the "
                             "trainer iterates" % (epochs,))
        src = {"format": fmt, "path": path, "shuffle": shuffle, "seed": seed,
               "epochs": 0 if epochs is None else epochs}     # the spec's 0: no end
        src.update(extra)
        return cls({"source": src, "ops": []})

    @classmethod
    def image_folder(cls, path, shuffle=True, seed=0, epochs=1, **extra):
        """Class sub-folders of JPEGs; labels are the sorted folder names' indices. epochs: passes over the
        data, each shuffled anew (a Loader iterated once more raises); None: as many as the trainer iterates
        (each still every sample exactly once). The same for every source."""
        return cls._source("image_folder", str(path), shuffle, seed, epochs, extra)

    @classmethod
    def audio_folder(cls, path, shuffle=True, seed=0, epochs=1, **extra):
        """Class sub-folders of audio files, or a flat folder with labels.tsv: .wav, .flac, .mp3, .ogg and
        .opus for decode_audio, .wav for decode_wav."""
        return cls._source("audio_folder", str(path), shuffle, seed, epochs, extra)

    @classmethod
    def wav_folder(cls, path, shuffle=True, seed=0, epochs=1, **extra):
        """The same source as audio_folder, under its first name."""
        return cls._source("wav_folder", str(path), shuffle, seed, epochs, extra)

    @classmethod
    def tar_shards(cls, pattern, shuffle=True, seed=0, epochs=1, **extra):
        """WebDataset-style shards: a glob of .tar files with KEY.jpg / KEY.flac / ... and KEY.cls members."""
        return cls._source("tar_shards", str(pattern), shuffle, seed, epochs, extra)

    # ---- ops, batch, top level ----
    def op(self, name, *args, **fields):
        """Append op `name`; positional args fill its main fields (OPS), keywords go through as given."""
        main = OPS.get(name, ())
        if len(args) > len(main):
            raise TypeError("%s() takes at most %d positional arguments (%s), %d given"
                            % (name, len(main), ", ".join(main) or "none", len(args)))
        o = {"op": name}
        for k, v in zip(main, args):
            if k in fields:
                raise TypeError("%s() got multiple values for %r" % (name, k))
            o[k] = v
        o.update(fields)
        p = self._copy()
        p._spec.setdefault("ops", []).append(_plain(o))
        return p

    def batch(self, size, drop_remainder=False, layout=None, pad=None, **extra):
        """Group elements: size, drop_remainder, layout ("HWC"/"CHW", uint8 images), pad (audio)."""
        b = {"size": size, "drop_remainder": drop_remainder}
        if layout is not None:
            b["layout"] = layout
        if pad is not None:
            b["pad"] = pad
        b.update(extra)
        return self._top("batch", b)

    def on_error(self, policy):
        """"skip" (count and log a bad sample) or "fail" (stop the run naming the file)."""
        return self._top("on_error", policy)

    def limits(self, **caps):
        """Top-level caps: max_pixels, max_file_bytes, max_samples."""
        p = self._copy()
        p._spec.update(_plain(caps))
        return p

    def _top(self, key, value):
        p = self._copy()
        p._spec[key] = _plain(value)
        return p

    def _copy(self):
        return Pipeline(copy.deepcopy(self._spec))

    # ---- conversion ----
    def to_dict(self):
        """The spec as a dict (a copy)."""
        return copy.deepcopy(self._spec)

    def to_json(self, indent=None):
        return json.dumps(self._spec, indent=indent)

    @classmethod
    def from_json(cls, text):
        spec = json.loads(text)
        if not isinstance(spec, dict):
            raise ValueError("a pipeline spec is a JSON object, got %s" % type(spec).__name__)
        return cls(spec)

    @classmethod
    def from_dict(cls, spec):
        return cls(copy.deepcopy(spec))

    def __eq__(self, other):
        return isinstance(other, Pipeline) and self._spec == other._spec

    def __hash__(self):
        return hash(self.to_json())

    def __repr__(self):
        return "Pipeline.from_json(%r)" % self.to_json()


def _op_method(name):
    def method(self, *args, **fields):
        return self.op(name, *args, **fields)
    main = OPS[name]
    method.__name__ = name
    method.__qualname__ = "Pipeline." + name
    method.__doc__ = 'Append {"op": "%s"}%s; see docs/pipeline.md.' % (
        name, " (positional: %s)" % ", ".join(main) if main else "")
    return method


for _name in OPS:
    setattr(Pipeline, _name, _op_method(_name))
del _name
