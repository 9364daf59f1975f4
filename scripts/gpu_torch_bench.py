#!/usr/bin/env python3
"""scripts/gpu_torch_bench.py - the PyTorch half of scripts/gpu-check.sh, run on the device machine.

peer: torchvision on GPU tensors, the same images and ops as gpucheck's "randaugment" pipeline: nvJPEG decode
(torchvision.io.decode_jpeg on the device, one image at a time as the images differ in size), then per image
RandomResizedCrop(224, antialias) + RandomHorizontalFlip + RandAugment(2, 9) on the uint8 CHW tensor, then
normalize to float32, for SECONDS; prints images/s.
train: a ResNet-50 training step loop (bf16 autocast, batch 128, synthetic data) timed alone and then while
COMMAND (gpucheck under GPUCHECK_STRESS=1) augments on the same GPU; prints the median step times and the
slowdown. --device cpu runs both on the CPU with tiny sizes (to check the script where there is no GPU).
One JSON object per line on stdout.
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import torch
import torchvision

try:
    from torchvision.transforms import v2
except ImportError:                         # torchvision before 0.15 (Debian's): the same ops on tensors
    from torchvision import transforms as v2


def images(folder):
    out = []
    for root, _, files in os.walk(folder):
        out += [os.path.join(root, f) for f in files if f.lower().endswith((".jpg", ".jpeg"))]
    return sorted(out)


def peer(args, dev):
    paths = images(args.data)
    raw = [torchvision.io.read_file(p) for p in paths]
    size = 224 if dev.type == "cuda" else 32
    aug = v2.Compose([v2.RandomResizedCrop(size, antialias=True), v2.RandomHorizontalFlip(),
                      v2.RandAugment(num_ops=2, magnitude=9)])
    mean = torch.tensor([0.485, 0.456, 0.406], device=dev).view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device=dev).view(3, 1, 1)

    def one(i):
        img = torchvision.io.decode_jpeg(raw[i % len(raw)], device=dev.type)
        img = aug(img)
        return ((img.float() / 255.0) - mean) / std

    for i in range(32):                       # warm-up: nvJPEG and kernels loaded
        one(i)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        for _ in range(64):
            one(n)
            n += 1
        if dev.type == "cuda":
            torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(json.dumps({"check": "peer_torchvision_gpu", "pipeline": "randaugment", "images_per_s": round(n / dt, 1),
                      "images": len(raw), "device": dev.type, "torch": torch.__version__,
                      "torchvision": torchvision.__version__}))


def step_times(model, opt, x, y, steps, dev):
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def train(args, dev):
    batch, size = (128, 224) if dev.type == "cuda" else (4, 64)
    model = torchvision.models.resnet50().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, size, size, device=dev)
    y = torch.randint(0, 1000, (batch,), device=dev)
    step_times(model, opt, x, y, 10, dev)                           # warm-up
    alone = step_times(model, opt, x, y, args.steps, dev)
    load = subprocess.Popen(args.command, shell=True, stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, GPUCHECK_STRESS="1"))
    time.sleep(2)                                                   # its first micro-batches are under way
    beside = step_times(model, opt, x, y, args.steps, dev)
    out, _ = load.communicate()
    made = [json.loads(line) for line in out.splitlines() if '"stress"' in line]
    a, b = statistics.median(alone), statistics.median(beside)
    print(json.dumps({"check": "training_slowdown", "model": "resnet50", "batch": batch,
                      "step_ms_alone": round(a * 1e3, 2), "step_ms_beside_spillway": round(b * 1e3, 2),
                      "slowdown": round(b / a - 1, 4), "spillway_gpu_images_per_s": made[0]["gpu_1"] if made else None,
                      "load_exit": load.returncode}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["peer", "train"])
    ap.add_argument("--data", required=True)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--command", default="true", help="train: the augmentation load run beside the steps")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    dev = torch.device(args.device)
    peer(args, dev) if args.mode == "peer" else train(args, dev)


if __name__ == "__main__":
    main()
