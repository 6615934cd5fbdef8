#!/usr/bin/python3
"""DDP on Fashion-MNIST: gloo's allreduce against the ina hook, in the same run.

    ina train-py --workers 2 --scheme dsa examples/ddp_fashion_mnist.py -- --epochs 3 --json out.json

(ina's options before the script, as torchrun's; the "--" hands --json, also a
name of ina's options, to the script.)

Every worker (started by `ina train-py`, or by torchrun with INA_* set) trains
the same small CNN (torchvision's Conv2dNormActivation blocks) twice from the
same seed on the same shards: first with DDP over gloo, then with DDP whose
gradient buckets go through `ina switch` (ina.torch.allreduce_hook). Rank 0
evaluates after each epoch and prints one line per epoch and backend; --json
writes them, plus the parameters' difference between the two runs after
--compare-steps steps and the scales of the ina ops in those steps
(docs/python.md states the bound that difference must stay within).
"""
import argparse
import gzip
import hashlib
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torchvision

import ina
import ina.torch

DATA = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's training mean and standard deviation


def load(prefix, limit):
    """The first `limit` images (normalized, N x 1 x 28 x 28) and labels of an IDX pair."""
    with gzip.open(f"{DATA}/{prefix}-images-idx3-ubyte.gz", "rb") as f:
        head = np.frombuffer(f.read(16), dtype=">u4")
        if head[0] != 2051 or head[2] != 28 or head[3] != 28:
            sys.exit(f"{DATA}/{prefix}-images-idx3-ubyte.gz: not 28x28 IDX3 images (header {head.tolist()})")
        n = int(head[1]) if limit == 0 else min(limit, int(head[1]))
        img = np.frombuffer(f.read(n * 784), dtype=np.uint8)
    with gzip.open(f"{DATA}/{prefix}-labels-idx1-ubyte.gz", "rb") as f:
        f.read(8)
        lab = np.frombuffer(f.read(n), dtype=np.uint8)
    x = (torch.from_numpy(img.astype(np.float32) / 255.0).reshape(n, 1, 28, 28) - MEAN) / STD
    return x, torch.from_numpy(lab.astype(np.int64))


def make_model(seed):
    torch.manual_seed(seed)
    block = torchvision.ops.Conv2dNormActivation
    return nn.Sequential(
        block(1, 16, kernel_size=5, norm_layer=None), nn.MaxPool2d(2),   # 16 x 14 x 14
        block(16, 32, kernel_size=5, norm_layer=None), nn.MaxPool2d(2),  # 32 x 7 x 7
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


def flat_params(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        correct = sum(int((model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum()) for i in range(0, len(x), 1000))
    model.train()
    return correct / len(x)


def train(backend, args, comm, train_x, train_y, test_x, test_y, rank, world):
    model = nn.parallel.DistributedDataParallel(make_model(args.seed))
    if backend == "ina":
        model.register_comm_hook(comm, ina.torch.allreduce_hook)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    loss_fn = nn.CrossEntropyLoss()
    steps = len(train_x) // (args.batch * world)
    epochs, snapshot, step, k_ops = [], None, 0, []
    ops_before = len(ina.torch.hook_infos(comm))
    train_s = 0.0
    for epoch in range(1, args.epochs + 1):
        g = torch.Generator().manual_seed(args.seed * 1000003 + epoch)
        order = torch.randperm(len(train_x), generator=g)[rank::world]  # this worker's shard of the epoch
        t0 = time.perf_counter()
        for s in range(steps):
            idx = order[s * args.batch:(s + 1) * args.batch]
            opt.zero_grad()
            loss_fn(model(train_x[idx]), train_y[idx]).backward()
            opt.step()
            step += 1
            if step == args.compare_steps:
                snapshot = flat_params(model).clone()
                k_ops = ina.torch.hook_infos(comm)[ops_before:]
        train_s += time.perf_counter() - t0
        acc = accuracy(model, test_x, test_y) if rank == 0 else None
        epochs.append({"epoch": epoch, "test_accuracy": acc, "train_seconds": train_s})
        if rank == 0:
            print(f"{backend:5} epoch {epoch}: test accuracy {100 * acc:.2f} %, training {train_s:.2f} s", flush=True)
    # every rank's parameters: the same bits on all of them
    digest = hashlib.sha256(flat_params(model).numpy().tobytes()).hexdigest()[:16]
    digests = [None] * world
    dist.all_gather_object(digests, digest)
    for i, e in enumerate(epochs):
        e["epoch_train_seconds"] = e["train_seconds"] - (epochs[i - 1]["train_seconds"] if i else 0.0)
    out = {"epochs": epochs, "digests": digests, "steps_per_epoch": steps}
    if backend == "ina":
        out["compare_ops"] = k_ops
        out["hook_ops"] = len(ina.torch.hook_infos(comm)) - ops_before
    return out, snapshot


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64, help="per worker")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit-train", type=int, default=0, help="first N training images (0: all 60 000)")
    ap.add_argument("--limit-test", type=int, default=0, help="first N test images (0: all 10 000)")
    ap.add_argument("--compare-steps", type=int, default=5, help="compare the two runs' parameters after this many steps")
    ap.add_argument("--backends", default="gloo,ina", help="in this order, in the same processes")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    ap.add_argument("--json", help="rank 0 writes the results here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")  # MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from the launcher
    rank, world = dist.get_rank(), dist.get_world_size()
    comm = ina.Communicator()  # INA_CONFIG / INA_* (ina train-py); rank and size as torch's
    if (comm.rank, comm.size) != (rank, world):
        sys.exit(f"ina.Communicator is rank {comm.rank} of {comm.size}, torch.distributed rank {rank} of {world}")
    train_x, train_y = load("train", args.limit_train)
    test_x, test_y = load("t10k", args.limit_test)
    results, snaps = {}, {}
    for backend in args.backends.split(","):
        if backend not in ("gloo", "ina"):
            sys.exit(f"--backends: expected gloo and/or ina, got '{backend}'")
        results[backend], snaps[backend] = train(backend, args, comm, train_x, train_y, test_x, test_y, rank, world)
    comm.close()
    if rank == 0:
        report = {"config": vars(args), "workers": world, "scheme": comm.scheme, "runs": results,
                  "parameters": sum(p.numel() for p in make_model(args.seed).parameters())}
        if all(snaps.get(b) is not None for b in ("gloo", "ina")):
            report["compare"] = {"steps": args.compare_steps,
                                 "max_abs_diff": float((snaps["ina"] - snaps["gloo"]).abs().max()),
                                 "max_abs_param": float(snaps["gloo"].abs().max()),
                                 "ops": results["ina"]["compare_ops"]}
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
