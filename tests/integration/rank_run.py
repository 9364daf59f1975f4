# tests/integration/rank_run.py - one trainer rank for the restart tests (not a test itself): a Loader on the
# 160-image set through DISPATCHER, consuming at RATE elements/s, writing "epoch sample" per element to KEYS.
#   rank_run.py DATA DISPATCHER NAME RANK WORLD RATE KEYS [--stop-after N --state OUT] [--resume IN]
#               [--epochs E (default 3)]
# --stop-after N: take N batches, save state_dict() to OUT (json), exit (a trainer that checkpoints and
# stops); --resume IN: go on from such a state. Prints "job ID" at the end; exit 0 when the run ends normally.
# One thread.
import argparse
import json
import sys
import time

from spillway import Loader, Pipeline

a = argparse.ArgumentParser()
for name in ("data", "dispatcher", "name"):
    a.add_argument(name)
for name in ("rank", "world"):
    a.add_argument(name, type=int)
a.add_argument("rate", type=float)
a.add_argument("keys")
a.add_argument("--stop-after", type=int, default=0)
a.add_argument("--state")
a.add_argument("--resume")
a.add_argument("--epochs", type=int, default=3)
o = a.parse_args()
p = Pipeline.image_folder(o.data, shuffle=True, seed=5, epochs=o.epochs).decode_jpeg().center_crop(32).batch(16)
resume = json.load(open(o.resume)) if o.resume else None
with Loader(p, dispatcher=o.dispatcher, job_name=o.name or None, rank=o.rank, world_size=o.world, local_cores=0,
            split_size=16, resume=resume) as loader, open(o.keys, "w") as out:
    t0, n, batches = time.monotonic(), 0, 0
    for b in loader.batches():
        for k in b.keys:
            out.write("%d %d\n" % (k.epoch, k.sample))
        n += b.n
        batches += 1
        if o.stop_after and batches == o.stop_after:
            json.dump(loader.state_dict(), open(o.state, "w"))
            break
        ahead = n / o.rate - (time.monotonic() - t0)
        if ahead > 0:
            time.sleep(ahead)
    print("job %d" % loader.stats()["job"])
sys.exit(0)
