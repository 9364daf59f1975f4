#!/usr/bin/env python3
"""scripts/lib/spw_report.py - spillctl's --json reports as the tests, benches, evals and the demo read them:
the JSON object that ends a file (after log lines, maybe pretty-printed), a run's report with the fields a
caller needs, and a value in it.

  spw_report.py FILE EXPR     print the value at EXPR (a subscript, '["plan"]["cut"]') of FILE's report
                              (FILE - : stdin)
"""
import ast
import json
import re
import sys


def last_json(text, where="the output"):
    """The JSON object that ends text, parsed: it may be pretty-printed and may follow log lines, so each
    line-initial '{' is tried from the end. ValueError names `where` when there is none."""
    dec = json.JSONDecoder()
    starts = [i for i, ch in enumerate(text) if ch == "{" and (i == 0 or text[i - 1] == "\n")]
    for i in reversed(starts):
        try:
            obj, end = dec.raw_decode(text, i)
        except ValueError:
            continue
        if isinstance(obj, dict) and not text[end:].strip():
            return obj
    raise ValueError("no JSON object at the end of %s" % where)


def run_report(path, keys=("elements", "batches", "seconds", "elements_per_s", "ops")):
    """A spillctl run --json report read from the file at path, with every one of keys: else SystemExit
    naming the file and what is missing."""
    try:
        obj = last_json(open(path).read(), path)
    except ValueError as e:
        sys.exit(str(e))
    missing = [k for k in keys if k not in obj]
    if missing:
        sys.exit("%s: the report lacks %s" % (path, ", ".join(missing)))
    return obj


def kept_run(path, n, no_skips=False):
    """A bench run's report (run_report) that made one epoch of n elements (no skipped sample either, with
    no_skips) in a positive time, kept as .json beside the raw output: (report, the .json's path); else
    SystemExit naming the file and what is wrong."""
    obj = run_report(path)
    if int(obj["elements"]) != int(n) or (no_skips and int(obj.get("skipped", 0))):
        sys.exit("%s: %s elements (%s skipped), expected %s (one epoch)" % (path, obj["elements"],
                                                                           obj.get("skipped", 0), n))
    if not float(obj["seconds"]) > 0:
        sys.exit("%s: seconds is %s" % (path, obj["seconds"]))
    keep = path.rsplit(".", 1)[0] + ".json"
    with open(keep, "w") as f:
        json.dump(obj, f, indent=1)
    return obj, keep


def read(path):
    """The report in the file at path (- : stdin)."""
    return last_json(sys.stdin.read() if path == "-" else open(path).read(), path)


def value(report, expr):
    """The value at a subscript expression such as '["plan"]["cut"]' or "['a'][0]" (literal keys and
    indexes only: nothing is evaluated)."""
    v = report
    keys = re.findall(r"\[([^\]]*)\]", expr)
    if not keys or "".join("[%s]" % k for k in keys) != expr.strip():
        raise ValueError("not a subscript expression: %r" % expr)
    for key in keys:
        v = v[ast.literal_eval(key)]
    return v


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    v = value(read(argv[1]), argv[2])
    print(v if not isinstance(v, (dict, list)) else json.dumps(v))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
