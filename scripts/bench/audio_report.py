#!/usr/bin/env python3
"""scripts/bench/audio_report.py - bench/audio.sh's analysis: medians per side, the ratio, the table, the target
(run by scripts/bench/audio.sh with the arguments it passes).
"""
import csv, json, os, platform, statistics, sys, time
import soundfile
(results, out, train, n, runs, cpu, tunables, load_before, load_after, errors, target, alt,
 stamp_path) = sys.argv[1:14]
target = float(target)
rows = list(csv.DictReader(open(results), delimiter="\t"))

# Seconds of audio in the epoch, from the WAV headers (the same clips both sides read).
files = [os.path.join(d, f) for d, _, fs in os.walk(train) for f in fs if f.lower().endswith(".wav")]
audio_s = sum(soundfile.info(p).frames / soundfile.info(p).samplerate for p in files)
mean_s = audio_s / len(files)

def med(side):
    v = [float(r["clips_per_s"]) for r in rows if r["side"] == side]
    return (statistics.median(v), v) if v else (None, [])

def fmt(x, nd=1):
    return "n/a" if x is None else f"{x:.{nd}f}"

peer, peer_runs = med("peer")
spw, spw_runs = med("spillway")
ratio = spw / peer if spw and peer else None
verdict = "n/a" if ratio is None else ("PASS" if ratio >= target else "FAIL")
head = ["side (one core, batch size 1)", "clips/s", "audio s/s", "us/clip", "runs (clips/s)"]
table = [["peer: soundfile + torch.stft + mel matmul + log + SpecAugment", fmt(peer),
          fmt(peer and peer * mean_s), fmt(peer and 1e6 / peer, 0), " ".join(f"{x:.1f}" for x in peer_runs)],
         ["spillway: spillctl run --local --threads 1", fmt(spw), fmt(spw and spw * mean_s),
          fmt(spw and 1e6 / spw, 0), " ".join(f"{x:.1f}" for x in spw_runs)]]
check = ["Spillway / peer, clips/s per core", fmt(ratio, 2) + ("x" if ratio else ""), f">= {target:.1f}x", verdict]

# Where Spillway's time goes: spillctl's per-step stats (ns_per_element = ns per clip, measured inside the
# worker), medians over runs, each labelled with the fused group it runs in. The rest of the wall time is
# outside the ops: reading the file, copying the result into the batch, handing the batch over.
steps, labels, outside = {}, {}, []
for r in rows:
    if r["side"] == "spillway":
        rep = json.load(open(r["file"]))
        for g in rep.get("groups", []):
            for op in g["ops"]:
                labels[op] = f"{g['kind']} ({'+'.join(g['ops'])})"
        for o in rep.get("ops", []):
            steps.setdefault(o["name"], []).append(float(o["ns_per_element"]) / 1e3)
        outside.append(1e6 * float(rep["seconds"]) / int(rep["elements"]) -
                       sum(float(o["ns_per_element"]) for o in rep.get("ops", [])) / 1e3)
us_per_clip = {k: statistics.median(v) for k, v in steps.items()}
if outside:
    us_per_clip["(outside the ops)"] = statistics.median(outside)
share = lambda us: f"{100 * us / (1e6 / spw):.0f}%" if spw else "n/a"
prof = [[name, labels.get(name, "-"), f"{us:.1f}", share(us)] for name, us in us_per_clip.items()]
if prof and spw:
    prof.append(["wall time per clip", "-", f"{1e6 / spw:.1f}", "100%"])
prof_head = ["spillway step", "fused group", "us/clip", "share of wall time"]

def text_table(h, rs, left=1):
    widths = [max(len(str(x[i])) for x in rs + [h]) for i in range(len(h))]
    line = lambda cells: "  ".join(str(c).ljust(w) if i < left else str(c).rjust(w)
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(h), "  ".join("-" * w for w in widths)] + [line(r) for r in rs])

print()
print(text_table(head, table))
print()
print(text_table(["check", "ratio", "target", "result"], [check]))
if prof:
    print()
    print(text_table(prof_head, prof, left=2))
print()
if verdict == "n/a":
    print(f"bench-audio: INCOMPLETE: {errors} measurement(s) failed; no ratio")
elif verdict == "FAIL":
    print(f"bench-audio: FAIL: Spillway / peer is {ratio:.2f}x, the target is >= {target:.1f}x")
else:
    print(f"bench-audio: PASS: Spillway / peer is {ratio:.2f}x (target >= {target:.1f}x)")
print(f"bench-audio: medians of {runs} runs, {n} clips ({audio_s:.0f} s of audio, mean {mean_s:.2f} s); "
      f"batch size 1 on both sides (per-clip work; clips differ in length); "
      f"load average before {load_before}, after {load_after}")

peer_files = [r["file"] for r in rows if r["side"] == "peer"]
meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "host": platform.node(), "nproc": os.cpu_count(),
        "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
        "clips": int(n), "audio_seconds": round(audio_s, 2), "mean_clip_seconds": round(mean_s, 3),
        "runs": int(runs), "cpu_pinned": cpu, "batch_size": 1, "glibc_tunables": tunables,
        "libblas_alternative": alt, "load_before": load_before, "load_after": load_after,
        "dataset": json.load(open(stamp_path)), "errors": int(errors)}
if peer_files:
    d = json.loads(open(peer_files[0]).read().strip().splitlines()[-1])
    meta.update({k: d[k] for k in ("torch", "torchaudio", "soundfile", "blas", "sgemm_from", "sgemm_512_gflops",
                                   "blas_libs", "openblas_env")})
spw_ops = {r["run"]: json.load(open(r["file"])).get("ops") for r in rows if r["side"] == "spillway"}
with open(f"{out}/audio.json", "w") as f:
    json.dump({"meta": meta,
               "median_clips_per_s": {"peer": peer and round(peer, 2), "spillway": spw and round(spw, 2)},
               "median_audio_s_per_s": {"peer": peer and round(peer * mean_s, 1),
                                        "spillway": spw and round(spw * mean_s, 1)},
               "ratio": ratio and round(ratio, 3), "target": target, "result": verdict,
               "spillway_us_per_clip_by_step": {k: round(v, 2) for k, v in us_per_clip.items()},
               "spillway_ops_by_run": spw_ops, "runs": rows}, f, indent=1)
    f.write("\n")
with open(f"{out}/audio.md", "w") as f:
    f.write(f"Measured {meta['date']} on {meta['cpu']} ({meta['nproc']} CPUs): {n} speech clips, 16 kHz, "
            f"{audio_s:.0f} s of audio (mean {mean_s:.2f} s), medians of {runs} runs, one core per side, "
            f"batch size 1 on both sides (per-clip work; clips differ in length). Peer: torch {meta.get('torch', '?')}, torchaudio {meta.get('torchaudio', '?')} "
            f"on {meta.get('blas', '?')}. Load average before {load_before}, after {load_after}.\n\n")
    for h, rs, left in ((head, table, 1), (["check", "ratio", "target", "result"], [check], 1),
                        (prof_head, prof, 2)):
        if rs:
            f.write("| " + " | ".join(h) + " |\n|" + "|".join(["---"] * left + ["---:"] * (len(h) - left)) + "|\n")
            for row in rs:
                f.write("| " + " | ".join(str(c) for c in row) + " |\n")
            f.write("\n")
print(f"bench-audio: wrote {out}/audio.md and {out}/audio.json")
import bench_targets
bench_targets.record("audio", [("speech pipeline (spectrogram, mel, SpecAugment) per core",
                                "torch.stft + mel matmul + SpecAugment (%s clips/s)" % fmt(peer),
                                "%s clips/s, %s" % (fmt(spw), check[1]), check[2], verdict)])
