#!/usr/bin/env python3
"""scripts/lib/spw_report.py - spillctl's --json reports as the tests, benches and evals read them: the last
JSON line of a file (earlier lines are progress or other output), and a value in it.

  spw_report.py FILE EXPR     print the value at EXPR (a subscript, '["plan"]["cut"]') of FILE's report
                              (FILE - : stdin)
"""
import ast
import json
import re
import sys


def last_json(text):
    """The last line of text that is a JSON object, parsed."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON report in the output")


def read(path):
    """The report in the file at path (- : stdin)."""
    return last_json(sys.stdin.read() if path == "-" else open(path).read())


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
