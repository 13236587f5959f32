#!/usr/bin/env python3
"""Local SGD in PyTorch at one averaging period: torch's own PostLocalSGDOptimizer against
a2sgd.torch's PeriodicAverager, plain and with DiLoCo's outer Nesterov step, and A2SGD's hook with
both averagers (docs/pytorch.md, "Local SGD and the outer optimizer").

The model is a2sgd-train's MLP (784-256-256-10, ReLU) on Fashion-MNIST under DistributedDataParallel
over gloo on --ranks processes, SGD with --momentum (0.9) at one rate for all (--lr, 64 samples per
rank and step), the same seed and data order for every run. The local-SGD runs use torch's
post-local SGD hook (PostLocalSGDState: DDP's all-reduce for the first --warmup steps, nothing
after); every run averages the replicas every --period steps after the warm-up and once more at
the end (the deployed model). Per run: the deployed model's test accuracy and the bytes each rank
hands to all_reduce per step (counted by wrapping torch.distributed.all_reduce).

    PYTHONPATH=build/python python3 examples/torch/local_sgd.py --out results   # then results/local_sgd_m0.9.json

Runs:
  torch-postlocal   torch.distributed.optim.PostLocalSGDOptimizer with PeriodicModelAverager
  a2sgd-local       the same with a2sgd.torch.PeriodicAverager (plain average)
  a2sgd-diloco      the same with the averager's outer Nesterov step (lr 0.7, momentum 0.9)
  a2sgd-hook        A2SGD's DDP hook (16 bytes per step) with the plain averager
  a2sgd-hook-diloco A2SGD's hook with the outer Nesterov step
"""
import argparse
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook
from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
from torch.distributed.optim import PostLocalSGDOptimizer

import a2sgd.torch as at
from a2sgd.data import find_dataset, load_fashion_mnist

RUNS = ("torch-postlocal", "a2sgd-local", "a2sgd-diloco", "a2sgd-hook", "a2sgd-hook-diloco")


def own_group(world, rank):
    """A process group of this rank alone: the post-local SGD hook's subgroup after the warm-up,
    where it all-reduces over nobody (torch 1.13 builds its default intra-node subgroups only
    with CUDA). Every rank creates every group, as new_group requires."""
    groups = [dist.new_group([r]) for r in range(world)]
    return groups[rank]


def build(run, net, args, rank, world):
    """The DDP model, the optimizer to step and the a2sgd averager (None for torch's own)."""
    model = torch.nn.parallel.DistributedDataParallel(net)
    if run.startswith("a2sgd-hook"):
        model.register_comm_hook(at.A2SGDState(module=net), at.a2sgd_hook)
    else:
        model.register_comm_hook(post_localSGD_hook.PostLocalSGDState(process_group=None,
                                                                      subgroup=own_group(world, rank),
                                                                      start_localSGD_iter=args.warmup),
                                 post_localSGD_hook.post_localSGD_hook)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    if run == "torch-postlocal":
        # torch's averager averages after its (0-based) steps warmup_steps, warmup_steps + period, ...;
        # a2sgd's after the (1-based) steps past its warm-up that are multiples of the period. With
        # torch's warm-up one step shorter both average after the same steps (torch once more,
        # after the last all-reduced step, where the replicas are equal): the same run.
        averager = PeriodicModelAverager(period=args.period, warmup_steps=args.warmup - 1)
        return model, PostLocalSGDOptimizer(optim=opt, averager=averager), None
    outer = dict(outer="nesterov", outer_lr=0.7, outer_momentum=0.9) if run.endswith("diloco") else {}
    warmup = 0 if run.startswith("a2sgd-hook") else args.warmup
    return model, opt, at.PeriodicAverager(net, args.period, warmup_steps=warmup, **outer)


def run_one(rank, world, run, args, init, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    sent = [0]
    real_all_reduce = dist.all_reduce

    def counting_all_reduce(tensor, *a, **k):
        group = k.get("group", a[1] if len(a) > 1 else None)
        if group is None or dist.get_world_size(group) > 1:  # a group of one rank sends nothing
            sent[0] += tensor.numel() * tensor.element_size()
        return real_all_reduce(tensor, *a, **k)

    dist.all_reduce = counting_all_reduce
    xtr, ytr, xte, yte = load_fashion_mnist()
    torch.manual_seed(args.seed)
    net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                              torch.nn.Linear(256, 10))
    model, opt, averager = build(run, net, args, rank, world)
    shard = len(xtr) // world
    order = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(args.seed))[rank * shard:(rank + 1) * shard]
    batch = 64
    for s in range(args.steps):
        idx = order[(s * batch) % shard:(s * batch) % shard + batch]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xtr[idx]), ytr[idx]).backward()
        opt.step()
        if averager:
            averager.average_parameters(model.parameters())
    steps_bytes = sent[0]
    # The deployed model: the replicas' plain average.
    (averager or at.PeriodicAverager(net, 0)).average()
    with torch.no_grad():
        acc = (net(xte).argmax(1) == yte).float().mean().item()
        # The deployed model's parameters summed exactly (float64): equal sums for equal models.
        checksum = float(sum(p.double().sum() for p in net.parameters()))
    result = dict(checksum=checksum, run=run, ranks=world, steps=args.steps, lr=args.lr, momentum=args.momentum, period=args.period,
                  warmup=args.warmup,
                  seed=args.seed, test_accuracy=acc, bytes_per_step=steps_bytes / args.steps,
                  parameters=sum(p.numel() for p in net.parameters()))
    if rank == 0:
        with open(os.path.join(out, f"{run}_m{args.momentum:g}.json"), "w") as f:
            json.dump(result, f, indent=1)
    del model  # DDP before its process group (torch 1.13 can hang freeing it after)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for <run>_m<momentum>.json and local_sgd_m<momentum>.json")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=900)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--period", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=100, help="post-local SGD's all-reduce steps first")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", default=",".join(RUNS))
    args = ap.parse_args()
    if find_dataset("fashion-mnist", "train-images-idx3-ubyte.gz") is None:
        sys.exit("no Fashion-MNIST: a2sgd-fetch-data fashion-mnist (scripts/fetch_data.sh in a source tree)")
    if min(args.period, args.warmup, args.steps, args.ranks) < 1 or not 0 <= args.momentum < 1:
        sys.exit("--period, --warmup, --steps and --ranks must be positive, --momentum in [0, 1)")
    os.makedirs(args.out, exist_ok=True)
    results = []
    for run in args.runs.split(","):
        if run not in RUNS:
            sys.exit(f"unknown run {run!r} ({', '.join(RUNS)})")
        init = f"file://{tempfile.mkdtemp()}/rdv"
        mp.spawn(run_one, args=(args.ranks, run, args, init, args.out), nprocs=args.ranks, join=True)
        with open(os.path.join(args.out, f"{run}_m{args.momentum:g}.json")) as f:
            results.append(json.load(f))
        r = results[-1]
        print(f"{run:18s} test accuracy {r['test_accuracy']:.4f}  {r['bytes_per_step']:12,.0f} bytes/step", flush=True)
    with open(os.path.join(args.out, f"local_sgd_m{args.momentum:g}.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
