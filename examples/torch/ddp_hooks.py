#!/usr/bin/env python3
"""One PyTorch model under DistributedDataParallel with seven gradient exchanges: DDP's all-reduce,
torch's fp16 and PowerSGD communication hooks, a2sgd's hook, and the library's Top-K, QSGD and
EF-sign hooks (docs/pytorch.md).

The model is a2sgd-train's MLP (784-256-256-10, ReLU) on Fashion-MNIST, trained data-parallel on
--ranks processes over gloo with SGD (--lr, 64 samples per rank and step) from the same seed and
data order for every exchange, at one learning rate for all (a demonstration of the hooks, not a
tuned comparison: docs/tuning.md has that). Per exchange it reports the deployed model's test
accuracy (for a2sgd, the replicas' average, as a2sgd-train deploys), the bytes each rank hands to
the collectives per step (counted by wrapping torch.distributed.all_reduce and all_gather), and the
median time per step.

    PYTHONPATH=build/python python3 examples/torch/ddp_hooks.py --out results   # then results/example.json

Fashion-MNIST from the data home (scripts/fetch_data.sh fashion-mnist) or Debian's package.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

import a2sgd.torch as at
from a2sgd.data import find_dataset, load_fashion_mnist

EXCHANGES = ("allreduce", "fp16", "powersgd", "a2sgd", "topk", "qsgd", "efsign")


def run(rank, world, exchange, args, init, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    sent = [0]
    real_all_reduce, real_all_gather = dist.all_reduce, dist.all_gather

    def counting_all_reduce(tensor, *a, **k):
        sent[0] += tensor.numel() * tensor.element_size()
        return real_all_reduce(tensor, *a, **k)

    def counting_all_gather(outputs, tensor, *a, **k):
        sent[0] += tensor.numel() * tensor.element_size()
        return real_all_gather(outputs, tensor, *a, **k)

    # The hooks call torch.distributed.all_reduce and all_gather.
    dist.all_reduce, dist.all_gather = counting_all_reduce, counting_all_gather
    xtr, ytr, xte, yte = load_fashion_mnist()
    torch.manual_seed(args.seed)
    net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                              torch.nn.Linear(256, 10))
    model = torch.nn.parallel.DistributedDataParallel(net)
    if exchange == "allreduce":
        model.register_comm_hook(None, default_hooks.allreduce_hook)  # DDP's own all-reduce, in Python
    elif exchange == "fp16":
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif exchange == "powersgd":
        model.register_comm_hook(powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=1,
                                                             start_powerSGD_iter=2), powerSGD_hook.powerSGD_hook)
    else:
        state_class, hook = at.available_methods()[exchange]
        options = dict(seed=args.seed) if exchange == "qsgd" else {}
        model.register_comm_hook(state_class(module=net, **options), hook)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    # The replicas averaged once, at the end (what docs/pytorch.md's table measured); a training run
    # uses PeriodicAverager(net, **at.default_averaging(opt)), a2sgd-train's periodic average.
    averager = at.PeriodicAverager(net, 0) if exchange == "a2sgd" else None
    shard = len(xtr) // world
    order = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(args.seed))[rank * shard:(rank + 1) * shard]
    times, batch = [], 64
    for s in range(args.steps):
        idx = order[(s * batch) % shard:(s * batch) % shard + batch]
        start = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xtr[idx]), ytr[idx]).backward()
        opt.step()
        if averager:
            averager.average_parameters(model.parameters())
        times.append(time.perf_counter() - start)
    steps_bytes = sent[0]
    if averager:  # the deployed model: the replicas' average
        averager.average()
    with torch.no_grad():
        acc = (net(xte).argmax(1) == yte).float().mean().item()
    # Steps 3 on: PowerSGD's first two are its plain all-reduce warm-up.
    result = dict(exchange=exchange, ranks=world, steps=args.steps, lr=args.lr, seed=args.seed, test_accuracy=acc,
                  bytes_per_step=steps_bytes / args.steps, ms_per_step=1e3 * statistics.median(times[10:]),
                  parameters=sum(p.numel() for p in net.parameters()))
    if rank == 0:
        with open(os.path.join(out, f"{exchange}.json"), "w") as f:
            json.dump(result, f, indent=1)
    del model  # DDP before its process group (torch 1.13 can hang freeing it after)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for <exchange>.json and example.json")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=900)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--exchanges", default=",".join(EXCHANGES))
    args = ap.parse_args()
    if find_dataset("fashion-mnist", "train-images-idx3-ubyte.gz") is None:
        sys.exit("no Fashion-MNIST: a2sgd-fetch-data fashion-mnist (scripts/fetch_data.sh in a source tree)")
    os.makedirs(args.out, exist_ok=True)
    results = []
    for exchange in args.exchanges.split(","):
        if exchange not in EXCHANGES:
            sys.exit(f"unknown exchange {exchange!r} ({', '.join(EXCHANGES)})")
        init = f"file://{tempfile.mkdtemp()}/rdv"
        mp.spawn(run, args=(args.ranks, exchange, args, init, args.out), nprocs=args.ranks, join=True)
        with open(os.path.join(args.out, f"{exchange}.json")) as f:
            results.append(json.load(f))
        r = results[-1]
        print(f"{exchange:10s} test accuracy {r['test_accuracy']:.4f}  {r['bytes_per_step']:12,.0f} bytes/step  "
              f"{r['ms_per_step']:.2f} ms/step", flush=True)
    with open(os.path.join(args.out, "example.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
