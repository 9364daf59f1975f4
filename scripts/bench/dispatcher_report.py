#!/usr/bin/env python3
"""scripts/bench/dispatcher_report.py - bench/dispatcher.sh's analysis: the dispatcher's rates by fleet size, the table, the targets
(run by scripts/bench/dispatcher.sh with the arguments it passes).
"""
import json, sys
import bench_targets
rows = []
for line in open(sys.argv[1]):
    side, w, j, s, js = line.rstrip("\n").split("\t", 4)
    rows.append((side, int(w), int(j), int(s), json.loads(js) if js.strip() else {}))
hdr = ("side", "workers", "jobs", "splits/epoch", "disp. cores", "RSS MB", "alive", "hb/s", "hb p99 ms",
       "lease/s (due)", "lease p50 ms", "lease p99 ms", "client hb p99 ms", "errors")
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
for side, w, j, s, d in rows:
    m = d.get("methods", {})
    hb, ls, ch = m.get("WorkerHeartbeat", {}), m.get("LeaseSplit", {}), m.get("ClientHeartbeat", {})
    errors = sum(x.get("errors", 0) for x in m.values())
    print("| %s | %d | %d | %d | %.2f | %.0f | %s | %.0f | %.1f | %.0f (%.0f) | %.2f | %.1f | %.1f | %d |" % (
        side, w, j, s, d.get("dispatcher_cores", -1), d.get("dispatcher_rss_mb", -1), d.get("alive_at_end", "?"),
        hb.get("per_s", 0), hb.get("p99_ms", 0), ls.get("per_s", 0), d.get("leases_due_per_s", 0), ls.get("p50_ms", 0),
        ls.get("p99_ms", 0),
        ch.get("p99_ms", 0), errors))
for side, w, j, s, d in rows:
    if side != "target":
        continue
    m = d.get("methods", {})
    hb, ls, ch = m.get("WorkerHeartbeat", {}), m.get("LeaseSplit", {}), m.get("ClientHeartbeat", {})
    p99 = max(x.get("p99_ms", 1e9) for x in (hb, ls, ch))
    served = ls.get("per_s", 0) / max(d.get("leases_due_per_s", 1), 1)
    ok = (d.get("dispatcher_cores", 9) <= 1.0 and hb.get("per_s", 0) >= 0.99 * w and served >= 0.95
          and p99 < 50 and d.get("alive_at_end") == w and not sum(x.get("errors", 0) for x in m.values()))
    print("target: one dispatcher core carries %d workers x %d jobs of %d splits/epoch at the full rate: "
          "%.2f cores, %.0f worker hb/s, %.0f%% of the leases due, p99 %.1f ms (< 50), %s of %d alive: %s" % (
              w, j, s, d.get("dispatcher_cores", -1), hb.get("per_s", 0), 100 * served, p99,
              d.get("alive_at_end", "?"), w, "PASS" if ok else "FAIL"))
    bench_targets.record("dispatcher", [(
        "one dispatcher core: %d workers x %d jobs x %d splits/epoch" % (w, j, s),
        "the real heartbeat, lease and ack periods (%.0f leases due/s)" % d.get("leases_due_per_s", 0),
        "%.2f cores, p99 %.1f ms, %.0f%% of the leases due served, %s of %d alive" % (
            d.get("dispatcher_cores", -1), p99, 100 * served, d.get("alive_at_end", "?"), w),
        "<= 1 core, p99 < 50 ms, none dead", ok)])
