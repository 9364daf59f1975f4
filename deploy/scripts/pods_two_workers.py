#!/usr/bin/env python3
"""deploy/scripts/pods_two_workers.py - the deployment check's: two workers alive, one of them the restarted one
(run by deploy/scripts/pods.sh with the arguments it passes).
"""
import json, sys
ws = json.load(open(sys.argv[1]))["workers"]
alive = sorted(w["address"] for w in ws if w["alive"])
assert len(alive) == 2 and sys.argv[2] + ":5051" in alive, ws
