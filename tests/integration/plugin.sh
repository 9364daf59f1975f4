#!/usr/bin/env bash
# tests/integration/plugin.sh - a C op plugin as a user builds and deploys it: make install into a temporary
# prefix, examples/op_plugin built out of tree with its Makefile (pkg-config only). In-process, blur.box is
# byte-equal to a numpy reference of its rule; `spillctl ops` lists its ops; a plugin built for another ABI is
# refused at load with both numbers. Through a dispatcher and two workers started with --op-plugins (and a
# third without, which refuses the job naming the op), box + flip_h (a random draw per element) give the
# in-process batches byte for byte, ordered. A field outside the plugin's range is a spec error; an element
# it does not take fails with its message. A plugin with per-thread state gets one per thread, each ended
# with its thread. Real processes on loopback; kills all it starts.
set -uo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
PFX=$WORK/prefix
make -C "$ROOT" -s install PREFIX="$PFX" > "$WORK/install.log" 2>&1 || { bad "make install"; finish; exit 1; }
cp -r "$ROOT/examples/op_plugin" "$WORK/plugin"
env -i PATH=/usr/bin:/bin PKG_CONFIG_PATH="$PFX/lib/pkgconfig" make -C "$WORK/plugin" > "$WORK/build.log" 2>&1
check "the example plugin builds with its Makefile against the installed library" test -f "$WORK/plugin/libspw_blur.so"
export SPILLWAY_OP_PLUGINS=$WORK/plugin/libspw_blur.so
CTL=$PFX/bin/spillctl

"$CTL" ops > "$WORK/ops.txt" 2> /dev/null
check "spillctl ops lists blur.box and blur.flip_h with their defaults" \
  bash -c "grep -q '^blur.box  *user  *radius=1' '$WORK/ops.txt' &&
           grep -q '^blur.flip_h  *user  *p=0.5' '$WORK/ops.txt'"
sed 's/SPW_OP_PLUGIN_ABI, "blur"/99, "old"/' "$WORK/plugin/blur.c" > "$WORK/old.c"
cc -std=c11 -fPIC -shared -I"$PFX/include" -o "$WORK/libspw_old.so" "$WORK/old.c"
SPILLWAY_OP_PLUGINS=$WORK/libspw_old.so "$CTL" ops --json 2> /dev/null > "$WORK/old.json"
check "a plugin built for another ABI is refused, both numbers said" \
  grep -q 'built for op plugin ABI 99; this Spillway loads ABI 1' "$WORK/old.json"

bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null
spec() {    # spec FILE OPS...: the 160-image set, a 24-pixel centre crop, then OPS
  local f=$1 ops
  shift
  ops=$(IFS=,; echo "$*")
  cat > "$f" <<JSON
{"source": {"format": "image_folder", "path": "$B/data/cli-test/train", "seed": 2, "epochs": 2},
 "ops": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": 24}${ops:+, $ops}], "batch": {"size": 16}}
JSON
}
spec "$WORK/plain.json"
spec "$WORK/box.json" '{"op": "blur.box", "radius": 2}'
spec "$WORK/both.json" '{"op": "blur.box", "radius": 1}' '{"op": "blur.flip_h", "p": 0.5}'
"$CTL" run --local --pipeline "$WORK/plain.json" --threads 2 --dump "$WORK/plain" --quiet 2> /dev/null &&
  "$CTL" run --local --pipeline "$WORK/box.json" --threads 2 --dump "$WORK/box" --quiet 2> /dev/null
check "in-process runs with the plugin succeed" test $? -eq 0
"$PY" "$ROOT/tests/integration/checks.py" plugin_1 "$WORK/plain" "$WORK/box" > "$WORK/ref.out" 2>&1
check "blur.box is byte-equal to the numpy reference ($(cat "$WORK/ref.out"))" \
  grep -q 'batches 20 same True' "$WORK/ref.out"
"$CTL" run --local --pipeline "$WORK/both.json" --threads 1 --dump "$WORK/local1" --quiet 2> /dev/null
"$CTL" run --local --pipeline "$WORK/both.json" --threads 3 --dump "$WORK/local" --quiet 2> /dev/null
same_dump() {   # every file of dump $2 is in dump $1, byte for byte, and no more
  [ "$(ls "$1" | wc -l)" = "$(ls "$2" | wc -l)" ] || return 1
  for f in "$2"/*; do cmp -s "$f" "$1/$(basename "$f")" || return 1; done
}
check "flip_h's draws do not depend on the thread count (1 and 3 threads: the same batches)" \
  same_dump "$WORK/local1" "$WORK/local"
# What the plugin refuses: a field outside its range is a spec error naming it; an element it does not take
# (a float tensor after to_tensor) fails with the plugin's own message, under on_error.
spec "$WORK/wide.json" '{"op": "blur.box", "radius": 99}'
"$CTL" validate --pipeline "$WORK/wide.json" > /dev/null 2> "$WORK/wide.err"
check "radius 99: a spec error naming the field and the plugin's range (exit $?)" \
  grep -q 'ops\[2\].radius: 99 is outside \[0, 16\]' "$WORK/wide.err"
spec "$WORK/tensor.json" '{"op": "to_tensor"}' '{"op": "blur.box"}'
"$CTL" run --local --pipeline "$WORK/tensor.json" --threads 1 --keys "$WORK/tensor.keys" --quiet 2> "$WORK/tensor.err"
check "a tensor into blur.box: the run ends (exit $?), nothing delivered" test ! -s "$WORK/tensor.keys"
check "... each element failed with the plugin's message" \
  grep -q 'ops\[3\] blur.box: needs a uint8 RGB image \[h, w, 3\] (put it before normalize)' "$WORK/tensor.err"
spec "$WORK/box1.json" '{"op": "blur.box", "radius": 1}'
"$CTL" run --local --pipeline "$WORK/box1.json" --threads 2 --dump "$WORK/box1" --quiet 2> /dev/null
flipped=$("$PY" -c '
import glob, sys
import numpy as np
a = np.concatenate([np.load(f) for f in sorted(glob.glob(sys.argv[1] + "/b*_t0.npy"))])
b = np.concatenate([np.load(f) for f in sorted(glob.glob(sys.argv[2] + "/b*_t0.npy"))])
print(sum(int((x != y).any() and (x[:, ::-1] == y).all()) for x, y in zip(a, b)))' "$WORK/box1" "$WORK/local")
check "flip_h mirrored some elements and left the others (p 0.5: $flipped of 320 mirrored)" \
  test "${flipped:-0}" -gt 100 -a "${flipped:-0}" -lt 220

# Per-thread state: a plugin whose op adds its thread's count of elements made so far to the first pixel;
# thread_init and thread_fini note themselves in a file: one state per thread, each ended with its thread.
cat > "$WORK/counter.c" <<'CEOF'
#include <spillway/op_plugin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct count { long n; };
static void note(const char *what)
{
    FILE *f = fopen(getenv("COUNTER_LOG"), "a");
    if (f) { fprintf(f, "%s\n", what); fclose(f); }
}
static void *init(const double *params) { (void)params; note("init"); return calloc(1, sizeof(struct count)); }
static void fini(void *state) { note("fini"); free(state); }
static int same(const struct spw_plugin_call *c, const struct spw_plugin_array *in, struct spw_plugin_array *out,
                char *err, size_t len) { (void)c, (void)err, (void)len; *out = *in; return 0; }
static int run(const struct spw_plugin_call *c, const struct spw_plugin_array *in, struct spw_plugin_array *out,
               char *err, size_t len)
{
    (void)err, (void)len;
    struct count *s = c->state;
    size_t n = 1;
    for (int i = 0; i < in->ndim; i++) n *= (size_t)in->shape[i];
    memcpy(out->data, in->data, n);
    ((unsigned char *)out->data)[0] = (unsigned char)(++s->n);
    return 0;
}
static const struct spw_plugin_op ops[] = {{"mark", "Counts per thread.", NULL, 0, same, run, init, fini}};
static const struct spw_op_plugin p = {SPW_OP_PLUGIN_ABI, "counter", "1", ops, 1};
__attribute__((visibility("default"))) const struct spw_op_plugin *spw_op_plugin(void) { return &p; }
CEOF
cc -std=c11 -Wall -Wextra -Werror -fPIC -shared -I"$PFX/include" -o "$WORK/libspw_counter.so" "$WORK/counter.c"
spec "$WORK/count.json" '{"op": "counter.mark"}'
COUNTER_LOG=$WORK/counter.log SPILLWAY_OP_PLUGINS=$WORK/libspw_counter.so "$CTL" run --local \
  --pipeline "$WORK/count.json" --threads 3 --keys "$WORK/count.keys" --quiet 2> "$WORK/count.err"
check "a plugin with per-thread state runs (exit $?)" test "$(wc -l < "$WORK/count.keys")" -eq 320
inits=$(grep -c '^init$' "$WORK/counter.log")
finis=$(grep -c '^fini$' "$WORK/counter.log")
check "... one state per thread that made elements ($inits of at most 3), each ended with it ($finis)" \
  test "$inits" -ge 1 -a "$inits" -le 3 -a "$finis" -eq "$inits"

dispatcher_on d --op-plugins "$SPILLWAY_OP_PLUGINS" || { finish; exit 1; }
for j in 1 2; do
  "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 --threads 1 \
    --op-plugins "$SPILLWAY_OP_PLUGINS" > "$WORK/w$j.out" 2> "$WORK/w$j.err" &
  PIDS+=($!)
  wait_port "$WORK/w$j.out" > /dev/null || bad "worker $j starts"
done
SPILLWAY_OP_PLUGINS='' "$B/bin/spillway-worker" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1 --port 0 \
  --threads 1 > "$WORK/w3.out" 2> "$WORK/w3.err" &
PIDS+=($!)
wait_port "$WORK/w3.out" > /dev/null || bad "worker 3 starts"
sleep 0.3
timeout 120 "$B/bin/spillctl" run --dispatcher "127.0.0.1:$DPORT" --pipeline "$WORK/both.json" --cut all \
  --local-cores 0 --ordered --dump "$WORK/remote" --json --quiet > "$WORK/remote.json" 2> "$WORK/remote.err"
check "through the workers (--cut all): exit 0" test $? -eq 0
check "... the in-process batches, byte for byte" same_dump "$WORK/remote" "$WORK/local"
check "... all 320 elements made by the workers" grep -q '"remote": 320' "$WORK/remote.json"
check "the worker without the plugin refused the job, naming the op" \
  grep -q 'cannot serve job=1: ops\[2\]: unknown op "blur.box": no loaded op plugin has it' "$WORK/w3.err"
finish
