#!/usr/bin/env python3
"""scripts/bench/ops_pipelines.py - bench/ops.sh's pipeline specs (a)-(d) over the training set
(run by scripts/bench/ops.sh with the arguments it passes).
"""
import json, sys
train, out = sys.argv[1], sys.argv[2]
head = [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": [224, 224]},
        {"op": "random_horizontal_flip", "p": 0.5}]
norm = [{"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}]
cases = {
    "a": (head + norm, 64),
    "b": (head + [{"op": "rand_augment", "num_ops": 2, "magnitude": 9}] + norm, 64),
    "c": (head + [{"op": "auto_augment", "policy": "imagenet"}] + norm, 64),
    "d": ([{"op": "decode_jpeg"}], 1),
}
for name, (ops, batch) in cases.items():
    spec = {"source": {"format": "image_folder", "path": train, "shuffle": True, "seed": 7, "epochs": 1},
            "ops": ops, "batch": {"size": batch, "drop_remainder": False}}
    with open(f"{out}/{name}.json", "w") as f:
        json.dump(spec, f, indent=2)
        f.write("\n")
