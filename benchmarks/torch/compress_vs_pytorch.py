#!/usr/bin/env python3
"""Whole exchange steps of one rank: a2sgd's kernels (a2sgd-bench, one rank) against PyTorch
versions of the same methods written the way GRACE (Xu et al., ICDCS 2021) writes its
compressors and memories, both measured in one run, alternating ROUNDS times; medians compared.

A step is what one rank does with a gradient of N float32 values: error feedback (where the method
has it), compression, the exchange (the identity at one rank), decompression and the SGD update
x -= lr * u. The PyTorch side runs one thread (torch.set_num_threads(1)); a2sgd-bench runs with
Kokkos' Serial or single-threaded backend. Same N, same ratios and levels:

  a2sgd    a = g + e; means of the positive and negative entries (boolean masks); u = the
           two-means reconstruction; e = a - u
  topk     a = g + e; torch.topk(|a|, k, sorted=False), gather; u = zeros.scatter_; e = a - u
  qsgd     GRACE's QSGDCompressor: L2 norm, stochastic levels with uniform_(), level * sign as
           int16 then float16 (quantum_num > 127), decompressed as norm / s * level (no memory)
  efsign   GRACE's EFSignSGD: a = g + e, sign bits as uint8 (tensor >= 0), scale mean(|a|);
           u = scale * (2 * bits - 1); e = a - u
  fp16     GRACE's FP16Compressor: tensor.type(float16) and back (no memory)

Usage: /usr/bin/python3 benchmarks/torch/compress_vs_pytorch.py --bench build/benchmarks/bench/a2sgd-bench
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time

TARGETS = {"topk": 15.0, "qsgd": 15.0, "efsign": 15.0, "fp16": 15.0}


class ResidualMemory:
    """GRACE's ResidualMemory with beta = gamma = 1: e <- a - decompress(compress(a))."""

    def __init__(self, torch, n):
        self.residual = torch.zeros(n)

    def compensate(self, tensor):
        return tensor + self.residual

    def update(self, tensor, decompressed):
        self.residual = tensor - decompressed


def make_steps(torch, n, args):
    lr = 1e-4

    def a2sgd(g, x, mem):
        a = mem.compensate(g)
        pos, neg = a > 0, a < 0
        mean_pos = a[pos].mean() if bool(pos.any()) else a.new_zeros(())
        mean_neg = a[neg].mean() if bool(neg.any()) else a.new_zeros(())
        u = torch.where(pos, mean_pos, torch.where(neg, mean_neg, a.new_zeros(())))
        mem.update(a, u)
        x.add_(u, alpha=-lr)

    def topk(g, x, mem):
        a = mem.compensate(g)
        k = max(1, int(a.numel() * args.topk_ratio))
        _, indices = torch.topk(a.abs(), k, sorted=False)
        values = torch.gather(a, 0, indices)
        u = torch.zeros(a.numel(), dtype=a.dtype).scatter_(0, indices, values)
        mem.update(a, u)
        x.add_(u, alpha=-lr)

    def qsgd(g, x, mem):
        s = args.qsgd_levels
        tensor = g.flatten()
        norm = tensor.norm().flatten()
        abs_gradient = tensor.abs()
        level_float = s / norm * abs_gradient
        previous_level = level_float.floor()
        prob = torch.empty_like(tensor).uniform_()
        is_next_level = (prob < (level_float - previous_level)).type(torch.float32)
        new_level = previous_level + is_next_level
        sign = tensor.sign()
        compressed = (new_level * sign).type(torch.int16)
        compressed = compressed.type(torch.int8 if s < 128 else torch.half)
        u = norm / s * compressed.type(torch.float32)
        x.add_(u, alpha=-lr)

    def efsign(g, x, mem):
        a = mem.compensate(g)
        sign_encode = (a >= 0).type(torch.uint8)
        mean = a.abs().mean()
        sign_decode = sign_encode.type(torch.float32) * 2 - 1
        u = mean * sign_decode
        mem.update(a, u)
        x.add_(u, alpha=-lr)

    def fp16(g, x, mem):
        compressed = g.type(torch.float16)
        u = compressed.type(torch.float32)
        x.add_(u, alpha=-lr)

    return {"a2sgd": a2sgd, "topk": topk, "qsgd": qsgd, "efsign": efsign, "fp16": fp16}


def torch_seconds(methods, args):
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    n = args.n
    g = torch.randn(n)
    steps = make_steps(torch, n, args)
    out = {}
    for m in methods:
        x = torch.zeros(n)
        mem = ResidualMemory(torch, n)
        times = []
        for r in range(args.warmup + args.repeats):
            start = time.perf_counter()
            steps[m](g, x, mem)
            if r >= args.warmup:
                times.append(time.perf_counter() - start)
        out[m] = statistics.median(times)
    return out


def a2sgd_seconds(methods, args):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.csv")
        cmd = [args.bench, "--sizes", str(args.n), "--methods", ",".join(methods), "--repeats", str(args.repeats),
               "--warmup", str(args.warmup), "--topk-ratio", str(args.topk_ratio), "--qsgd-levels",
               str(args.qsgd_levels), "--no-sort", "--csv", path]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            rows = [r for r in csv.DictReader(f) if r["kind"] == "measured"]
    return {r["method"]: float(r["step_s"]) for r in rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", default="build/benchmarks/bench/a2sgd-bench")
    parser.add_argument("--n", type=int, default=16 * 2**20, help="values per gradient")
    parser.add_argument("--methods", default="a2sgd,topk,qsgd,efsign,fp16")
    parser.add_argument("--topk-ratio", type=float, default=0.001)
    parser.add_argument("--qsgd-levels", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per method and round")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two sides")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    methods = args.methods.split(",")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ours, theirs = {m: [] for m in methods}, {m: [] for m in methods}
    for _ in range(args.rounds):
        for m, s in a2sgd_seconds(methods, args).items():
            ours[m].append(s)
        for m, s in torch_seconds(methods, args).items():
            theirs[m].append(s)
    print(f"whole step of one rank, n = {args.n} values, medians of {args.rounds} rounds x {args.repeats} steps")
    print(f"{'method':<8} {'a2sgd ms':>9} {'PyTorch ms':>11} {'speed-up':>9} {'target':>7}")
    short = False
    for m in methods:
        a, t = statistics.median(ours[m]), statistics.median(theirs[m])
        target = TARGETS.get(m)
        met = "" if target is None else (" ok" if t / a >= target else " BELOW")
        short = short or (target is not None and t / a < target)
        print(f"{m:<8} {1e3 * a:9.2f} {1e3 * t:11.2f} {t / a:8.1f}x {'' if target is None else f'{target:.0f}x':>7}{met}")
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
