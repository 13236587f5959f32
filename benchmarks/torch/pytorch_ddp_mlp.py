#!/usr/bin/env python3
"""Reference timing: PyTorch DistributedDataParallel (gloo, CPU, one thread per rank) training
the same MLP as a2sgd-train, for benchmarks/torch/compare_pytorch_ddp.sh.

Each rank draws mini-batches from its own shard of an in-memory dataset (random values with the
Fashion-MNIST shape: the time of a step does not depend on the values), runs forward, backward
(DDP all-reduces the gradients) and an SGD-momentum step. Prints one JSON line with the mean
time per step over the timed steps, as seen by rank 0.
"""
import argparse
import json
import os
import tempfile
import time


def worker(rank, args, init_file, queue):
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=args.ranks)
    torch.manual_seed(args.seed)
    widths = [784] + [int(w) for w in args.hidden.split(",") if w] + [10]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(nn.ReLU())
    model = nn.parallel.DistributedDataParallel(nn.Sequential(*layers))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    shard = 60000 // args.ranks
    g = torch.Generator().manual_seed(args.seed + rank)
    x_all = torch.randn(shard, 784, generator=g)
    y_all = torch.randint(0, 10, (shard,), generator=g)
    order = torch.randperm(shard, generator=g)
    b = args.batch_size

    def step(i):
        start = (i * b) % (shard - b)
        idx = order[start:start + b]
        x, y = x_all[idx], y_all[idx]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for i in range(args.warmup):
        step(i)
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(args.steps):
        step(args.warmup + i)
    elapsed = time.perf_counter() - t0
    dist.barrier()
    if rank == 0:
        queue.put(elapsed / args.steps)
    model = None  # DDP freed before its process group (torch 1.13 can hang freeing it after)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--hidden", default="256,256")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()

    import torch
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "rendezvous")
        procs = [ctx.Process(target=worker, args=(r, args, init_file, queue)) for r in range(args.ranks)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join()
        if any(proc.exitcode != 0 for proc in procs):
            raise SystemExit("pytorch_ddp_mlp.py: a worker failed")
        step_s = queue.get()
    print(json.dumps({"framework": "pytorch-ddp", "torch": torch.__version__, "ranks": args.ranks,
                      "batch_size": args.batch_size, "hidden": args.hidden, "steps": args.steps,
                      "step_time_s": step_s}))


if __name__ == "__main__":
    main()
