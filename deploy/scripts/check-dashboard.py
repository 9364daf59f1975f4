#!/usr/bin/env python3
"""deploy/scripts/check-dashboard.py - checks a Grafana dashboard against what the daemons export: the file is valid
JSON, every panel has a query, and every spillway_* / process_* series a PromQL expression names appears in
the given /metrics bodies (a histogram's _bucket, _sum and _count included). Prints each problem, or one ok
line; exits 1 on any problem.
  check-dashboard.py DASHBOARD.json METRICS_BODY.txt..."""
import json
import re
import sys

SERIES = re.compile(r"\b((?:spillway|process)_[A-Za-z0-9_]+)\b")


def exported(bodies):
    names = set()
    for path in bodies:
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = re.match(r"# TYPE (\S+) (\S+)", line)
                if m:
                    names.add(m.group(1))
                    if m.group(2) == "histogram":
                        names.update(m.group(1) + s for s in ("_bucket", "_sum", "_count"))
                elif line.strip() and not line.startswith("#"):
                    names.add(re.split(r"[{ ]", line, 1)[0])
    return names


def exprs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "expr" and isinstance(v, str):
                yield v
            else:
                yield from exprs(v)
    elif isinstance(node, list):
        for v in node:
            yield from exprs(v)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[-1])
        return 2
    problems = 0
    try:
        with open(argv[1], encoding="utf-8") as f:
            dash = json.load(f)
    except (OSError, ValueError) as e:
        print("%s: not a JSON dashboard: %s" % (argv[1], e))
        return 1
    have = exported(argv[2:])
    panels = dash.get("panels", [])
    for p in panels:
        if not p.get("targets"):
            print("panel %r has no query" % p.get("title"))
            problems += 1
    used = set()
    for e in exprs(dash):
        for name in SERIES.findall(e):
            used.add(name)
            if name not in have:
                print("%r: %s is not exported by the daemons" % (e, name))
                problems += 1
    if not panels or not used:
        print("%s: no panels or no series" % argv[1])
        problems += 1
    if problems:
        return 1
    print("ok %d panels, %d series, all exported" % (len(panels), len(used)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
