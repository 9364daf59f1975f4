# spillway/pipeline.py - a builder for the JSON pipeline spec (docs/pipeline.md): a source, one chainable
# method per op named as the JSON op, batch and on_error; to_json() / Pipeline.from_json(). The op methods are
# made at import from the library's op registry (spw_op_schema): their signatures (positional fields in
# torchvision's order, the rest keyword-only, with the registry's defaults) and docstrings are the registry's,
# so a field the op does not have is a TypeError at the call; their annotations are typing hints made from each
# field's registry type (_FIELD_HINTS), which pipeline.pyi (scripts/dev/make_pyi.py, `make pyi`) writes out for
# type checkers. Values are not checked here: the C parser reports them when a job is made. op(name, ...)
# passes any name and fields through unchecked.
# Thread model: a Pipeline is an immutable value (every method returns a new one); share it freely.
import copy
import importlib
import inspect
import json
import os
from typing import Any, Callable, Dict, Literal, Mapping, Optional, Sequence, Tuple, Union

from . import _lib

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

    def __init__(self, spec: Mapping[str, Any]) -> None:
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
    def image_folder(cls, path: Union[str, os.PathLike], shuffle: bool = True, seed: int = 0,
                  epochs: Optional[int] = None, **extra: Any) -> "Pipeline":
        """Class sub-folders of JPEGs; labels are the sorted folder names' indices. epochs: None (the
        default) runs as many epochs as the trainer iterates, each shuffled anew and each every sample exactly
        once, as a torch DataLoader does; E ends the run after E passes (a Loader iterated once more raises).
        The same for every source."""
        return cls._source("image_folder", str(path), shuffle, seed, epochs, extra)

    @classmethod
    def audio_folder(cls, path: Union[str, os.PathLike], shuffle: bool = True, seed: int = 0,
                  epochs: Optional[int] = None, **extra: Any) -> "Pipeline":
        """Class sub-folders of audio files, or a flat folder with labels.tsv: .wav, .flac, .mp3, .ogg and
        .opus for decode_audio, .wav for decode_wav."""
        return cls._source("audio_folder", str(path), shuffle, seed, epochs, extra)

    @classmethod
    def wav_folder(cls, path: Union[str, os.PathLike], shuffle: bool = True, seed: int = 0,
                epochs: Optional[int] = None, **extra: Any) -> "Pipeline":
        """The same source as audio_folder, under its first name."""
        return cls._source("wav_folder", str(path), shuffle, seed, epochs, extra)

    @classmethod
    def tar_shards(cls, pattern: Union[str, os.PathLike], shuffle: bool = True, seed: int = 0,
                   epochs: Optional[int] = None, **extra: Any) -> "Pipeline":
        """WebDataset-style shards: a glob of .tar files with KEY.jpg / KEY.flac / ... and KEY.cls members.
        labels=False for sets without classes; fields={...} for a sample's other members (captions, masks,
        boxes: docs/pipeline.md "Sample fields")."""
        return cls._source("tar_shards", str(pattern), shuffle, seed, epochs, extra)

    @classmethod
    def coco(cls, path: Union[str, os.PathLike], annotations: Union[str, os.PathLike], shuffle: bool = True,
             seed: int = 0, epochs: Optional[int] = None, **extra: Any) -> "Pipeline":
        """A COCO detection set: the images of folder path that annotations (an instances_*.json) lists, each
        with its boxes (batch["boxes"], batch.targets), crowd annotations left out."""
        extra["annotations"] = str(annotations)
        return cls._source("coco", str(path), shuffle, seed, epochs, extra)

    # ---- ops, batch, top level ----
    def op(self, name: str, *args: Any, **fields: Any) -> "Pipeline":
        """Append op `name` unchecked: positional args fill its positional fields (OPS), keywords go through
        as given (the C parser reports what is wrong when a job is made)."""
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
        return self._append(o)

    def map(self, fn: Callable[..., Any], timeout_s: Optional[float] = None,
            output_shape: Optional[Sequence[int]] = None, output_dtype: Any = None, **kwargs: Any) -> "Pipeline":
        """Append a Python op calling fn(element, **kwargs) on every element (docs/pipeline.md, "Python ops").
        fn must be importable where the op runs, so a module-level function of a module (not a lambda, a
        nested function or one defined in the script being run); kwargs must be JSON values. fn may take
        `rng`, a numpy Generator seeded from (seed, epoch, sample, op): its draws are the same wherever the
        element is made. timeout_s: per element (default 60). output_shape (a tuple) and output_dtype
        ("uint8", "float32", "float16", "int64" or a numpy dtype) declare what fn returns: an element that
        differs fails with both named, and with both the element's size is known before a run."""
        name = _function_name(fn)
        try:
            json.dumps(_plain(kwargs))
        except (TypeError, ValueError) as e:
            raise TypeError("map(%s): kwargs must be JSON values (numbers, strings, lists, dicts): %s"
                            % (name, e)) from None
        o = {"op": "python", "function": name}
        if kwargs:
            o["kwargs"] = kwargs
        if timeout_s is not None:
            o["timeout_s"] = timeout_s
        if output_shape is not None:
            o["output_shape"] = [int(d) for d in output_shape]
        if output_dtype is not None:
            o["output_dtype"] = _dtype_name(output_dtype)
        return self._append(o)

    def _append(self, o):
        p = self._copy()
        p._spec.setdefault("ops", []).append(_plain(o))
        return p

    def views(self, *views: Mapping[str, Any]) -> "Pipeline":
        """Multi-crop views after the ops (the shared prefix, run once per sample): each a view(ops, repeat),
        whose ops run `repeat` times on copies of the prefix's output, each time with its own draws; a batch
        then holds one array per view instance, in order, then the labels (DINO: views(view(global_ops, 2),
        view(local_ops, 6)))."""
        return self._top("views", [dict(v) for v in views])

    def batch(self, size: int, drop_remainder: bool = False, layout: Optional[Literal["HWC", "CHW"]] = None,
              pad: Optional[bool] = None, **extra: Any) -> "Pipeline":
        """Group elements: size, drop_remainder, layout ("HWC"/"CHW", uint8 images), pad (audio)."""
        b = {"size": size, "drop_remainder": drop_remainder}
        if layout is not None:
            b["layout"] = layout
        if pad is not None:
            b["pad"] = pad
        b.update(extra)
        return self._top("batch", b)

    def on_error(self, policy: Literal["skip", "fail"]) -> "Pipeline":
        """"skip" (count and log a bad sample) or "fail" (stop the run naming the file)."""
        return self._top("on_error", policy)

    def limits(self, **caps: int) -> "Pipeline":
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
    def to_dict(self) -> Dict[str, Any]:
        """The spec as a dict (a copy)."""
        return copy.deepcopy(self._spec)

    def to_json(self, indent: Optional[int] = None) -> str:
        return json.dumps(self._spec, indent=indent)

    @classmethod
    def from_json(cls, text: Union[str, bytes]) -> "Pipeline":
        spec = json.loads(text)
        if not isinstance(spec, dict):
            raise ValueError("a pipeline spec is a JSON object, got %s" % type(spec).__name__)
        return cls(spec)

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> "Pipeline":
        return cls(copy.deepcopy(spec))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pipeline) and self._spec == other._spec

    def __hash__(self) -> int:
        return hash(self.to_json())

    def __repr__(self) -> str:
        return "Pipeline.from_json(%r)" % self.to_json()


def view(ops: Sequence[Mapping[str, Any]], repeat: int = 1) -> Dict[str, Any]:
    """One view of Pipeline.views: its ops (spillway.ops.<op>(...) dicts, as a combinator's) and how many
    instances of it each sample yields."""
    return {"repeat": int(repeat), "ops": [_plain(o) for o in ops]}


def _dtype_name(d):
    """"float32" for "float32", np.float32 or np.dtype("float32"); a string the spec checks otherwise."""
    try:
        import numpy
        return numpy.dtype(d).name
    except (ImportError, TypeError):
        return str(d)


def _function_name(fn):
    """fn as "module:qualname", after checking that importing that gives fn back (TypeError saying how)."""
    module, qual = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    what = getattr(fn, "__name__", repr(fn))
    if not callable(fn) or not module or not qual:
        raise TypeError("map(%s): a module-level function is needed, got %s" % (what, type(fn).__name__))
    if "<lambda>" in qual or "<locals>" in qual:
        raise TypeError("map(%s): a lambda or a function defined inside another cannot be imported by the "
                        "processes that run the op: define it at the top level of a module" % what)
    if module == "__main__":
        raise TypeError("map(%s): functions of the script being run (__main__) cannot be imported by the "
                        "processes that run the op: move it into a module (e.g. augment.py beside the script, "
                        "then `from augment import %s`)" % (what, what))
    obj = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    if obj is not fn and getattr(obj, "__wrapped__", None) is not fn:
        raise TypeError("map(%s): %s:%s does not import as this function" % (what, module, qual))
    return "%s:%s" % (module, qual)


def _field_line(f):
    """One line of an op method's docstring: the field's type, default or requirement, and range."""
    kind = " | ".join(json.dumps(c) for c in f["choices"]) if "choices" in f else f["type"]
    if f["required"]:
        how = "required"
    elif "derived" in f:
        how = "default " + f["derived"]
    else:
        how = "default " + json.dumps(f["default"])
    lo, hi = f.get("min"), f.get("max", f.get("max_derived"))
    rng = ""
    if lo is not None and hi is not None:
        rng = ", %s%s to %s" % ("above " if f.get("min_exclusive") else "", lo, hi)
    elif lo is not None:
        rng = ", %s %s" % (">" if f.get("min_exclusive") else ">=", lo)
    return "    %s: %s, %s%s" % (f["name"], kind, how, rng)


# A registry field type (op_schema.c's kind_name, the type column of docs/pipeline.md) as the Python values it
# takes: a number is a float (an int passes, PEP 484), a [a, b] list any sequence (a tuple too, as torchvision
# takes). A type not here is Any; test_op_registry fails on one, so a new kind gets its hint with it.
_NUMBERS = Union[float, Sequence[float]]
_INTS = Union[int, Sequence[int]]
_OpDict = Dict[str, Any]          # one op as spillway.ops makes it: {"op": name, field: value, ...}
_FIELD_HINTS = {
    "integer": int,
    "number": float,
    "boolean": bool,
    "string": str,
    "interpolation": str,                           # its choices make it a Literal
    "size": _INTS,                                  # s | [s] | [h, w]
    "integer or null": Optional[int],
    "integer or [s, ...]": _INTS,
    "odd integer or [kx, ky]": _INTS,
    "padding": _INTS,                               # p | [lr, tb] | [l, t, r, b]
    "number or null": Optional[float],
    "[min, max]": Sequence[float],
    "[x, y]": Sequence[float],
    "number or [x, y]": _NUMBERS,
    "number or [min, max]": _NUMBERS,
    "number, [s] or [x, y]": _NUMBERS,
    "number or 1 or 3 numbers": _NUMBERS,
    "fill": _NUMBERS,                               # v | [v] | [r, g, b]
    "null or fill": Optional[_NUMBERS],
    'number, [v], [r, g, b] or "random"': Union[float, Sequence[float], Literal["random"]],
    "null or [w, ...]": Optional[Sequence[float]],
    "null or [d, ...]": Optional[Sequence[int]],
    "string or null": Optional[str],
    '"package.module:function"': str,
    "object": Mapping[str, Any],
    "ops": Sequence[_OpDict],                        # spillway.ops.<op>(...) dicts
}


def _field_hint(f):
    """The annotation of registry field f: its choices as a Literal, else its type's hint; Optional where the
    signature's default is None (a derived default, or null allowed)."""
    choices = f.get("choices")
    hint = Literal[tuple(choices)] if choices else _FIELD_HINTS.get(f["type"], Any)
    none_default = "derived" in f or (not f["required"] and f.get("default") is None)
    if none_default and not (choices and None in choices):
        hint = Optional[hint]
    return hint


def _op_builder(op):
    """The registry's op as (signature, build): build(*args, **kwargs) binds them as the op's fields (its
    positional ones first, in torchvision's order) and returns the op's dict, with only what was given. The
    signature's parameters carry the fields' hints (_field_hint); its return annotation is left to the caller."""
    name, fields = op["name"], {f["name"]: f for f in op["fields"]}
    P = inspect.Parameter

    def param(f, kind):
        default = P.empty if f["required"] else (None if "derived" in f else f["default"])
        return P(f["name"], kind, default=default, annotation=_field_hint(f))
    params = [param(fields[a], P.POSITIONAL_OR_KEYWORD) for a in op["args"]]
    params += [param(f, P.KEYWORD_ONLY) for f in op["fields"] if f["name"] not in op["args"]]
    sig = inspect.Signature(params)
    derived = {f["name"] for f in op["fields"] if "derived" in f}

    def build(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError("%s(): %s (its fields: %s; docs/pipeline.md)"
                            % (name, e, ", ".join(fields) or "none")) from None
        o = {"op": name}
        for k, v in bound.arguments.items():        # only what the caller gave: the spec stays short
            if not (v is None and k in derived):
                o[k] = v
        return o
    return sig, build


def _op_doc(op):
    return "%s\n\n%s\n" % (op["doc"], "\n".join(_field_line(f) for f in op["fields"]) or "    no fields")


def _annotations(sig):
    """sig's hints as a function's __annotations__, so typing.get_type_hints sees what inspect.signature does."""
    hints = {p.name: p.annotation for p in sig.parameters.values() if p.annotation is not p.empty}
    hints["return"] = sig.return_annotation
    return hints


def _op_method(op):
    """Pipeline.<op>(...): the registry's op as a method with its real signature, hints and docstring."""
    sig, build = _op_builder(op)

    def method(self, *args, **kwargs):
        return self._append(build(*args, **kwargs))
    method.__name__ = op["name"]
    method.__qualname__ = "Pipeline." + op["name"]
    method.__signature__ = sig.replace(parameters=[inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
                                       + list(sig.parameters.values()), return_annotation=Pipeline)
    method.__annotations__ = _annotations(method.__signature__)
    method.__doc__ = _op_doc(op)
    return method


class _Ops:
    """spillway.ops.<op>(...): one op as a dict, for a combinator's list of ops, as torchvision nests
    transforms: Pipeline...random_apply([ops.color_jitter(0.4, 0.4, 0.2, 0.1)], p=0.8). The same signatures
    and docs as the Pipeline methods."""


ops = _Ops()


def _op_function(op):
    sig, build = _op_builder(op)
    build.__name__ = build.__qualname__ = op["name"]
    build.__signature__ = sig.replace(return_annotation=_OpDict)
    build.__annotations__ = _annotations(build.__signature__)
    build.__doc__ = _op_doc(op)
    return build


_SCHEMA = _lib.op_schema()
OPS: Dict[str, Tuple[str, ...]] = {op["name"]: tuple(op["args"]) for op in _SCHEMA["ops"]}   # op -> positional fields
for _op in _SCHEMA["ops"]:
    if "plugin" not in _op:          # "<plugin>.<op>" is no Python name: Pipeline.op("blur.box", radius=2)
        setattr(Pipeline, _op["name"], _op_method(_op))
        setattr(ops, _op["name"], _op_function(_op))
del _op
