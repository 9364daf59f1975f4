#!/usr/bin/env bash
# tests/integration/readme.sh - the README's "The library in C" and "PyTorch" sections, run as written: their
# shell blocks in a fresh folder (HOME there; `make` is the repository's, `./client/python` and `data/train`
# links to the repository's package and the 160-image test set), the C block compiled as loop.c and the
# Python block run with the venv's interpreter, each in-process and through a dispatcher and a worker
# (SPILLWAY_DISPATCHER). A README edit that breaks a block fails here.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
T=$WORK/user
mkdir -p "$T/home" "$T/data"
bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null
ln -s "$B/data/cli-test/train" "$T/data/train"
ln -s "$ROOT/client" "$T/client"

# block SECTION LANG: the first ```LANG block under the README's "## SECTION" heading
block() {
  "$PY" "$ROOT/tests/integration/checks.py" readme_1 "$ROOT/README.md" "$1" "$2"
}
block "The library in C" sh > "$T/c.sh" && block "The library in C" c > "$T/loop.c" &&
  block "PyTorch" sh > "$T/py.sh" && block "PyTorch" python > "$T/train.py"
check "the README has the C section's sh and c blocks and the PyTorch section's sh and python blocks" \
  bash -c "test -s '$T/c.sh' && test -s '$T/loop.c' && test -s '$T/py.sh' && test -s '$T/train.py'"
cat > "$T/train.json" <<JSON
{"source": {"format": "image_folder", "path": "$T/data/train", "seed": 3, "epochs": 2},
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": 32}], "batch": {"size": 16}}
JSON
start_service 1 || { finish; exit 1; }
SVC=127.0.0.1:$DPORT

# The shell blocks in the user's folder: `make` means the repository's Makefile, nothing else is changed.
run_sh() {   # run_sh SCRIPT LOG [ENV...]
  local script=$1 log=$2
  shift 2
  (cd "$T" && env -i PATH=/usr/bin:/bin HOME="$T/home" ROOT="$ROOT" "$@" bash -c \
    'set -e; make() { command make -C "$ROOT" -s "$@"; }; source "$0"' "$script") > "$log" 2>&1
}
run_sh "$T/c.sh" "$WORK/c-inproc.log"
check "C: make install, pkg-config build and ./loop run as written (in-process: 2 epochs of 160)" \
  bash -c "grep -qx '320 elements' '$WORK/c-inproc.log'"
run_sh "$T/c.sh" "$WORK/c-svc.log" SPILLWAY_DISPATCHER="$SVC"
check "C: the same through the dispatcher and worker" grep -qx '320 elements' "$WORK/c-svc.log"
check "C: the job went through the dispatcher (it lists one)" bash -c "'$B/bin/spillctl' --dispatcher '$SVC' jobs --json | grep -q '\"job\"'"

run_sh "$T/py.sh" "$WORK/py-install.log"
check "PyTorch: the venv and the offline pip install run as written" test -x "$T/venv/bin/python"
(cd "$T" && env -u SPILLWAY_LIB -u PYTHONPATH -u SPILLWAY_DISPATCHER timeout 300 venv/bin/python train.py) \
  > "$WORK/py-inproc.log" 2>&1
check "PyTorch: the training block runs as written, in-process (2 epochs, 320 elements)" \
  bash -c "grep -q '^epoch 0: loss' '$WORK/py-inproc.log' && grep -q '^epoch 1: loss .*, 320 elements so far' '$WORK/py-inproc.log'"
# SPILLWAY_LOG_TO=stderr: the library's info lines (the job created) on stderr, not Python's logging
(cd "$T" && env -u SPILLWAY_LIB -u PYTHONPATH SPILLWAY_DISPATCHER="$SVC" SPILLWAY_LOG_TO=stderr timeout 300 \
  venv/bin/python train.py) \
  > "$WORK/py-svc.log" 2>&1
check "PyTorch: ... and through \$SPILLWAY_DISPATCHER" grep -q '^epoch 1: loss .*, 320 elements so far' "$WORK/py-svc.log"
check "PyTorch: the job really went through the dispatcher" grep -q 'client job created job=' "$WORK/py-svc.log"
finish
