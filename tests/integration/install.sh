#!/usr/bin/env bash
# tests/integration/install.sh - the library as a user installs it: make install into a temporary prefix
# (with DESTDIR staging too), then, with nothing of the repository on any path, examples/c_trainer.c built
# out of tree with `pkg-config --cflags --libs spillway` only (and spillway-static), run in-process and
# through the installed dispatcher and worker (keys exactly the local run's); libspillway.so exports only
# the header's spw_ functions; the header compiles alone as C and C++; man pages and --help/--version of the
# installed binaries; make uninstall leaves nothing behind.
source "$(dirname "$0")/lib.sh"
PFX=$WORK/prefix

make -C "$ROOT" -s install PREFIX="$PFX" > "$WORK/install.log" 2>&1
check "make install PREFIX=... succeeds" test $? -eq 0
for f in bin/spillctl bin/spillway-dispatcher bin/spillway-worker include/spillway/client.h lib/libspillway.a \
         lib/libspillway.so lib/libspillway.so.0 lib/pkgconfig/spillway.pc lib/pkgconfig/spillway-static.pc \
         share/man/man1/spillctl.1 \
         share/man/man1/spillway-dispatcher.1 share/man/man1/spillway-worker.1; do
  check "installed: $f" test -e "$PFX/$f"
done
MANWIDTH=200 man -l "$PFX/share/man/man1/spillctl.1" 2>/dev/null | col -b > "$WORK/spillctl.man"
check "man spillctl renders (NAME, the commands)" bash -c "grep -q 'spillctl - run pipelines' '$WORK/spillctl.man' && grep -q 'explain ID' '$WORK/spillctl.man'"
PYDIR=$(find "$PFX/lib" -maxdepth 3 -type d -name dist-packages)
check "the Python package is installed, its libspillway.so a link to the installed library" \
  bash -c "test -f '$PYDIR/spillway/loader.py' && test \"\$(readlink -f '$PYDIR/spillway/libspillway.so')\" = \"\$(readlink -f '$PFX/lib/libspillway.so.0')\""

# Exports: exactly the functions the header declares SPW_API.
nm -D --defined-only "$PFX/lib/libspillway.so.0" | awk '{print $3}' | sort > "$WORK/exported"
sed -n 's/^SPW_API [^(]*[ *]\(spw_[a-z0-9_]*\)(.*/\1/p' "$PFX/include/spillway/client.h" | sort > "$WORK/declared"
check "nm -D: every exported symbol is a spw_ function" bash -c "test -s '$WORK/exported' && ! grep -v '^spw_' '$WORK/exported'"
check "nm -D: exactly the header's SPW_API functions ($(wc -l < "$WORK/declared"))" diff "$WORK/declared" "$WORK/exported"
check "the soname is libspillway.so.0" bash -c "readelf -d '$PFX/lib/libspillway.so.0' | grep -q 'SONAME.*libspillway.so.0'"

# Out of tree: a copy of the example in an empty folder, only the prefix's pkg-config path and loader path.
SRC=$WORK/user
mkdir -p "$SRC"
cp "$ROOT/examples/c_trainer.c" "$SRC/"
# PKG_CONFIG_LIBDIR: no other package's .pc file is found, as on a trainer host with only runtime libraries.
USER_ENV=(env -i PATH=/usr/bin:/bin HOME="$WORK" PKG_CONFIG_LIBDIR="$PFX/lib/pkgconfig" LD_LIBRARY_PATH="$PFX/lib")
( cd "$SRC" && "${USER_ENV[@]}" sh -c 'cc -std=c11 -Wall -Wextra -Werror c_trainer.c $(pkg-config --cflags --libs spillway) -o c_trainer' ) \
  > "$WORK/cc.log" 2>&1
check "c_trainer builds with pkg-config --cflags --libs spillway only (no other .pc file on the path)" test $? -eq 0
check "... its flags are the header's folder and -lspillway, nothing of the dependencies'" \
  bash -c "test \"\$(${USER_ENV[*]} pkg-config --cflags --libs spillway | sed 's/ *$//')\" = '-I$PFX/include -L$PFX/lib -lspillway'"
# libspillway.a linked in, its dependencies shared: spillway-static.pc names them.
( cd "$SRC" && "${USER_ENV[@]}" sh -c 'cc -std=c11 c_trainer.c $(pkg-config --cflags --libs spillway-static) -o c_trainer_static' ) \
  > "$WORK/cc-static.log" 2>&1
check "... and with pkg-config --cflags --libs spillway-static (libspillway.a linked in)" bash -c "test -x '$SRC/c_trainer_static' && ! ldd '$SRC/c_trainer_static' | grep -q libspillway"
check "the header compiles alone, as C99 and as C++" bash -c "cd '$SRC' && printf '#include <spillway/client.h>\nint main(void) { return SPW_ECLOSED < 0 ? 0 : 1; }\n' > h.c && cc -std=c99 -Wall -Wextra -Werror -I'$PFX/include' -c h.c -o h.o && cp h.c h.cc && g++ -Wall -Werror -I'$PFX/include' -c h.cc -o hxx.o"

image_job "$WORK/job.json" 5 2 "$WORK/local.keys" || bad "local reference run"
"${USER_ENV[@]}" "$SRC/c_trainer" --keys "$WORK/inproc.keys" "$WORK/job.json" > "$WORK/inproc.out" 2>&1
check "c_trainer in-process: 2 epochs of 160, keys as spillctl's local run" \
  bash -c "grep -q '320 elements in 20 batches' '$WORK/inproc.out' && diff -q '$WORK/local.keys' '$WORK/inproc.keys'"
check "c_trainer reads the data tensor's dtype and shape" grep -q 'epoch 1: data uint8 \[16, 32, 32, 3\]' "$WORK/inproc.out"

B=$PFX start_service 1 || { finish; exit 1; }
"${USER_ENV[@]}" "$SRC/c_trainer" --dispatcher "127.0.0.1:$DPORT" --keys "$WORK/svc.keys" "$WORK/job.json" \
  > "$WORK/svc.out" 2>&1
check "c_trainer through the installed dispatcher and worker: 320 elements, some from the worker" \
  bash -c "grep -Eq '320 elements in 20 batches \\([1-9][0-9]* from workers\\)' '$WORK/svc.out'"
check "... every sample of each epoch exactly once (keys = the local run's as sets)" \
  bash -c "diff <(sort '$WORK/local.keys') <(sort '$WORK/svc.keys')"
"${USER_ENV[@]}" "$SRC/c_trainer_static" --dispatcher "127.0.0.1:$DPORT" "$WORK/job.json" > "$WORK/static.out" 2>&1
check "the static build runs through the service too" grep -q '320 elements in 20 batches' "$WORK/static.out"
sed 's/"size": 16/"size": 0/' "$WORK/job.json" > "$WORK/bad.json"
"${USER_ENV[@]}" "$SRC/c_trainer" "$WORK/bad.json" > "$WORK/bad.out" 2>&1
check "a bad spec: exit 2 and the validator's message (field named)" bash -c "test $? -eq 2 && grep -q 'batch.size' '$WORK/bad.out'"

check "installed spillctl --version is the release's" bash -c "'$PFX/bin/spillctl' --version | grep -q '^spillway '"
for d in spillway-dispatcher spillway-worker; do
  check "installed $d --help and --version exit 0" bash -c "'$PFX/bin/$d' --help > /dev/null && '$PFX/bin/$d' --version > /dev/null"
done

# DESTDIR stages under another root with the same layout; uninstall removes every file install made.
make -C "$ROOT" -s install PREFIX=/opt/spw DESTDIR="$WORK/stage" > "$WORK/stage.log" 2>&1
check "make install DESTDIR=... PREFIX=/opt/spw stages under DESTDIR, .pc naming the final prefix" \
  bash -c "grep -q '^prefix=/opt/spw' '$WORK/stage/opt/spw/lib/pkgconfig/spillway.pc' && test -x '$WORK/stage/opt/spw/bin/spillctl'"
make -C "$ROOT" -s uninstall PREFIX=/opt/spw DESTDIR="$WORK/stage" > "$WORK/unstage.log" 2>&1
check "make uninstall leaves no file behind" bash -c "test -z \"\$(find '$WORK/stage' -type f -o -type l)\""
finish
