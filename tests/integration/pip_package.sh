#!/usr/bin/env bash
# tests/integration/pip_package.sh - the Python package as a user installs it, offline: `pip install
# ./client/python` into a fresh venv (--system-site-packages, for numpy and torch) carries libspillway.so, so
# `import spillway` works from any directory with no SPILLWAY_LIB or PYTHONPATH; examples/train_resnet.py,
# copied out of the tree, trains a few steps on it through a dispatcher and a worker; `make wheel` makes a
# py3-none-linux wheel that installs into a second venv; a package with no library names what it tried.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
ELSEWHERE=$WORK/elsewhere
mkdir -p "$ELSEWHERE"
CLEAN=(env -u SPILLWAY_LIB -u PYTHONPATH -u SPW_BUILD)

"$PY" -m venv --system-site-packages "$WORK/venv" > "$WORK/venv.log" 2>&1
check "a fresh venv" test -x "$WORK/venv/bin/pip"
( cd "$ROOT" && "${CLEAN[@]}" "$WORK/venv/bin/pip" install --no-index --no-build-isolation ./client/python ) \
  > "$WORK/pip.log" 2>&1
check "pip install --no-index --no-build-isolation ./client/python succeeds offline" test $? -eq 0
SITE=$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
check "the installed package carries libspillway.so" test -f "$SITE/spillway/libspillway.so"
(cd "$ELSEWHERE" && "${CLEAN[@]}" "$WORK/venv/bin/python" -c '
import spillway, spillway._lib as L
lib = L.lib()
print(spillway.__version__, spillway.__file__, lib._name)') > "$WORK/import.out" 2>&1
check "import spillway from another directory loads the package's own library" \
  bash -c "grep -q '$SITE/spillway/libspillway.so' '$WORK/import.out' && ! grep -q '$ROOT' '$WORK/import.out'"
check "spillway.__version__ is the release" grep -q "^$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$ROOT/client/python/spillway/_version.py") " "$WORK/import.out"

start_service 1 || { finish; exit 1; }
bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null
cp "$ROOT/examples/train_resnet.py" "$ELSEWHERE/"
(cd "$ELSEWHERE" && "${CLEAN[@]}" timeout 300 "$WORK/venv/bin/python" train_resnet.py --data "$B/data/cli-test/train" \
  --dispatcher "127.0.0.1:$DPORT" --steps 4 --size 32 --batch-size 16 --json) > "$WORK/train.out" 2> "$WORK/train.err"
check "examples/train_resnet.py, copied elsewhere, trains 4 steps on the venv's package through the service" \
  "$PY" -c "
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert d['steps'] == 4, d
assert d['remote_elements'] > 0, d" "$WORK/train.out"

make -C "$ROOT" -s wheel > "$WORK/wheel.log" 2>&1
WHEEL=$(ls "$B"/dist/spillway-*-py3-none-linux_x86_64.whl 2>/dev/null | head -1)
check "make wheel: a py3-none-linux_x86_64 wheel carrying libspillway.so" \
  bash -c "test -n '$WHEEL' && '$PY' -m zipfile -l '$WHEEL' | grep -q 'spillway/libspillway.so'"
"$PY" -m venv --system-site-packages "$WORK/venv2" > /dev/null 2>&1
"${CLEAN[@]}" "$WORK/venv2/bin/pip" install --no-index "$WHEEL" > "$WORK/pip2.log" 2>&1
(cd "$ELSEWHERE" && "${CLEAN[@]}" "$WORK/venv2/bin/python" -c "
import spillway
with spillway.Loader(spillway.Pipeline.image_folder('$B/data/cli-test/train').decode_jpeg().center_crop(8).batch(32)) as ld:
    print(sum(b.n for b in ld))") > "$WORK/wheel-run.out" 2>&1
check "the wheel installs offline into another venv and runs a pipeline (160 elements)" grep -qx 160 "$WORK/wheel-run.out"

# A package copied without its library, with nothing else to find: the error names every place tried.
mkdir -p "$WORK/bare"
cp -r "$ROOT/client/python/spillway" "$WORK/bare/"
rm -f "$WORK/bare/spillway/libspillway.so"
(cd "$WORK/bare" && "${CLEAN[@]}" "$PY" -c 'import spillway._lib as L; L.lib()') > "$WORK/bare.out" 2>&1
check "no library anywhere: OSError naming the package folder and what to do" \
  bash -c "grep -q 'cannot load libspillway.so' '$WORK/bare.out' && grep -q '$WORK/bare/spillway/libspillway.so: not there' '$WORK/bare.out'"
finish
