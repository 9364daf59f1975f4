#!/usr/bin/env python3
"""scripts/eval/soak_rss.py - eval/soak-long.sh's RSS growth per daemon over the last window
(run by scripts/eval/soak-long.sh with the arguments it passes).
"""
# The last window's samples of each daemon's current process: a least-squares slope in MB/min. A process
# started less than half the window before the end (a restarted worker) is reported, not judged.
import sys
from collections import defaultdict
rows = [l.split() for l in open(sys.argv[1])]
total, window = int(sys.argv[2]), int(sys.argv[3])
by = defaultdict(list)
for t, role, pid, kb in rows:
    by[role].append((int(t), pid, int(kb) / 1024))
for role, pts in sorted(by.items()):
    last_pid = pts[-1][1]
    seg = [(t, mb) for t, pid, mb in pts if pid == last_pid and t >= total - window]
    span = seg[-1][0] - seg[0][0] if seg else 0
    if span < window / 2:
        print(role, "restarted", "%.1f" % pts[0][2], "%.1f" % pts[-1][2], span)
        continue
    n = len(seg); mt = sum(t for t, _ in seg) / n; mm = sum(m for _, m in seg) / n
    den = sum((t - mt) ** 2 for t, _ in seg)
    slope = sum((t - mt) * (m - mm) for t, m in seg) / den * 60 if den else 0.0
    print(role, "%.3f" % slope, "%.1f" % pts[0][2], "%.1f" % pts[-1][2], span)
