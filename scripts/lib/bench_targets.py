#!/usr/bin/env python3
"""scripts/lib/bench_targets.py - the targets every benchmark checks, gathered into one table for `make bench`.

Each scripts/bench/*.sh (and the by-hand evaluations) calls record() with its rows: what is measured, against
what anchor, the figure, the target and PASS/FAIL. `python3 scripts/lib/bench_targets.py report` prints every row,
names the benchmarks that left none, and writes the table into docs/benchmarks.md between its markers
(BENCH_DOCS=0: print only); `report --only BENCH` after one benchmark run by hand replaces that benchmark's rows
in the docs' table and keeps the others'. `clear` forgets the last run's rows. Files:
$SPW_BUILD/bench/targets/<bench>.tsv (default build/), one per benchmark, rewritten by each run.
Single-threaded; no project code imported."""
import datetime
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIR = os.path.join(os.environ.get("SPW_BUILD") or os.path.join(ROOT, "build"), "bench", "targets")
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
BEGIN, END = "<!-- make-bench-targets:begin -->", "<!-- make-bench-targets:end -->"
# What `make bench` runs, in order, and what the by-hand evaluations are (rows only when they were run).
BENCHES = ["ops", "stream", "offload", "compress", "audio", "png", "python-op", "dispatcher", "recipes"]
BY_HAND = {"planner": "scripts/eval/planner.sh (root, ~60 min)", "workers": "scripts/eval/workers.sh (root)"}


def record(bench, rows):
    """rows: (what, anchor, measured, target, passed) - passed True, False or None (not measured), or the
    benches' own words for those: "PASS", "FAIL", "n/a"."""
    os.makedirs(DIR, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC") + ", at " + commit()
    with open(os.path.join(DIR, bench + ".tsv"), "w") as f:
        for what, anchor, measured, target, passed in rows:
            verdict = passed if isinstance(passed, str) else "n/a" if passed is None else "PASS" if passed else "FAIL"
            cells = (what, anchor, measured, target, verdict, stamp)
            f.write("\t".join(str(c).replace("\t", " ").replace("\n", " ") for c in cells) + "\n")


def read():
    rows, missing = [], []
    for bench in BENCHES + list(BY_HAND):
        path = os.path.join(DIR, bench + ".tsv")
        if not os.path.exists(path):
            if bench in BENCHES:
                missing.append(bench)
            continue
        for line in open(path):
            if line.strip():
                rows.append([bench] + line.rstrip("\n").split("\t"))
    return rows, missing


def commit():
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        # This table's own file does not count: the last run's table leaves it changed.
        dirty = [l for l in subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                                           capture_output=True, text=True, timeout=10).stdout.splitlines()
                 if not l.endswith(" docs/benchmarks.md")]
        paths = [l[3:] for l in dirty]
        return (head or "unknown") + (" (uncommitted changes to %s%s)" % (", ".join(paths[:3]),
                                                                          ", ..." if len(paths) > 3 else "")
                                      if paths else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def markdown(rows, missing):
    out = ["Written %s on a machine of %d CPUs; each row says when and at which commit it was measured." % (
               datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), os.cpu_count()), "",
           "| benchmark | what | anchor | measured | target | result | measured at |",
           "|---|---|---|---|---|---|---|"]
    for bench, what, anchor, measured, target, verdict, stamp in rows:
        out.append("| %s | %s | %s | %s | %s | %s | %s |" % (bench, what, anchor, measured, target, verdict,
                                                             stamp))
    for bench in missing:
        out.append("| %s | (no result: the benchmark did not finish) | | | | n/a | |" % bench)
    hand = [b for b in BY_HAND if not any(r[0] == b for r in rows)]
    if hand:
        out += ["", "Not run by `make bench`: " + "; ".join(BY_HAND[b] for b in hand) + "."]
    return out


def doc_table():
    """The docs' text and where its table lies between the markers, or None."""
    text = open(DOC).read()
    a, b = text.find(BEGIN), text.find(END)
    if a < 0 or b < a:
        print("bench-targets: %s has no %s ... %s markers: not written" % (DOC, BEGIN, END), file=sys.stderr)
        return None
    return text, a + len(BEGIN), b


def write_doc(lines):
    found = doc_table()
    if found:
        text, a, b = found
        open(DOC, "w").write(text[:a] + "\n" + "\n".join(lines) + "\n" + text[b:])
        print("bench-targets: wrote the table into", os.path.relpath(DOC, ROOT))


def rows_in_doc():
    """The table's rows as they stand in the docs: [bench, what, anchor, measured, target, result, at]."""
    found = doc_table()
    if not found:
        return None
    text, a, b = found
    rows = []
    for line in text[a:b].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| ") and len(cells) == 7 and cells[0] not in ("benchmark", "---") and \
                not cells[1].startswith("(no result"):
            rows.append(cells)
    return rows


def report_only(bench):
    """Replace bench's rows in the docs' table with its last run's, keep the other benchmarks' rows."""
    rows, _ = read()
    mine = [r for r in rows if r[0] == bench]
    if not mine:
        print("bench-targets: no rows of %s in %s" % (bench, DIR), file=sys.stderr)
        return 1
    kept = rows_in_doc()
    if kept is None:
        return 1
    order = BENCHES + list(BY_HAND)
    merged = sorted([r for r in kept if r[0] != bench] + mine,
                    key=lambda r: order.index(r[0]) if r[0] in order else len(order))
    for r in mine:
        print("  ".join(r))
    if os.environ.get("BENCH_DOCS", "1") != "0":
        write_doc(markdown(merged, []))
    return 0


def main(argv):
    if argv[1:] == ["clear"]:
        for bench in BENCHES:
            path = os.path.join(DIR, bench + ".tsv")
            if os.path.exists(path):
                os.remove(path)
        return 0
    if len(argv) == 4 and argv[1:3] == ["report", "--only"]:
        return report_only(argv[3])
    if argv[1:] != ["report"]:
        print("usage: bench_targets.py report [--only BENCH] | clear", file=sys.stderr)
        return 2
    rows, missing = read()
    widths = [max([len(r[i]) for r in rows] + [10]) for i in range(6)]
    print("\nmake bench: every target beside its anchor")
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:6], widths)), r[6])
    for bench in missing:
        print("%s: no result (the benchmark did not finish)" % bench)
    fails = [r for r in rows if r[5] != "PASS"]
    print("make bench: %d of %d targets met%s" % (len(rows) - len(fails), len(rows) + len(missing),
                                                  "" if not fails else "; not met: " +
                                                  "; ".join("%s: %s" % (r[0], r[4]) for r in fails)))
    if os.environ.get("BENCH_DOCS", "1") != "0":
        write_doc(markdown(rows, missing))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
