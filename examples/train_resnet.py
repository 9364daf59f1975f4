# examples/train_resnet.py - a real training loop fed by Spillway: a ResNet-18 (torchvision, at low
# resolution) or a small CNN learns the classes of an image folder from batches that a dispatcher's workers
# (or this process, without --dispatcher) decode, crop, flip and normalize. Prints the loss as it falls and,
# with --json, one JSON line at the end (steps, first/last losses, throughput, where elements came from).
# Single process, single trainer thread; Spillway runs its own threads. Debian's python3-torch on the CPU.
import argparse
import json
import os
import sys
import time

try:        # the installed package (pip install ./client/python), else the repository's source
    import spillway  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client", "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import spillway.torch  # noqa: E402
from spillway import Pipeline  # noqa: E402


def small_cnn(classes):
    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.MaxPool2d(2))
    return nn.Sequential(block(3, 32), block(32, 64), block(64, 128), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(128, classes))


def model_for(arch, classes):
    if arch == "resnet18":
        import torchvision
        return torchvision.models.resnet18(num_classes=classes)
    return small_cnn(classes)


def main():
    ap = argparse.ArgumentParser(description="Train an image classifier on batches from Spillway.")
    ap.add_argument("--data", required=True, help="image folder (class sub-folders), e.g. build/data/cli-test/train")
    ap.add_argument("--dispatcher", help="HOST:PORT of a Spillway dispatcher (default: run the pipeline here)")
    ap.add_argument("--arch", choices=["cnn", "resnet18"], default="cnn")
    ap.add_argument("--size", type=int, default=64, help="training resolution (default 64)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=100, help="passes over the data at most (default 100)")
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (default: all epochs)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print a JSON summary line at the end")
    a = ap.parse_args()

    torch.manual_seed(a.seed)
    pipeline = (Pipeline.image_folder(a.data, shuffle=True, seed=a.seed, epochs=a.epochs)
                .decode_jpeg().random_resized_crop(a.size, scale=[0.35, 1.0]).random_horizontal_flip()
                .normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
                .batch(a.batch_size, drop_remainder=True))
    loader = spillway.torch.loader(pipeline, dispatcher=a.dispatcher)
    classes = loader.dataset.classes
    model = model_for(a.arch, len(classes))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    print(f"train_resnet: {len(classes)} classes, {len(loader)} batches per epoch, arch {a.arch}, "
          f"{'dispatcher ' + a.dispatcher if a.dispatcher else 'in-process'}", flush=True)
    losses, step, images_seen, t0 = [], 0, 0, time.monotonic()
    model.train()
    for epoch in range(a.epochs):
        loader.dataset.set_epoch(epoch)
        for images, labels in loader:
            opt.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            step += 1
            images_seen += labels.shape[0]
            if step % 10 == 0:
                print(f"step {step:5d}  epoch {epoch}  loss {sum(losses[-10:]) / 10:.3f}", flush=True)
            if a.steps and step >= a.steps:
                break
        if a.steps and step >= a.steps:
            break
    seconds = time.monotonic() - t0
    stats = loader.dataset.stats()
    loader.dataset.close()
    window = max(1, min(10, len(losses) // 4))
    summary = {"steps": step, "first_loss": sum(losses[:window]) / window, "last_loss": sum(losses[-window:]) / window,
               "images_per_s": images_seen / seconds if seconds > 0 else 0.0,
               "remote_elements": stats.get("remote_elements", 0), "local_elements": stats.get("local_elements", 0)}
    print(f"train_resnet: loss {summary['first_loss']:.3f} -> {summary['last_loss']:.3f} over {step} steps, "
          f"{summary['images_per_s']:.0f} images/s", flush=True)
    if a.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
