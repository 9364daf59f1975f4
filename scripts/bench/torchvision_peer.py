#!/usr/bin/python3
"""scripts/bench/torchvision_peer.py - the torchvision + PIL side of scripts/bench/ops.sh: one case, one timed epoch.

ImageFolder + transforms.Compose + DataLoader(num_workers=0, batch_size=64) in this one process, with
torch.set_num_threads(1); the caller pins the process to one core (taskset). A few batches are run untimed
first, then one whole pass over the folder is timed. Prints one JSON object on stdout.
Cases: a = RandomResizedCrop(224) + flip + ToTensor + Normalize; b = a + RandAugment(2, 9) after the flip;
c = a + AutoAugment(IMAGENET) after the flip; d = PIL decode only (Image.open, load, convert('RGB')).
"""
import argparse
import json
import random
import sys
import time

import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def decode_only(path):
    """PIL decode, as torchvision's default loader does, with the pixels forced in by load()."""
    with open(path, "rb") as f:
        img = Image.open(f)
        img.load()
        return img.convert("RGB")


def build_transform(case):
    if case == "d":
        return None
    t = [transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip()]
    if case == "b":
        t.append(transforms.RandAugment(num_ops=2, magnitude=9))
    elif case == "c":
        t.append(transforms.AutoAugment(transforms.AutoAugmentPolicy.IMAGENET))
    t += [transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    return transforms.Compose(t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="image_folder root (DIR/<class>/*.JPEG)")
    ap.add_argument("--case", required=True, choices="abcd")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--warmup-batches", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    torch.manual_seed(a.seed)
    random.seed(a.seed)

    ds = datasets.ImageFolder(a.data, transform=build_transform(a.case),
                              loader=decode_only if a.case == "d" else datasets.folder.pil_loader)
    # Decoded images of different sizes cannot be stacked: case d hands back lists.
    collate = (lambda batch: batch) if a.case == "d" else None
    loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=0, drop_last=False,
                        collate_fn=collate, generator=torch.Generator().manual_seed(a.seed))

    it = iter(loader)
    for _ in range(min(a.warmup_batches, len(loader))):
        next(it)
    del it

    images = batches = 0
    t0 = time.perf_counter()
    for batch in loader:
        images += len(batch[0]) if a.case != "d" else len(batch)
        batches += 1
    seconds = time.perf_counter() - t0

    if images != len(ds):
        sys.exit(f"bench_torchvision: iterated {images} images, the folder has {len(ds)}")
    print(json.dumps({"side": "torchvision", "case": a.case, "images": images, "batches": batches,
                      "seconds": round(seconds, 4), "img_per_s": round(images / seconds, 2),
                      "torch": torch.__version__, "torchvision": torchvision.__version__,
                      "pillow": Image.__version__, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
