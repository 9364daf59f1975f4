# examples/ddp.py - data-parallel training on Spillway: WORLD ranks (torch.distributed, gloo on loopback) train
# one small CNN with DistributedDataParallel, each fed its own share of every epoch by one shared Spillway job
# (job_name): disjoint samples, as many batches per rank. Run it plain and it starts its ranks itself
# (torch.multiprocessing, spawn); under torchrun it is one rank (RANK, WORLD_SIZE, MASTER_ADDR/PORT set).
# Rank 0 prints the loss (averaged over ranks) and, with --json, a summary line; --keys-out DIR has each rank
# write the (epoch, sample) keys it trained on. One trainer thread per rank; Spillway runs its own threads.
import argparse
import gc
import json
import os
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "client", "python"), HERE]

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import spillway.torch  # noqa: E402
from spillway import Pipeline  # noqa: E402
from train_resnet import small_cnn  # noqa: E402  (this folder: the same model)


def mean_over_ranks(x):
    t = torch.tensor([float(x)])
    dist.all_reduce(t)
    return t.item() / dist.get_world_size()


def train(rank, world, a):
    dist.init_process_group("gloo", init_method=a.init_method, rank=rank, world_size=world)
    torch.manual_seed(a.seed)           # the same initial weights on every rank (DDP also broadcasts them)
    pipeline = (Pipeline.image_folder(a.data, shuffle=True, seed=a.seed, epochs=a.epochs)
                .decode_jpeg().random_resized_crop(a.size, scale=[0.35, 1.0]).random_horizontal_flip()
                .normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
                .batch(a.batch_size, drop_remainder=True))
    # Every rank names the same job: the first to reach the dispatcher creates it, the others join it.
    loader = spillway.torch.loader(pipeline, dispatcher=a.dispatcher, rank=rank, world_size=world,
                                   job_name=a.job_name)
    classes = loader.dataset.classes
    model = DistributedDataParallel(small_cnn(len(classes)))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    if rank == 0:
        print(f"ddp: {world} ranks, {len(classes)} classes, {len(loader)} batches per epoch per rank, "
              f"{'dispatcher ' + a.dispatcher if a.dispatcher else 'in-process'}, job {a.job_name}", flush=True)
    losses, keys, step, t0 = [], [], 0, time.monotonic()
    model.train()
    for epoch in range(a.epochs):
        loader.dataset.set_epoch(epoch)
        for batch in loader:
            images, labels = batch[0], batch[1]
            keys += [[k.epoch, k.sample] for k in batch.keys]
            opt.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()             # DDP averages the gradients over the ranks here
            opt.step()
            losses.append(mean_over_ranks(loss.item()))
            step += 1
            if rank == 0 and step % 10 == 0:
                print(f"step {step:5d}  epoch {epoch}  loss {sum(losses[-10:]) / 10:.3f}", flush=True)
            if a.steps and step >= a.steps:
                break
        if a.steps and step >= a.steps:
            break
    seconds = time.monotonic() - t0
    stats = loader.dataset.stats()
    loader.dataset.close()
    if a.keys_out:
        with open(os.path.join(a.keys_out, f"rank{rank}.json"), "w") as f:
            json.dump({"rank": rank, "steps": step, "keys": keys, "remote_elements": stats["remote_elements"],
                       "job": stats["job"]}, f)
    steps = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(steps, torch.tensor([float(step)]))
    images_per_s = mean_over_ranks(len(keys) / seconds if seconds > 0 else 0.0) * world
    # DDP's reducer holds the process group: free it first (torch 1.13's gloo group can hang in its
    # destructor when the reducer outlives destroy_process_group).
    del model, opt
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        window = max(1, min(10, len(losses) // 4))
        summary = {"world_size": world, "steps": [int(s.item()) for s in steps],
                   "first_loss": sum(losses[:window]) / window, "last_loss": sum(losses[-window:]) / window,
                   "images_per_s": images_per_s}
        print(f"ddp: loss {summary['first_loss']:.3f} -> {summary['last_loss']:.3f} over {step} steps per rank, "
              f"{images_per_s:.0f} images/s in all", flush=True)
        if a.json:
            print(json.dumps(summary), flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description="Data-parallel training (torch.distributed, gloo) on one shared "
                                             "Spillway job.")
    ap.add_argument("--data", required=True, help="image folder (class sub-folders), e.g. build/data/cli-test/train")
    ap.add_argument("--dispatcher", help="HOST:PORT of a Spillway dispatcher (default: each rank in-process)")
    ap.add_argument("--world-size", type=int, default=2, help="ranks to start when not under torchrun (default 2)")
    ap.add_argument("--job-name", help="the shared job's name (default: $SPILLWAY_JOB_NAME, torchrun's run id, "
                                       "or one made up here for the ranks this script starts)")
    ap.add_argument("--size", type=int, default=64, help="training resolution (default 64)")
    ap.add_argument("--batch-size", type=int, default=16, help="per rank (default 16)")
    ap.add_argument("--epochs", type=int, default=100, help="passes over the data at most (default 100)")
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps per rank (default: all)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="rank 0 prints a JSON summary line at the end")
    ap.add_argument("--keys-out", help="a folder: each rank writes rankN.json with the keys it trained on")
    a = ap.parse_args()
    a.job_name = a.job_name or os.environ.get("SPILLWAY_JOB_NAME") or os.environ.get("TORCHELASTIC_RUN_ID")
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:        # under torchrun: this process is one rank
        a.init_method = "env://"
        if not a.job_name:
            sys.exit("ddp: give --job-name (or SPILLWAY_JOB_NAME) so that the ranks share one job")
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), a)
        return 0
    port = free_port()
    a.init_method = f"tcp://127.0.0.1:{port}"
    a.job_name = a.job_name or f"ddp-{os.getpid()}-{port}"
    mp.spawn(train, args=(a.world_size, a), nprocs=a.world_size, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
