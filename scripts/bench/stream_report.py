#!/usr/bin/env python3
"""scripts/bench/stream_report.py - bench/stream.sh's analysis: MB/s by element size and transport, the tables
(plaintext: direct vs TCP; TLS on the data connection vs TCP and vs direct, with kTLS as each side reported it),
the targets (run by scripts/bench/stream.sh with the arguments it passes).
"""
import json, re, statistics, sys
import bench_targets
targets = []
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
data, ktls = {}, {}
for mode, elem, run, cli, srv in rows:
    c, s = json.loads(cli), json.loads(srv)
    data.setdefault((mode, int(elem)), []).append((c["mb_per_s"], c["cpu_s_per_gb"], s["cpu_s"] / (c["mb_per_s"] * c["seconds"] / 1e3)))
    if mode == "tls":   # what the kernel did: "ktls=send", "none", ... per side, every distinct answer
        for side, j in (("sender", s), ("receiver", c)):
            m = re.search(r"ktls=(\S+)", j.get("data", ""))
            ktls.setdefault((int(elem), side), set()).add(m.group(1) if m else "?")
lines = ["| element | raw TCP MB/s | Spillway MB/s | ratio | target | receiver CPU-s/GB (TCP / Spillway) | sender CPU-s/GB (TCP / Spillway) | gRPC stream (fallback) MB/s |",
         "|---|---:|---:|---:|---:|---:|---:|---:|"]
print()
print("%-22s %12s %14s %7s %8s %26s %26s %14s" % ("element", "raw TCP MB/s", "Spillway MB/s", "ratio", "target",
                                                  "recv CPU-s/GB tcp/spw", "send CPU-s/GB tcp/spw", "gRPC MB/s"))
for elem, name in ((150528, "150 KB (uint8 224x224x3)"), (602112, "600 KB (float32 3x224x224)")):
    t, d, g = data.get(("tcp", elem)), data.get(("direct", elem)), data.get(("grpc", elem))
    if not t or not d or not g:
        continue
    med = lambda v, i: statistics.median(x[i] for x in v)
    ratio = med(d, 0) / med(t, 0)
    verdict = "PASS" if ratio >= 0.70 else "FAIL"
    print("%-22s %12.0f %14.0f %6.2fx %8s %12.3f / %-11.3f %12.3f / %-11.3f %6.0f (%.2fx) %s" % (
        name[:22], med(t, 0), med(d, 0), ratio, ">= 0.70", med(t, 1), med(d, 1), med(t, 2), med(d, 2), med(g, 0),
        med(g, 0) / med(t, 0), verdict))
    targets.append(("element streaming, %s" % name, "raw TCP %.0f MB/s (%.3f CPU-s/GB received)" % (med(t, 0), med(t, 1)),
                    "%.0f MB/s, %.2fx (%.3f CPU-s/GB received, %.3f sent)" % (med(d, 0), ratio, med(d, 1), med(d, 2)),
                    ">= 0.70x", ratio >= 0.70))
    lines.append("| %s | %.0f | %.0f | %.2fx | >= 0.70x %s | %.3f / %.3f | %.3f / %.3f | %.0f (%.2fx) |" % (
        name, med(t, 0), med(d, 0), ratio, verdict, med(t, 1), med(d, 1), med(t, 2), med(d, 2), med(g, 0),
        med(g, 0) / med(t, 0)))

# TLS on the data connection (the issue 40 target: >= 0.80x raw TCP), beside plaintext direct.
tls_lines = ["| element | raw TCP MB/s | direct MB/s | TLS MB/s | TLS / TCP | target | TLS / direct | receiver CPU-s/GB (TCP / direct / TLS) | sender CPU-s/GB (TCP / direct / TLS) | kTLS (sender; receiver) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
print()
print("%-22s %9s %9s %9s %8s %8s %8s %28s %28s  %s" % ("element", "TCP MB/s", "direct", "TLS MB/s", "TLS/TCP",
                                                      "target", "TLS/dir", "recv CPU-s/GB tcp/dir/tls",
                                                      "send CPU-s/GB tcp/dir/tls", "kTLS (sender; receiver)"))
for elem, name in ((150528, "150 KB (uint8 224x224x3)"), (602112, "600 KB (float32 3x224x224)")):
    t, d, s_ = data.get(("tcp", elem)), data.get(("direct", elem)), data.get(("tls", elem))
    if not t or not d or not s_:
        continue
    med = lambda v, i: statistics.median(x[i] for x in v)
    r_tcp, r_dir = med(s_, 0) / med(t, 0), med(s_, 0) / med(d, 0)
    verdict = "PASS" if r_tcp >= 0.80 else "FAIL"
    k = "ktls=%s; ktls=%s" % ("/".join(sorted(ktls[(elem, "sender")])), "/".join(sorted(ktls[(elem, "receiver")])))
    print("%-22s %9.0f %9.0f %9.0f %7.2fx %8s %7.2fx %8.3f / %.3f / %-8.3f %8.3f / %.3f / %-8.3f  %s %s" % (
        name[:22], med(t, 0), med(d, 0), med(s_, 0), r_tcp, ">= 0.80", r_dir, med(t, 1), med(d, 1), med(s_, 1),
        med(t, 2), med(d, 2), med(s_, 2), k, verdict))
    targets.append(("element streaming with TLS, %s" % name, "raw TCP %.0f MB/s (%.3f CPU-s/GB received)" % (med(t, 0), med(t, 1)),
                    "%.0f MB/s, %.2fx; %.2fx plaintext direct (%.3f CPU-s/GB received, %.3f sent; %s)" % (
                        med(s_, 0), r_tcp, r_dir, med(s_, 1), med(s_, 2), k),
                    ">= 0.80x", r_tcp >= 0.80))
    tls_lines.append("| %s | %.0f | %.0f | %.0f | %.2fx | >= 0.80x %s | %.2fx | %.3f / %.3f / %.3f | %.3f / %.3f / %.3f | %s |" % (
        name, med(t, 0), med(d, 0), med(s_, 0), r_tcp, verdict, r_dir, med(t, 1), med(d, 1), med(s_, 1), med(t, 2),
        med(d, 2), med(s_, 2), k))
if len(tls_lines) > 2:
    lines += ["", "TLS on the data connection:", ""] + tls_lines
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
bench_targets.record("stream", targets)
print("\nbench-stream: medians; wrote", sys.argv[2])
