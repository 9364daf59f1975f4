#!/bin/sh
# deploy/entrypoint.sh - the image's entry point: the first argument picks the role (dispatcher, worker,
# spillctl), the rest go to that binary, which becomes PID 1 (exec) and handles SIGTERM itself (drain).
set -e
role=${1:-}
[ $# -gt 0 ] && shift
case "$role" in
  dispatcher) exec spillway-dispatcher "$@" ;;
  worker) exec spillway-worker "$@" ;;
  spillctl | ctl) exec spillctl "$@" ;;
  --version) exec spillctl --version ;;
  "" | --help | -h)
    echo "usage: IMAGE dispatcher|worker|spillctl [FLAGS...]   (FLAGS: IMAGE ROLE --help; env SPILLWAY_*)"
    exit 0 ;;
  *) exec "$role" "$@" ;;
esac
