#!/usr/bin/env bash
# tests/integration/pip_package.sh - the Python package as a user installs it, offline: `pip install
# ./client/python` into a fresh venv (--system-site-packages, for numpy and torch) carries libspillway.so, so
# `import spillway` works from any directory with no SPILLWAY_LIB or PYTHONPATH; examples/train_resnet.py,
# copied out of the tree, trains a few steps on it through a dispatcher and a worker; `make wheel` makes a
# manylinux_2_36 wheel whose ELF files need only glibc, libstdc++, libgcc_s and its own bundled copies; it
# installs into a second venv, and into a Debian 13 root (debootstrap, cached in build/; SKIP when the mirror
# cannot be reached) where it runs a pipeline in-process and through the host's daemons; a package with no
# library names what it tried.
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
WHEEL=$(ls "$B"/dist/spillway-*-py3-none-manylinux_2_36_x86_64.whl 2>/dev/null | head -1)
check "make wheel: a py3-none-manylinux_2_36_x86_64 wheel carrying libspillway.so and spillway/_libs/" \
  bash -c "test -n '$WHEEL' && '$PY' -m zipfile -l '$WHEEL' | grep -q 'spillway/libspillway.so' &&
    '$PY' -m zipfile -l '$WHEEL' | grep -q 'spillway/_libs/libgrpc-[0-9a-f]\{8\}\.so\.'"

# What a manylinux host provides: glibc's libraries and the GCC runtime. Every other library an ELF file in
# the wheel needs must be a file its RUNPATH finds inside the wheel; and no glibc symbol version may be newer
# than the tag's 2.36.
ALLOWED=" libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libresolv.so.2 ld-linux-x86-64.so.2 "
ALLOWED+="libstdc++.so.6 libgcc_s.so.1 "
UNZIPPED=$WORK/wheel-files
"$PY" -m zipfile -e "$WHEEL" "$UNZIPPED" 2> /dev/null
# wheel_needs_ok: every ELF file's NEEDED entries are allowed or bundled (each offender printed); more than
# the two Spillway libraries were checked.
wheel_needs_ok() {
  local f n d rp found elves=0 bad=0
  local -a dirs
  while IFS= read -r -d '' f; do
    readelf -h "$f" > /dev/null 2>&1 || continue
    elves=$((elves + 1))
    rp=$(readelf -d "$f" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p')
    IFS=: read -ra dirs <<< "$rp"
    for n in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'); do
      [[ $ALLOWED == *" $n "* ]] && continue
      found=
      for d in "${dirs[@]}"; do
        d=${d//\$ORIGIN/$(dirname "$f")}
        [ -f "$d/$n" ] && [[ $(realpath "$d") == "$UNZIPPED"/* ]] && found=1
      done
      [ -n "$found" ] || { echo "  ${f#"$UNZIPPED"/} needs $n (RUNPATH '$rp'): not in the wheel"; bad=1; }
    done
  done < <(find "$UNZIPPED" -type f -print0)
  echo "  $elves ELF files in the wheel"
  [ "$bad" = 0 ] && [ "$elves" -gt 50 ]
}
check "readelf -d: every ELF file in the wheel needs only glibc, libstdc++, libgcc_s or its bundled copies" \
  wheel_needs_ok
GLIBC_NEED=$(find "$UNZIPPED" -type f -exec readelf -V -W {} + 2> /dev/null | sed -n 's/.*Name: GLIBC_\(2\.[0-9]*\) .*/\1/p' |
  sort -V | tail -1)
check "readelf -V: the wheel needs glibc $GLIBC_NEED, no newer than its tag's 2.36" \
  bash -c "[ -n '$GLIBC_NEED' ] && printf '%s\n' '$GLIBC_NEED' 2.36 | sort -V -C"

"$PY" -m venv --system-site-packages "$WORK/venv2" > /dev/null 2>&1
"${CLEAN[@]}" "$WORK/venv2/bin/pip" install --no-index "$WHEEL" > "$WORK/pip2.log" 2>&1
(cd "$ELSEWHERE" && "${CLEAN[@]}" "$WORK/venv2/bin/python" -c "
import spillway
with spillway.Loader(spillway.Pipeline.image_folder('$B/data/cli-test/train').decode_jpeg().center_crop(8).batch(32)) as ld:
    print(sum(b.n for b in ld))") > "$WORK/wheel-run.out" 2>&1
check "the wheel installs offline into another venv and runs a pipeline (160 elements)" grep -qx 160 "$WORK/wheel-run.out"

# A foreign host: a Debian 13 (trixie) root with python3, numpy and pip alone (none of Spillway's libraries),
# made once with debootstrap from this machine's Debian mirror and kept in $B/trixie-root. The wheel is
# installed into a venv there and runs a pipeline in-process and through this tree's dispatcher and worker
# on the host's 127.0.0.1 (a chroot shares the host's network). Every command in the root runs in a mount
# namespace of its own (unshare), where /proc, /dev and the dataset (at its host path, which the worker
# reads too) are mounted: the mounts vanish with it, so none can outlive the test under build/.
TRIXIE=$B/trixie-root
# debian_mirror: the first Debian archive URL in apt's sources (not the security archive).
debian_mirror() {
  { sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\(https\{0,1\}:[^ ]*\) .*/\2/p' /etc/apt/sources.list 2> /dev/null
    cat /etc/apt/sources.list.d/*.sources 2> /dev/null | sed -n 's/^URIs: *\([^ ]*\).*/\1/p'
    cat /etc/apt/sources.list.d/*.list 2> /dev/null | sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\(https\{0,1\}:[^ ]*\) .*/\2/p'
  } | grep -v security | grep -E '/debian/?$' | head -1
}
trixie_skip=
MIRROR=${SPW_DEBIAN_MIRROR:-$(debian_mirror)}
if [ "$(id -u)" != 0 ]; then
  trixie_skip="needs root (debootstrap, chroot, mounts)"
elif [ -f "$TRIXIE/.spillway-root-complete" ]; then
  :
elif ! command -v debootstrap > /dev/null || ! command -v curl > /dev/null; then
  trixie_skip="needs debootstrap and curl (scripts/install-deps.sh)"
elif [ -z "$MIRROR" ]; then
  trixie_skip="no Debian mirror in /etc/apt/sources.list or sources.list.d (set SPW_DEBIAN_MIRROR)"
elif ! curl -fsS --max-time 30 -o /dev/null "$MIRROR/dists/trixie/Release" 2> "$WORK/mirror.err"; then
  trixie_skip="cannot reach the Debian mirror $MIRROR for debootstrap: $(head -1 "$WORK/mirror.err")"
else
  echo "     (making a trixie root in $TRIXIE from $MIRROR: a minute or two, once)"
  rm -rf "$TRIXIE.tmp"
  if unshare --mount --propagation private debootstrap --variant=minbase \
      --include=python3,python3-numpy,python3-pip,python3-venv trixie "$TRIXIE.tmp" "$MIRROR" \
      > "$WORK/debootstrap.log" 2>&1; then
    touch "$TRIXIE.tmp/.spillway-root-complete"
    rm -rf "$TRIXIE"
    mv "$TRIXIE.tmp" "$TRIXIE"
  else
    bad "debootstrap of a trixie root from $MIRROR (which answers): $(grep '^[EW]:' "$WORK/debootstrap.log" | tail -1)"
    trixie_skip="debootstrap failed (above)"
  fi
fi

if [ -n "$trixie_skip" ]; then
  echo "SKIP the wheel on Debian 13 (trixie): $trixie_skip"
else
  RUN_IN=/tmp/spillway-pip-$$
  trap 'cleanup; rm -rf "${TRIXIE:?}$RUN_IN"' EXIT
  mkdir -p "$TRIXIE$RUN_IN" "$TRIXIE$B/data/cli-test"
  cp "$WHEEL" "$ROOT/tests/integration/wheel_probe.py" "$TRIXIE$RUN_IN/"
  # in_trixie CMD...: CMD in the root with an empty environment (PATH, HOME, and SPILLWAY_CUT as the suite's).
  in_trixie() {
    unshare --mount --propagation private -- sh -c '
      r=$1 data=$2; shift 2
      mount -t proc proc "$r/proc" && mount --bind /dev "$r/dev" && mount --bind -o ro "$data" "$r$data" &&
        exec chroot "$r" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 SPILLWAY_CUT=all "$@"' \
      sh "$TRIXIE" "$B/data/cli-test" "$@"
  }
  SPW_SO='^lib(grpc|gpr|protobuf-c|jpeg|png16|webp|fftw3f|curl|archive|jansson|microhttpd|FLAC|mpg123|opusfile)\.so'
  check "the trixie root has none of Spillway's libraries (gRPC, protobuf-c, jpeg, png, webp, fftw, curl...)" \
    bash -c "! ls '$TRIXIE/usr/lib/x86_64-linux-gnu' | grep -E '$SPW_SO'"
  # trixie_pip: a venv in the root (system numpy visible) and the wheel installed into it, offline.
  trixie_pip() {
    in_trixie python3 -m venv --system-site-packages "$RUN_IN/venv" > "$WORK/trixie-pip.log" 2>&1 &&
      in_trixie "$RUN_IN/venv/bin/pip" install --no-index "$RUN_IN/$(basename "$WHEEL")" \
        >> "$WORK/trixie-pip.log" 2>&1 || { tail -5 "$WORK/trixie-pip.log"; return 1; }
  }
  check "trixie: pip installs the manylinux wheel into a venv, offline" trixie_pip
  # trixie_ok OUT REMOTE: the probe's JSON in OUT says Debian 13's glibc, the venv's libspillway.so, 160
  # elements (of which some from workers when REMOTE is 1), and libraries mapped from the bundle; else
  # the probe's stderr (OUT's .err) is shown.
  trixie_ok() {
    "$PY" - "$1" "$2" "$RUN_IN" << 'EOF' || { tail -5 "${1%.out}.err"; return 1; }
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
remote, run_in = sys.argv[2] == "1", sys.argv[3]
bundled = [m for m in d["mapped"] if "/site-packages/spillway/_libs/" in m]
print("     trixie: %s, Python %s, %d elements (%d remote), %d bundled libraries mapped"
      % (d["glibc"], d["python"], d["elements"], d["remote_elements"], len(bundled)))
assert d["glibc"].startswith("glibc 2.") and d["glibc"] != "glibc 2.36", d["glibc"]
assert d["lib"].startswith(run_in + "/venv/") and d["lib"].endswith("/spillway/libspillway.so"), d["lib"]
assert d["elements"] == 160, d["elements"]
assert (d["remote_elements"] > 0) == remote, d["remote_elements"]
assert any("/_libs/libgrpc-" in m for m in bundled) and len(bundled) > 50, bundled
EOF
  }
  in_trixie "$RUN_IN/venv/bin/python" "$RUN_IN/wheel_probe.py" "$B/data/cli-test/train" \
    > "$WORK/trixie-local.out" 2> "$WORK/trixie-local.err"
  check "trixie: import spillway and a local pipeline run (160 elements) on the bundled libraries" \
    trixie_ok "$WORK/trixie-local.out" 0
  in_trixie timeout 120 "$RUN_IN/venv/bin/python" "$RUN_IN/wheel_probe.py" "$B/data/cli-test/train" \
    "127.0.0.1:$DPORT" > "$WORK/trixie-remote.out" 2> "$WORK/trixie-remote.err"
  check "trixie: the same pipeline through the host's dispatcher and worker on 127.0.0.1 (160 elements)" \
    trixie_ok "$WORK/trixie-remote.out" 1
fi

# A package copied without its library, with nothing else to find: the error names every place tried.
mkdir -p "$WORK/bare"
cp -r "$ROOT/client/python/spillway" "$WORK/bare/"
rm -f "$WORK/bare/spillway/libspillway.so"
(cd "$WORK/bare" && "${CLEAN[@]}" "$PY" -c 'import spillway._lib as L; L.lib()') > "$WORK/bare.out" 2>&1
check "no library anywhere: OSError naming the package folder and what to do" \
  bash -c "grep -q 'cannot load libspillway.so' '$WORK/bare.out' && grep -q '$WORK/bare/spillway/libspillway.so: not there' '$WORK/bare.out'"
finish
