#!/usr/bin/env bash
# scripts/dev/lint.sh - house rules that a compiler does not check: #include lines follow the room table
# (lib <- ops <- pipeline <- worker/client, lib <- dispatcher), every C file opens with its header
# comment, shell scripts pass shellcheck, Python passes pyflakes. Prints each violation; exits 1 on any.
set -euo pipefail
cd "$(dirname "$0")/../.."

fail=0
allowed() {   # room -> rooms it may include
  case "$1" in
    lib) echo "lib" ;;
    ops) echo "lib ops" ;;
    pipeline) echo "lib ops pipeline proto" ;;
    dispatcher) echo "lib pipeline proto dispatcher" ;;
    worker) echo "lib ops pipeline proto worker" ;;
    client) echo "lib pipeline proto client spillway" ;;
    tools) echo "lib ops pipeline proto client spillway tools" ;;
    *) echo "" ;;
  esac
}

for f in $(git ls-files 'lib/*.[ch]' 'ops/*.[ch]' 'pipeline/*.[ch]' 'dispatcher/*.[ch]' 'worker/*.[ch]' 'client/*.[ch]' 'tools/*.[ch]'); do
  room=${f%%/*}
  ok_rooms=$(allowed "$room")
  while IFS= read -r inc; do
    dep=${inc%%/*}
    # lib/health.c speaks the standard health.proto: the one generated header lib may include.
    [ "$f:$inc" = "lib/health.c:proto/health.pb-c.h" ] && continue
    # The op plugin ABI is a public header of C types alone (client/include/spillway/op_plugin.h, installed):
    # the pipeline loads plugins built against it.
    [ "$inc" = "spillway/op_plugin.h" ] && [ "$room" = pipeline ] && continue
    if ! grep -qw "$dep" <<<"$ok_rooms"; then
      echo "lint: $f includes \"$inc\": $room/ may include only: $ok_rooms"
      fail=1
    fi
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
  if ! head -1 "$f" | grep -q '^/\* '; then
    echo "lint: $f must open with a comment saying what it is and its thread model"
    fail=1
  fi
done

for f in $(git ls-files 'tests/*.c'); do
  head -1 "$f" | grep -q '^/\* ' || { echo "lint: $f must open with a comment saying what it proves"; fail=1; }
done

if command -v shellcheck >/dev/null; then
  # shellcheck disable=SC2046
  shellcheck -x -S warning $(git ls-files '*.sh' .ci/run) || fail=1
else
  echo "lint: shellcheck not installed; skipping shell checks"
fi
if /usr/bin/python3 -m pyflakes --version >/dev/null 2>&1; then
  # shellcheck disable=SC2046
  /usr/bin/python3 -m pyflakes $(git ls-files '*.py') || fail=1
else
  echo "lint: pyflakes not installed; skipping Python checks"
fi

if [ "$fail" -ne 0 ]; then
  echo "lint: FAILED"
  exit 1
fi
echo "lint: ok"
