#!/usr/bin/env python3
"""deploy/scripts/pods_job_done.py - the deployment check's: the job in the dispatcher's table finished
(run by deploy/scripts/pods.sh with the arguments it passes).
"""
import json, sys
made = [p["elements"] for p in json.load(open(sys.argv[1]))["producers"] if p["producer"].startswith("worker:")]
assert len(made) == 2 and min(made) > 0, made
