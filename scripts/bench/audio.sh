#!/usr/bin/env bash
# scripts/bench/audio.sh - `make bench`: Spillway's audio features vs soundfile+torch+torchaudio, same clips,
# each pinned to one core: decode_wav, stft(512/160/400), 80 mel, log, SpecAugment; batch size 1 on both sides.
# BENCH_RUNS interleaved runs, medians; prints a table, writes build/bench/audio.md + audio.json. Refuses to
# compare unless the peer's torch runs on OpenBLAS. A missed target prints FAIL but exits 0; a crash exits 1.
# Env: BENCH_AUDIO_N (200) BENCH_RUNS (3) BENCH_WARMUP_BATCHES (3) BENCH_CPU (1) BENCH_GLIBC_TUNABLES SPILLCTL.
set -euo pipefail

# shellcheck source=scripts/lib/harness.sh
source "$(dirname "$0")/../lib/harness.sh"   # ROOT, B, PY, need_built, wait_port, ...
cd "$ROOT"
N=${BENCH_AUDIO_N:-200}
RUNS=${BENCH_RUNS:-3}
WARMUP=${BENCH_WARMUP_BATCHES:-3}   # untimed clips before each timed epoch, the same on both sides
CPU=${BENCH_CPU:-1}
SPILLCTL=${SPILLCTL:-$B/bin/spillctl}
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
"$PY" "$ROOT/scripts/bench/audio_pipeline.py" "$TRAIN" "$WORK/pipeline.json"

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
  PYTHONPATH="$ROOT/scripts/lib" "$PY" "$ROOT/scripts/bench/audio_run.py" "$@"
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

PYTHONPATH="$ROOT/scripts/lib" "$PY" "$ROOT/scripts/bench/audio_report.py" "$RESULTS" "$OUT" "$TRAIN" "$N" "$RUNS" "$CPU" "$TUNABLES" "$LOAD_BEFORE" "$LOAD_AFTER" "$errors" \
  "$TARGET" "${ALT:-unknown}" "$ROOT/$DATA/stamp.json"

if ((errors)); then
  echo "bench-audio: $errors measurement(s) failed (see above and $WORK/)" >&2
  exit 1
fi
