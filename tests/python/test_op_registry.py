# tests/python/test_op_registry.py - the op registry (pipeline/op_registry.c, read through spw_op_schema) is
# the one list of ops: the Python Pipeline has exactly its ops as methods, with its fields as parameters (its
# positional ones first, in order), its defaults and its docs; docs/pipeline.md's op tables list exactly its
# ops and fields with the same defaults; `spillctl ops --json` prints the same document. A registry change
# that the docs do not follow fails here. Thread model: single-threaded.
import inspect
import json
import math
import os
import re
import unittest

import spwtest
from spillway import Pipeline, _lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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


if __name__ == "__main__":
    unittest.main()
