#!/usr/bin/env python3
"""Tokens per second of one rank training the LSTM language model: a2sgd (a2sgd-bench-lstm)
against PyTorch's nn.LSTM language model of the same configuration, both measured in one run,
alternating REPEATS times; medians compared.

PyTorch side: Embedding(V, H) -> nn.LSTM(H, H, L) -> Linear(H, V), mean cross-entropy over the
T x B predictions, backward, clip_grad_norm_(0.25), SGD step; the hidden state carried from
batch to batch and detached (truncated BPTT), as in PyTorch's word_language_model example. One
thread (torch.set_num_threads(1), OMP_NUM_THREADS=1 for both), the same OpenBLAS (Debian's
python3-torch links libopenblas). Tokens are random ids: the time of a step does not depend on
them. Also reports the decoder's GEMMs against plain GEMMs of the same shapes (a2sgd side) and
torch.mm on the same shapes, and what the GEMMs alone allow: the step's GEMMs (the model's
matrix products, which any implementation does) replayed alone, and their work at the core's FMA
peak, both measured by a2sgd-bench-lstm in the same run, each as the largest ratio to PyTorch's
steady step that a step made of those GEMMs and nothing else could reach.

PyTorch is measured twice per round, each time in a fresh process: with glibc's default malloc
settings (what a user runs) and with malloc told to keep freed memory
(GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967295).
PyTorch allocates its activations, logits and gradients anew every step; with the defaults glibc
maps the 28 MB tensors fresh and returns them, and on a machine where page faults are expensive
(a virtual machine) its step times then vary from run to run. The second figure is PyTorch's
allocation-free steady state, the stricter reference. a2sgd allocates nothing in a step.

Usage: /usr/bin/python3 benchmarks/torch/lstm_vs_pytorch.py --bench build/benchmarks/bench-lstm/a2sgd-bench-lstm
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from lm_model import language_model  # this folder: the script's own directory is on sys.path

KEEP_MEMORY = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967295"


def torch_step_seconds(args):
    import torch
    import torch.nn as nn

    torch.set_num_threads(1)
    torch.manual_seed(1)
    V, H, L, T, B = args.vocab, args.hidden, args.layers, args.bptt, args.batch_size

    model = language_model(V, H, L)
    loss_fn = nn.CrossEntropyLoss()
    tokens = torch.randint(0, V, (T + 1, B))
    state = (torch.zeros(L, B, H), torch.zeros(L, B, H))
    times = []
    for i in range(args.warmup + args.steps):
        start = time.perf_counter()
        state = tuple(s.detach() for s in state)
        model.zero_grad()
        logits, state = model(tokens[:-1], state)
        loss = loss_fn(logits, tokens[1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-1.0)
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
    step_s = statistics.median(times)

    # torch.mm on the decoder's three shapes.
    N = T * B
    y, w, dz = torch.randn(N, H), torch.randn(V, H), torch.randn(N, V)
    mm = []
    for i in range(args.warmup + args.steps):
        start = time.perf_counter()
        torch.mm(y, w.t())
        torch.mm(dz.t(), y)
        torch.mm(dz, w)
        if i >= args.warmup:
            mm.append(time.perf_counter() - start)
    return step_s, statistics.median(mm)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default="build/benchmarks/bench-lstm/a2sgd-bench-lstm", help="a2sgd-bench-lstm binary")
    ap.add_argument("--vocab", type=int, default=10000)
    ap.add_argument("--hidden", type=int, default=200)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--bptt", type=int, default=35)
    ap.add_argument("--batch-size", type=int, default=20)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per measurement")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first (PyTorch's first steps are slow)")
    ap.add_argument("--repeats", type=int, default=3, help="alternating measurements of each side")
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("--torch-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_child:  # one PyTorch measurement in this process, as JSON on stdout
        step_s, mm_s = torch_step_seconds(args)
        print(json.dumps({"step_s": step_s, "mm_s": mm_s}))
        return
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    sizes = ["--vocab", str(args.vocab), "--hidden", str(args.hidden), "--layers", str(args.layers), "--bptt",
             str(args.bptt), "--batch-size", str(args.batch_size)]

    def torch_child(keep_memory):
        env = dict(os.environ)
        env.pop("GLIBC_TUNABLES", None)
        if keep_memory:
            env["GLIBC_TUNABLES"] = KEEP_MEMORY
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-child", "--steps", str(args.steps),
                              "--warmup", str(args.warmup)] + sizes,
                             check=True, capture_output=True, text=True, env=env).stdout
        return json.loads(out.strip().splitlines()[-1])

    ours, theirs, theirs_kept, mm = [], [], [], []
    for _ in range(args.repeats):
        out = subprocess.run([args.bench, "--json", "--repeats", str(args.steps), "--warmup", str(args.warmup)] + sizes,
                             check=True, capture_output=True, text=True).stdout
        ours.append(json.loads(out.strip().splitlines()[-1]))
        default = torch_child(False)
        theirs.append(default["step_s"])
        mm.append(default["mm_s"])
        theirs_kept.append(torch_child(True)["step_s"])

    tokens = args.bptt * args.batch_size
    flops = 3 * 2 * tokens * args.hidden * args.vocab
    a2sgd_step = statistics.median(r["step_s"] for r in ours)
    torch_step = statistics.median(theirs)
    torch_kept_step = statistics.median(theirs_kept)
    result = {
        "config": f"{args.vocab}-{args.hidden}x{args.layers}, bptt {args.bptt}, batch {args.batch_size}",
        "a2sgd_tokens_per_s": tokens / a2sgd_step,
        "pytorch_tokens_per_s": tokens / torch_step,
        "speedup": torch_step / a2sgd_step,
        "pytorch_kept_memory_tokens_per_s": tokens / torch_kept_step,
        "speedup_vs_kept_memory": torch_kept_step / a2sgd_step,
        "a2sgd_decoder_gflops": statistics.median(r["decoder_gflops"] for r in ours),
        "a2sgd_plain_gemm_gflops": statistics.median(r["gemm_gflops"] for r in ours),
        "decoder_fraction_of_gemm": statistics.median(r["decoder_fraction_of_gemm"] for r in ours),
        "torch_mm_gflops": flops / statistics.median(mm) * 1e-9,
        "a2sgd_exec_space": ours[0]["exec_space"],
        "step_gemm_gflop": ours[0]["step_gemm_flops"] * 1e-9,
    }
    # The shortest steps the GEMMs allow, against PyTorch's steady state.
    gemm_step = statistics.median(r["step_gemm_s"] for r in ours)
    result["step_gemms_alone_s"] = gemm_step
    result["step_gemms_alone_vs_kept_memory"] = torch_kept_step / gemm_step
    peaks = sorted((k[len("fma_peak_"):-len("_gflops")], statistics.median(r[k] for r in ours))
                   for k in ours[0] if k.startswith("fma_peak_"))
    for isa, gflops in peaks:
        result[f"fma_peak_{isa}_gflops"] = gflops
        result[f"gemms_alone_at_{isa}_peak_vs_kept_memory"] = torch_kept_step / (result["step_gemm_gflop"] / gflops)
    print(f"LSTM LM {result['config']}, one rank, one thread, {args.repeats} alternating measurements (medians)")
    print(f"  a2sgd    {result['a2sgd_tokens_per_s']:10.0f} tokens/s")
    print(f"  PyTorch  {result['pytorch_tokens_per_s']:10.0f} tokens/s   a2sgd / PyTorch = {result['speedup']:.2f}x"
          "   (glibc malloc defaults)")
    print(f"  PyTorch  {result['pytorch_kept_memory_tokens_per_s']:10.0f} tokens/s   a2sgd / PyTorch = "
          f"{result['speedup_vs_kept_memory']:.2f}x   (malloc keeps freed memory: no page faults in a step)")
    print(f"  decoder GEMMs {result['a2sgd_decoder_gflops']:.1f} GFLOP/s = {100 * result['decoder_fraction_of_gemm']:.0f}% "
          f"of plain GEMMs of the same shapes ({result['a2sgd_plain_gemm_gflops']:.1f} GFLOP/s; "
          f"torch.mm {result['torch_mm_gflops']:.1f} GFLOP/s)")
    print(f"  a2sgd's step {1e3 * a2sgd_step:.1f} ms, PyTorch's steady step {1e3 * torch_kept_step:.1f} ms; "
          f"a step's GEMMs ({result['step_gemm_gflop']:.2f} GFLOP) alone: {1e3 * gemm_step:.1f} ms, "
          f"{result['step_gemms_alone_vs_kept_memory']:.2f}x PyTorch's steady step")
    for isa, gflops in peaks:
        print(f"  ... at the {isa} FMA peak ({gflops:.1f} GFLOP/s): {1e3 * result['step_gemm_gflop'] / gflops:.1f} ms, "
              f"{result[f'gemms_alone_at_{isa}_peak_vs_kept_memory']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
