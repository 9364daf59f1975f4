# tests/python/test_op_registry.py - the op registry (pipeline/op_registry.c, read through spw_op_schema) is
# the one list of ops: the Python Pipeline has exactly its ops as methods, with its fields as parameters (its
# positional ones first, in order), its defaults and its docs; docs/pipeline.md's op tables list exactly its
# ops and fields with the same defaults; `spillctl ops --json` prints the same document; every field type has
# a typing hint, and the committed stub client/python/spillway/pipeline.pyi is what `make pyi` makes now. A
# registry change that the docs or the stub do not follow fails here. Thread model: single-threaded.
import ast
import difflib
import importlib.util
import inspect
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import typing
import unittest
from typing import Any, Dict, Literal, Optional, Sequence, Union

import spwtest
from spillway import Pipeline, _lib, ops, pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STUB = os.path.join(ROOT, "client", "python", "spillway", "pipeline.pyi")
SCHEMA = _lib.op_schema()
OPS = {op["name"]: op for op in SCHEMA["ops"] if "plugin" not in op}     # the built-in ones


def same_value(a, b):
    """A documented default against the registry's: numbers within 1e-9; a number stands for a list of it."""
    if isinstance(a, (int, float)) and not isinstance(a, bool) and isinstance(b, list):
        return all(same_value(a, x) for x in b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def docs_op_tables():
    """{op: {field: default cell}} from docs/pipeline.md's tables headed | op | field | type | default | ..."""
    ops, current = {}, []
    in_table = False
    with open(os.path.join(ROOT, "docs", "pipeline.md")) as f:
        for line in f:
            if line.startswith("| op | field | type | default |"):
                in_table = True
                continue
            if not line.startswith("|"):
                in_table = False
                continue
            if not in_table or line.startswith("|---"):
                continue
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]     # not at \|
            if cells[0]:
                current = re.findall(r"`([a-z_0-9]+)`", cells[0])
                for op in current:
                    ops.setdefault(op, {})
            for field in re.findall(r"`([a-z_0-9]+)`", cells[1]):
                for op in current:
                    ops[op][field] = cells[3]
    return ops


class TestOpRegistry(unittest.TestCase):
    def test_schema_is_versioned_and_complete(self):
        self.assertEqual(SCHEMA["schema"], 1)
        self.assertGreaterEqual(len(OPS), 41)
        for op in SCHEMA["ops"]:
            self.assertTrue(op["doc"].endswith("."), op["name"])
            names = [f["name"] for f in op["fields"]]
            self.assertEqual(len(names), len(set(names)), op["name"])
            for a in op["args"]:
                self.assertIn(a, names, "%s: positional %s is not a field" % (op["name"], a))

    def test_pipeline_methods_are_the_registry(self):
        methods = {n for n, v in vars(Pipeline).items() if callable(v) and getattr(v, "__signature__", None)}
        self.assertEqual(methods, set(OPS), "Pipeline's op methods and the registry differ")
        P = inspect.Parameter
        for name, op in OPS.items():
            sig = inspect.signature(getattr(Pipeline, name))
            params = list(sig.parameters.values())[1:]
            self.assertEqual([p.name for p in params if p.kind == P.POSITIONAL_OR_KEYWORD], op["args"], name)
            self.assertEqual({p.name for p in params}, {f["name"] for f in op["fields"]}, name)
            for f in op["fields"]:
                p = sig.parameters[f["name"]]
                if f["required"]:
                    self.assertIs(p.default, P.empty, "%s.%s" % (name, f["name"]))
                elif "derived" not in f:
                    self.assertEqual(p.default, f["default"], "%s.%s" % (name, f["name"]))
                self.assertIn(f["name"] + ":", getattr(Pipeline, name).__doc__)
            self.assertTrue(getattr(Pipeline, name).__doc__.startswith(op["doc"]))

    def test_docs_op_tables_are_the_registry(self):
        docs = docs_op_tables()
        self.assertEqual(set(docs), set(OPS), "docs/pipeline.md's op tables and the registry list other ops")
        for name, op in OPS.items():
            fields = {f["name"]: f for f in op["fields"]}
            self.assertEqual(set(docs[name]), set(fields), "docs/pipeline.md: the fields of %s" % name)
            for fname, cell in docs[name].items():
                f = fields[fname]
                where = "docs/pipeline.md: %s.%s default %r" % (name, fname, cell)
                if f["required"]:
                    self.assertIn("*required*", cell, where)
                    continue
                m = re.match(r"`([^`]*)`", cell)
                self.assertTrue(m, where)
                if "derived" in f:
                    self.assertEqual(m.group(1), f["derived"], where)
                    continue
                self.assertTrue(same_value(json.loads(m.group(1)), f["default"]),
                                "%s; the registry says %s" % (where, json.dumps(f["default"])))

    def test_spillctl_ops_prints_the_schema(self):
        r = spwtest.spillctl("ops", "--json")
        self.assertEqual(json.loads(r.stdout), SCHEMA)
        table = spwtest.spillctl("ops").stdout.splitlines()
        self.assertEqual([line.split()[0] for line in table[1:]], [op["name"] for op in SCHEMA["ops"]])


def stub_functions(cls):
    """{name: ast.FunctionDef} of a class in the committed stub."""
    return {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}


class TestTypeHints(unittest.TestCase):
    def test_every_registry_type_has_a_hint(self):
        for op in SCHEMA["ops"]:
            for f in op["fields"]:
                if "choices" not in f:
                    self.assertIn(f["type"], pipeline._FIELD_HINTS,
                                  "%s.%s: the registry type %r has no hint: add it to _FIELD_HINTS in "
                                  "spillway/pipeline.py, then run `make pyi`" % (op["name"], f["name"], f["type"]))

    def test_hints_of_real_ops(self):
        interp = Literal["nearest", "bilinear", "bicubic"]
        sig = inspect.signature(Pipeline.rand_augment)
        self.assertEqual(sig.parameters["num_ops"].annotation, int)
        self.assertEqual(sig.parameters["interpolation"].annotation, interp)
        self.assertEqual(sig.parameters["fill"].annotation, Union[float, Sequence[float]])
        self.assertIs(sig.return_annotation, Pipeline)
        self.assertEqual(inspect.signature(Pipeline.random_resized_crop).parameters["scale"].annotation,
                         Sequence[float])
        self.assertEqual(inspect.signature(Pipeline.resize).parameters["size"].annotation,
                         Union[int, Sequence[int]])
        self.assertEqual(inspect.signature(Pipeline.resize).parameters["antialias"].annotation, bool)
        # derived (None in the signature), null allowed, null among the choices, null beside choices
        self.assertEqual(inspect.signature(Pipeline.stft).parameters["hop_length"].annotation, Optional[int])
        self.assertEqual(inspect.signature(Pipeline.amplitude_to_db).parameters["top_db"].annotation,
                         Optional[float])
        self.assertEqual(inspect.signature(Pipeline.mel).parameters["norm"].annotation, Literal[None, "slaney"])
        self.assertEqual(inspect.signature(Pipeline.python).parameters["output_dtype"].annotation,
                         Optional[Literal["uint8", "float32", "float16", "int64"]])
        self.assertEqual(inspect.signature(Pipeline.random_erasing).parameters["value"].annotation,
                         Union[float, Sequence[float], Literal["random"]])
        sig = inspect.signature(ops.random_apply)
        self.assertEqual(sig.parameters["ops"].annotation, Sequence[Dict[str, Any]])
        self.assertEqual(sig.return_annotation, Dict[str, Any])
        hints = typing.get_type_hints(Pipeline.aug_mix)
        self.assertEqual(hints["fill"], Optional[Union[float, Sequence[float]]])
        self.assertEqual(hints["interpolation"], interp)
        self.assertIs(hints["return"], Pipeline)

    def test_every_op_parameter_is_annotated(self):
        for name in OPS:
            for fn in (getattr(Pipeline, name), getattr(ops, name)):
                params = list(inspect.signature(fn).parameters.values())
                for p in params[1:] if fn is getattr(Pipeline, name) else params:
                    self.assertNotIn(p.annotation, (p.empty, Any), "%s.%s" % (name, p.name))

    def test_committed_stub_is_current(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "pipeline.pyi")
            env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "client", "python"))
            r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "dev", "make_pyi.py"), "--out", out],
                               env=env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                fresh = f.read()
        with open(STUB) as f:
            committed = f.read()
        if fresh != committed:
            diff = difflib.unified_diff(committed.splitlines(), fresh.splitlines(), "pipeline.pyi (committed)",
                                        "pipeline.pyi (the registry now)", lineterm="")
            self.fail("client/python/spillway/pipeline.pyi is stale: run `make pyi` and commit it\n"
                      + "\n".join(list(diff)[:40]))

    def test_stub_parses_and_names_every_op(self):
        with open(STUB) as f:
            tree = ast.parse(f.read(), STUB)
        classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
        methods, functions = stub_functions(classes["Pipeline"]), stub_functions(classes["_Ops"])
        self.assertEqual(set(functions), set(OPS))
        self.assertEqual(set(methods) - set(OPS), {"__init__", "image_folder", "audio_folder", "wav_folder",
                                                   "tar_shards", "coco", "op", "map", "views", "batch",
                                                   "on_error", "limits", "to_dict", "to_json", "from_json",
                                                   "from_dict", "__eq__", "__hash__", "__repr__"})
        for name, op in OPS.items():
            m, fn = methods[name], functions[name]
            rest = [f["name"] for f in op["fields"] if f["name"] not in op["args"]]
            self.assertEqual([a.arg for a in m.args.args], ["self"] + op["args"], name)
            self.assertEqual([a.arg for a in m.args.kwonlyargs], rest, name)
            self.assertEqual([a.arg for a in fn.args.args], ["self"] + op["args"], name)
            self.assertEqual(ast.unparse(m.returns), "Pipeline", name)
            self.assertEqual(ast.unparse(fn.returns), "Dict[str, Any]", name)
            self.assertTrue(ast.get_docstring(m).startswith(op["doc"]), name)
        names = {t.target.id for t in tree.body if isinstance(t, ast.AnnAssign)}
        names |= {f.name for f in tree.body if isinstance(f, ast.FunctionDef)}
        self.assertEqual(names, {"ops", "OPS", "view"})

    @unittest.skipUnless(importlib.util.find_spec("mypy"), "mypy is not installed")
    def test_user_script_type_checks_against_the_stub(self):
        good = ("from spillway import Pipeline, ops\n"
                "p: Pipeline = (Pipeline.image_folder('train').decode_jpeg().random_resized_crop(224)\n"
                "               .random_apply([ops.color_jitter(0.4, 0.4, 0.2, 0.1)], p=0.8)\n"
                "               .resize(256, interpolation='bicubic').batch(32))\n")
        bad = "from spillway import Pipeline\nPipeline.image_folder('train').resize(256, interpolation='cubic')\n"
        env = dict(os.environ, MYPYPATH=os.path.join(ROOT, "client", "python"))
        with tempfile.TemporaryDirectory() as d:
            for name, text, ok in (("good.py", good, True), ("bad.py", bad, False)):
                path = os.path.join(d, name)
                with open(path, "w") as f:
                    f.write(text)
                r = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-incremental",
                                    "--cache-dir", os.path.join(d, "cache"), path],
                                   env=env, cwd=d, capture_output=True, text=True)
                self.assertEqual(r.returncode == 0, ok, r.stdout + r.stderr)
                if not ok:
                    self.assertIn("interpolation", r.stdout)


if __name__ == "__main__":
    unittest.main()
