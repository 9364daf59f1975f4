#!/usr/bin/env python3
"""scripts/demo_parts.py - the demo's Python parts (scripts/demo.sh runs them): the pipeline specs it
writes, and what it prints of spillctl's reports. Run as demo_parts.py NAME ARGS...; the function reads ARGS as
sys.argv[1:]."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))


def specs():
    """The train and eval pipeline specs over the data set (argv 1), written into argv 2."""
    import json, sys
    data, out = sys.argv[1], sys.argv[2]
    norm = {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}
    train = {"source": {"format": "image_folder", "path": f"{data}/train", "shuffle": True, "seed": 7, "epochs": 1},
             "ops": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [224, 224]},
                     {"op": "random_horizontal_flip", "p": 0.5}, {"op": "rand_augment", "num_ops": 2, "magnitude": 9},
                     norm],
             "batch": {"size": 64, "drop_remainder": False}}
    # Eval as torchvision recipes do it: Resize(256) (shorter side to 256) + CenterCrop(224) + Normalize.
    evalp = {"source": {"format": "image_folder", "path": f"{data}/val", "shuffle": False, "epochs": 1},
             "ops": [{"op": "decode_jpeg"}, {"op": "resize", "size": 256}, {"op": "center_crop", "size": [224, 224]},
                     norm],
             "batch": {"size": 64, "drop_remainder": False}}
    for name, spec in (("train", train), ("eval", evalp)):
        with open(f"{out}/{name}.json", "w") as f:
            json.dump(spec, f, indent=2)
            f.write("\n")


def train_summary():
    """The train run's throughput, fusion groups and where the time goes (report: argv 1)."""
    import sys
    import spw_report
    obj = spw_report.run_report(sys.argv[1])
    print("   %d elements in %d batches, %.2f s: %.0f elements/s" % (
        obj["elements"], obj["batches"], obj["seconds"], obj["elements_per_s"]))
    print("   fusion groups (the cut points): " + " | ".join("+".join(g["ops"]) for g in obj["groups"]))
    ops = sorted(obj["ops"], key=lambda o: -o["ns_per_element"])
    total = sum(o["ns_per_element"] for o in ops) or 1
    print("   where the time goes (time per element in its worker thread):")
    for o in ops:
        print("     %-58s %6.1f us  %5.1f%%   out %6.0f kB" % (o["name"], o["ns_per_element"] / 1e3,
              100 * o["ns_per_element"] / total, o["out_bytes_per_element"] / 1e3))


def eval_check():
    """The eval run's summary; exits non-zero unless it returned the val set's argv 2 elements."""
    import sys
    import spw_report
    n_val = int(sys.argv[2])
    obj = spw_report.run_report(sys.argv[1], ("elements",))
    ok = int(obj["elements"]) == n_val
    print("   %d elements in %s batches (val set: %d images) %.0f elements/s  %s" % (
        obj["elements"], obj.get("batches", "?"), n_val, obj["elements_per_s"], "OK" if ok else "MISMATCH"))
    sys.exit(0 if ok else "demo: error: the eval pipeline returned %d elements, the val set has %d" % (obj["elements"], n_val))


def service_summary():
    """The service run (argv 1) beside the local one (argv 2) on argv 3 cores; exits non-zero when they differ."""
    import sys
    import spw_report
    svc = spw_report.run_report(sys.argv[1], ("elements", "batches", "seconds", "elements_per_s", "producers", "cut",
                                             "groups"))
    loc = spw_report.run_report(sys.argv[2], ("elements", "elements_per_s", "threads"))
    p = svc["producers"]
    print("   service: %d elements in %d batches, %.2f s: %.0f elements/s (from workers %d, client threads %d, "
          "rescued %d; cut %d of %d groups)" % (svc["elements"], svc["batches"], svc["seconds"], svc["elements_per_s"],
          p["remote"], p["local"], p["rescue"], svc["cut"], len(svc["groups"])))
    print("   local:   %d elements, %.0f elements/s with %d threads in one process" % (
          loc["elements"], loc["elements_per_s"], loc["threads"]))
    print("   (here all of it shares this machine's %s cores; on a real cluster the workers add their own cores)" % sys.argv[3])
    sys.exit(0 if svc["elements"] == loc["elements"] else "demo: error: the service delivered %d elements, the local run %d" % (svc["elements"], loc["elements"]))


if __name__ == "__main__":
    part = globals()[sys.argv[1]]
    sys.argv = [sys.argv[0]] + sys.argv[2:]
    part()
