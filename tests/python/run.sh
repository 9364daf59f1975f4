#!/usr/bin/env bash
# tests/python/run.sh - the Python package's tests (spillway, spillway.torch; tests/python/test_*.py, unittest)
# against the build in $SPW_BUILD (default build/): sets PYTHONPATH and SPILLWAY_LIB, makes the two small
# datasets (cached), and runs every test verbosely; exits non-zero on any failure.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${SPW_BUILD:-$ROOT/build}" && pwd)
export SPW_BUILD=$B
export PYTHONPATH=$ROOT/client/python${PYTHONPATH:+:$PYTHONPATH}
export SPILLWAY_LIB=$B/lib/libspillway.so
[ -f "$SPILLWAY_LIB" ] || { echo "tests/python: $SPILLWAY_LIB is missing (make all)" >&2; exit 1; }
bash "$ROOT/scripts/data/make-dataset.sh" "$B/data/cli-test" 160 > /dev/null
bash "$ROOT/scripts/data/make-audio-dataset.sh" "$B/data/speech-test" 20 > /dev/null
cd "$ROOT"
exec /usr/bin/python3 -m unittest discover -s tests/python -t tests/python -v
