"""tests/equiv/fused_run.py - one element through tests/equiv/fusedcheck (the engine's element runner on one
image file), for the equivalence scripts: returns the output array and fusedcheck's JSON report."""
import json
import os
import subprocess

import numpy as np


def fused_run(fused, tmp, ops, img, sample=0):
    spec = {"source": {"format": "image_folder", "path": "/nonexistent", "seed": 5},
            "ops": ops, "batch": {"size": 1}}
    sp, out = os.path.join(tmp, "spec.json"), os.path.join(tmp, "out.npy")
    with open(sp, "w") as f:
        json.dump(spec, f)
    r = subprocess.run([fused, "run", sp, img, out, str(sample)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())
    return np.load(out), json.loads(r.stdout)
