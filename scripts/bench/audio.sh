#!/usr/bin/env bash
# scripts/bench/audio.sh - `make bench`: Spillway's audio features vs soundfile+torch+torchaudio, same clips,
# each pinned to one core: decode_wav, stft(512/160/400), 80 mel, log, SpecAugment; batch size 1 on both sides.
# BENCH_RUNS interleaved runs, medians; prints a table, writes build/bench/audio.md + audio.json. Refuses to
# compare unless the peer's torch runs on OpenBLAS. A missed target prints FAIL but exits 0; a crash exits 1.
# Env: BENCH_AUDIO_N (200) BENCH_RUNS (3) BENCH_WARMUP_BATCHES (3) BENCH_CPU (1) BENCH_GLIBC_TUNABLES SPILLCTL.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
PY=/usr/bin/python3
N=${BENCH_AUDIO_N:-200}
RUNS=${BENCH_RUNS:-3}
WARMUP=${BENCH_WARMUP_BATCHES:-3}   # untimed clips before each timed epoch, the same on both sides
CPU=${BENCH_CPU:-1}
SPILLCTL=${SPILLCTL:-build/bin/spillctl}
TARGET=3.0                          # Spillway clips/s over the peer's, one core each
# As scripts/bench/ops.sh: both sides keep freed memory in the process (no per-clip mmap/munmap of big
# buffers, whose first-touch page faults cost ~10 us a page on this kind of VM; torch.stft's 1.4 MB complex
# output for a 7 s clip is one). Set BENCH_GLIBC_TUNABLES= (empty) to measure with glibc's defaults.
TUNABLES=${BENCH_GLIBC_TUNABLES-glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967295}
OUT=build/bench
WORK=$OUT/audio                     # raw outputs; kept apart from bench-ops' $OUT/raw, which its ops.json names

die() { echo "bench-audio: error: $*" >&2; exit 1; }

[[ $N =~ ^[0-9]+$ && $N -ge 10 ]] || die "BENCH_AUDIO_N must be an integer >= 10 (got '$N')"
[[ $RUNS =~ ^[0-9]+$ && $RUNS -ge 1 ]] || die "BENCH_RUNS must be an integer >= 1 (got '$RUNS')"
[[ $WARMUP =~ ^[0-9]+$ && $WARMUP -lt $N ]] || die "BENCH_WARMUP_BATCHES must be an integer below $N (got '$WARMUP')"
command -v taskset >/dev/null || die "taskset not found (util-linux)"
taskset -c "$CPU" true 2>/dev/null || die "cannot pin to CPU $CPU (BENCH_CPU); this machine has $(nproc) CPUs"
"$PY" -c 'import torch, torchaudio, soundfile' 2>/dev/null ||
  die "$PY cannot import torch, torchaudio and soundfile (bash scripts/install-deps.sh)"
[[ -x $SPILLCTL ]] || die "$SPILLCTL not found or not executable: build it first ('make all'), or set SPILLCTL=PATH"

# The peer runs without this shell's OpenBLAS overrides (OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE, ...): a user's
# process has OpenBLAS's own CPU and cache detection; forced values change which kernels its sgemm runs.
PEER_ENV=(env)
UNSET=()
while IFS= read -r v; do
  PEER_ENV+=(-u "$v")
  UNSET+=("$v=${!v}")
done < <(compgen -e | grep -E '^(OPENBLAS_|GOTO_)' || true)
((${#UNSET[@]} == 0)) || echo "bench-audio: note: the peer runs without this shell's ${UNSET[*]}"
PEER_ENV+=(GLIBC_TUNABLES="$TUNABLES" taskset -c "$CPU" "$PY" scripts/bench/audio_peer.py)

# The peer must be on OpenBLAS: with Debian's reference BLAS (python3-torch without recommends) its mel matmul
# alone makes it several times slower (shared PERF-NOTES: 953 vs 169 clips/s), and a ratio against that means
# nothing. The peer asks the dynamic linker which library torch's sgemm_ binds to (OpenBLAS's files can be
# mapped while the reference sgemm_ is the one called) and times a 512^3 sgemm.
ALT=$(update-alternatives --display libblas.so.3-x86_64-linux-gnu 2>/dev/null |
  sed -n 's/^ *link currently points to //p' || true)
BLAS_JSON=$("${PEER_ENV[@]}" --blas-only 2>&1) || die "the peer's BLAS check failed: $BLAS_JSON"
BLAS=$("$PY" -c 'import json, sys
d = json.loads(sys.argv[1].strip().splitlines()[-1])
print(d["blas"], d["sgemm_from"] or "?", d["sgemm_512_gflops"])' "$BLAS_JSON") ||
  die "the peer's BLAS check printed no JSON: $BLAS_JSON"
read -r BLAS_KIND SGEMM_FROM GFLOPS <<<"$BLAS"
echo "bench-audio: libblas.so.3 alternative: ${ALT:-unknown (no update-alternatives)}; torch's sgemm_ comes" \
  "from $SGEMM_FROM ($BLAS_KIND, $GFLOPS GFLOP/s on a 512^3 sgemm)"
if [[ $BLAS_KIND != openblas ]]; then
  die "the peer's torch is not on OpenBLAS: its sgemm_ comes from $SGEMM_FROM ($BLAS_KIND, $GFLOPS GFLOP/s);
  the libblas.so.3 alternative points to ${ALT:-?}. Against the reference BLAS the ratio would flatter Spillway
  several times over, so there is nothing to compare. Install OpenBLAS (apt-get install libopenblas0-pthread,
  or libopenblas0), check that 'update-alternatives --display libblas.so.3-x86_64-linux-gnu' points to
  openblas-pthread/libblas.so.3, and that LD_LIBRARY_PATH does not put another libblas.so.3 first."
fi
[[ -z $ALT || $ALT == *openblas* ]] ||
  echo "bench-audio: note: the libblas.so.3 alternative is $ALT, but torch's sgemm_ is OpenBLAS's anyway"

DATA=build/data/speech-bench
[[ $N -eq 200 ]] || DATA=build/data/speech-bench-n$N
bash scripts/data/make-audio-dataset.sh "$DATA" "$N"
TRAIN=$ROOT/$DATA/train
NCLIPS=$(find "$TRAIN" -name '*.wav' | wc -l)
[[ $NCLIPS -eq $N ]] || die "$TRAIN holds $NCLIPS .wav files, expected $N (remove $DATA and run again)"

rm -rf "$WORK"
mkdir -p "$WORK"
RESULTS=$WORK/results.tsv
printf 'side\trun\tclips_per_s\tclips\tseconds\tfile\n' >"$RESULTS"

# Batch size 1: the clips have different lengths (2-10 s) and the peer, like most users, goes clip by clip;
# this bench measures per-clip work only (Spillway's padded batches would add one copy per clip).
"$PY" - "$TRAIN" "$WORK/pipeline.json" <<'EOF'
import json, sys
spec = {"source": {"format": "wav_folder", "path": sys.argv[1], "shuffle": False},
        "ops": [{"op": "decode_wav"},
                {"op": "stft", "n_fft": 512, "hop_length": 160, "win_length": 400},
                {"op": "mel", "sample_rate": 16000, "n_mels": 80},
                {"op": "log", "eps": 1e-6},
                {"op": "spec_augment", "freq_mask_param": 27, "time_mask_param": 100,
                 "num_freq_masks": 2, "num_time_masks": 2}],
        "batch": {"size": 1}}
with open(sys.argv[2], "w") as f:
    json.dump(spec, f, indent=2)
    f.write("\n")
EOF

errors=0

# run_peer RUN: one peer process, pinned.
run_peer() {
  local r=$1 log="$WORK/peer-r$1" line
  if "${PEER_ENV[@]}" --data "$TRAIN" --warmup-clips "$WARMUP" >"$log.json" 2>"$log.err" &&
      line=$("$PY" -c 'import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
clips, blas = d["clips"], d["blas"]
if clips != int(sys.argv[3]) or blas != "openblas":
    sys.exit(f"{sys.argv[1]}: {clips} clips on {blas}, expected {sys.argv[3]} on openblas")
print("\t".join(map(str, ["peer", sys.argv[2], d["clips_per_s"], d["clips"], d["seconds"], sys.argv[1]])))' \
        "$log.json" "$r" "$N" 2>&1); then
    echo "$line" >>"$RESULTS"
    printf '  run %s/%s  peer (torch+torchaudio)  %8.1f clips/s\n' "$r" "$RUNS" "$(cut -f3 <<<"$line")"
  else
    errors=$((errors + 1))
    echo "bench-audio: ERROR: peer run $r failed${line:+: $line}; its stderr ends:" >&2
    tail -n 20 "$log.err" >&2
  fi
}

# spw_report OUT RUN N: checks spillctl's report (the last JSON object on stdout) and prints a results.tsv
# line; keeps the object as .json beside the raw output. Exits non-zero with a reason.
spw_report() {
  PYTHONPATH="$ROOT/scripts/lib" "$PY" - "$@" <<'EOF'
import json, sys
import spw_report
path, run, n = sys.argv[1:4]
obj = spw_report.run_report(path)
if int(obj["elements"]) != int(n) or int(obj.get("skipped", 0)):
    sys.exit(f"{path}: {obj['elements']} clips ({obj.get('skipped')} skipped), expected {n} (one epoch)")
if not float(obj["seconds"]) > 0:
    sys.exit(f"{path}: seconds is {obj['seconds']}")
keep = path.rsplit(".", 1)[0] + ".json"
with open(keep, "w") as f:
    json.dump(obj, f, indent=1)
print("\t".join(map(str, ["spillway", run, obj["elements_per_s"], obj["elements"], obj["seconds"], keep])))
EOF
}

# run_spw RUN: one spillctl run, one thread, pinned.
run_spw() {
  local r=$1 log="$WORK/spw-r$1" line rc=0
  GLIBC_TUNABLES="$TUNABLES" taskset -c "$CPU" "$SPILLCTL" run --local --pipeline "$WORK/pipeline.json" \
    --threads 1 --warmup-batches "$WARMUP" --json --quiet >"$log.out" 2>"$log.err" || rc=$?
  if ((rc != 0)); then
    errors=$((errors + 1))
    echo "bench-audio: ERROR: spillway run $r: spillctl exited with $rc; its stderr ends:" >&2
    tail -n 20 "$log.err" >&2
  elif ! line=$(spw_report "$log.out" "$r" "$N" 2>&1); then
    errors=$((errors + 1))
    echo "bench-audio: ERROR: spillway run $r: $line" >&2
  else
    echo "$line" >>"$RESULTS"
    printf '  run %s/%s  spillway, 1 thread       %8.1f clips/s\n' "$r" "$RUNS" "$(cut -f3 <<<"$line")"
  fi
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
echo "bench-audio: $N clips from $DATA, $RUNS runs, batch size 1, one core (CPU $CPU) per side," \
  "load before: $LOAD_BEFORE"
for ((r = 1; r <= RUNS; r++)); do
  # Alternate which side goes first so neither always runs on a cache the other just warmed.
  if ((r % 2)); then run_peer "$r"; run_spw "$r"; else run_spw "$r"; run_peer "$r"; fi
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

PYTHONPATH="$ROOT/scripts/lib" "$PY" - "$RESULTS" "$OUT" "$TRAIN" "$N" "$RUNS" "$CPU" "$TUNABLES" "$LOAD_BEFORE" "$LOAD_AFTER" "$errors" \
  "$TARGET" "${ALT:-unknown}" "$ROOT/$DATA/stamp.json" <<'EOF'
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
EOF

if ((errors)); then
  echo "bench-audio: $errors measurement(s) failed (see above and $WORK/)" >&2
  exit 1
fi
