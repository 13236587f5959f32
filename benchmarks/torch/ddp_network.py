#!/usr/bin/env python3
"""One rank of PyTorch DistributedDataParallel training the LSTM language model over gloo, timed:
the PyTorch side of docs/pytorch.md's comparison over the emulated network (benchmarks/torch/
ddp_network.sh starts one such process in each node of an a2sgd-cluster and collects rank 0's
JSON).

The model is a2sgd-train's language model at its defaults, untied: Embedding(10000, 200) ->
nn.LSTM(200, 200, 2) -> Linear(200, 10000), 4,651,600 parameters; batch 20 per rank, 35 steps of
backpropagation through time, random token ids (the time of a step does not depend on them), SGD,
gradients clipped to norm 0.25 after the exchange (as PyTorch's word_language_model example), one
thread per process. Exchanges:

  ddp        DDP's own all-reduce (its C++ reducer: 25 MB buckets, 1 MB first, each all-reduced
             as soon as the backward pass has produced it, overlapped)
  powersgd   torch's PowerSGD hook (matrix_approximation_rank 2, a2sgd-train's default rank; error
             feedback and warm start on; its plain all-reduce warm-up over before the timed steps),
             with the model in one DDP bucket: over gloo, torch 1.13's hook aborts with two or more
             (see the comment at the DDP construction)
  postlocal  torch's post-local SGD: the post_localSGD_hook with a one-rank subgroup (no exchange
             in a step) and PeriodicModelAverager every --period steps
  a2sgd      a2sgd.torch's A2SGD hook (two scalars per step) with its PeriodicAverager every
             --period steps (a2sgd-train's default for the language model: a plain average every
             200 steps)
  topk, qsgd, efsign
             a2sgd.torch's hooks on the library's codecs (Top-K ratio 0.001, QSGD 256 levels,
             EF-sign), at their defaults: one all_gather of each bucket's payload

Per exchange: the median time of a step (forward, backward with the exchange, clipping, optimizer,
the averager's call) over the timed steps and, for the two periodic ones, the median time of one
average (timed apart: an average fires once in --period steps), and the bytes this rank's network
interface sent per step and per average (/sys/class/net/<ifname>/statistics/tx_bytes: what the
wire carried, headers included). The time per step a training run sees is then step +
average / period.

    python3 benchmarks/torch/ddp_network.py --rank R --world N --master ADDR --exchange ddp --json out.json
"""
import argparse
import json
import os
import statistics
import sys
import time

from lm_model import language_model  # this folder: the script's own directory is on sys.path

EXCHANGES = ("ddp", "powersgd", "postlocal", "a2sgd", "topk", "qsgd", "efsign")


def tx_bytes(ifname):
    with open(f"/sys/class/net/{ifname}/statistics/tx_bytes") as f:
        return int(f.read())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True, help="rank 0's address (its node's)")
    ap.add_argument("--port", type=int, default=29500)
    ap.add_argument("--ifname", default="eth0", help="the node's network interface (gloo's and the byte count's)")
    ap.add_argument("--exchange", required=True, choices=EXCHANGES)
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup", type=int, default=4, help="untimed steps first (DDP rebuilds its buckets after step 1)")
    ap.add_argument("--averages", type=int, default=5, help="timed averages (postlocal, a2sgd)")
    ap.add_argument("--period", type=int, default=200, help="steps between averages (postlocal, a2sgd)")
    ap.add_argument("--json", help="rank 0 writes its results here")
    args = ap.parse_args()
    if min(args.world, args.steps, args.warmup, args.averages, args.period) < 1 or not 0 <= args.rank < args.world:
        sys.exit("ddp_network.py: --world, --steps, --warmup, --averages, --period must be positive, "
                 "--rank in [0, --world)")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", args.ifname)

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook, powerSGD_hook
    from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{args.port}", rank=args.rank,
                            world_size=args.world)
    V, H, L, T, B = 10000, 200, 2, 35, 20

    torch.manual_seed(1)
    net = language_model(V, H, L)
    if args.exchange == "powersgd":
        # One bucket: with two, torch 1.13's PowerSGD hook aborted over gloo ("op.preamble.length <=
        # op.nbytes": collectives of different sizes paired); it issues a bucket's second all-reduce
        # from the first's callback, so the ranks' orders can differ (the likely cause).
        # DDP's first bucket (1 MB) is sized by a module constant; the rest by bucket_cap_mb.
        dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 30
        model = nn.parallel.DistributedDataParallel(net, bucket_cap_mb=1024)
    else:
        model = nn.parallel.DistributedDataParallel(net)
    averager = None
    if args.exchange == "powersgd":
        model.register_comm_hook(powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=2,
                                                             start_powerSGD_iter=2), powerSGD_hook.powerSGD_hook)
    elif args.exchange == "postlocal":
        # A one-rank subgroup per rank: the hook all-reduces over nobody after its warm-up (torch 1.13
        # builds its default intra-node subgroups only with CUDA). Every rank creates every group.
        own = [dist.new_group([r]) for r in range(args.world)][args.rank]
        model.register_comm_hook(post_localSGD_hook.PostLocalSGDState(process_group=None, subgroup=own,
                                                                      start_localSGD_iter=1),
                                 post_localSGD_hook.post_localSGD_hook)
        averager = PeriodicModelAverager(period=args.period, warmup_steps=0)
    elif args.exchange == "a2sgd":
        import a2sgd.torch as at
        model.register_comm_hook(at.A2SGDState(module=net), at.a2sgd_hook)
        averager = at.PeriodicAverager(net, args.period)
    elif args.exchange in ("topk", "qsgd", "efsign"):
        import a2sgd.torch as at
        state_class, hook = at.available_methods()[args.exchange]
        model.register_comm_hook(state_class(module=net, **(dict(seed=1) if args.exchange == "qsgd" else {})), hook)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(1 + args.rank)
    tokens = torch.randint(0, V, (T + 1, B), generator=gen)
    state = (torch.zeros(L, B, H), torch.zeros(L, B, H))

    def step():
        nonlocal state
        state = tuple(s.detach() for s in state)
        opt.zero_grad()
        logits, state = model(tokens[:-1], state)
        loss_fn(logits, tokens[1:].reshape(-1)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        if averager is not None:
            averager.average_parameters(model.parameters())

    for _ in range(args.warmup):
        step()
    dist.barrier()
    times = []
    sent = tx_bytes(args.ifname)
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    sent = tx_bytes(args.ifname) - sent
    result = dict(exchange=args.exchange, ranks=args.world, steps=args.steps, warmup=args.warmup,
                  parameters=sum(p.numel() for p in net.parameters()), step_s=statistics.median(times),
                  step_times_s=times, tx_bytes_per_step=sent / args.steps, torch=torch.__version__)
    if averager is not None:
        # One average, timed apart: what fires once in `period` steps. torch's averager all-reduces
        # the flattened parameters (a2sgd's plain average is the same call).
        from torch.distributed.algorithms.model_averaging import utils
        params = list(model.parameters())
        dist.barrier()
        avg_times = []
        sent = tx_bytes(args.ifname)
        for _ in range(args.averages):
            start = time.perf_counter()
            utils.average_parameters(iter(params), None)
            avg_times.append(time.perf_counter() - start)
        sent = tx_bytes(args.ifname) - sent
        result.update(period=args.period, average_s=statistics.median(avg_times), average_times_s=avg_times,
                      tx_bytes_per_average=sent / args.averages)
    dist.barrier()
    if args.rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    model = None  # DDP freed before its process group (torch 1.13 can hang freeing it after)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
