#!/usr/bin/env python3
"""The compute of a2sgd.torch's hook on one DDP bucket against torch's own passes over the same
memory streams and against torch's fp16 and PowerSGD hooks, measured in one run (docs/pytorch.md).

Single-threaded (torch.set_num_threads(1), as the library's Kokkos Serial build runs), one bucket
of --mb MiB of float32 gradients, medians of --repeats rounds; within a round every kernel runs
once, in a rotating order, so that a slow spell of a shared machine hits all of them alike.

- a2sgd encode: one pass reading g and e; its read ceiling: the fastest read-only pass over the
  same two streams that torch and numpy offer (torch.sum of g and of e, torch.amax of each,
  OpenBLAS's sdot of g and e through numpy), timed in the same rounds;
- a2sgd decode: one pass reading g and e and writing both; its ceiling: the fastest in-place pass
  over the same two streams (torch._foreach_mul_([g, e], 1), g.mul_(1) and e.mul_(1), numpy's
  multiply in place);
- torch's fp16 hook's compute, the lines of its source that touch the bucket: the cast to float16
  with the division by the rank count, and the copy back (its all-reduce left out): against the
  a2sgd hook's encode and decode;
- the hooks whole, each on a process group of one rank (its collectives return at once), so that
  the time is the hook's own work: a2sgd's a2sgd_hook (encode, an all-reduce of 16 bytes, decode),
  torch's fp16_compress_hook (the cast to float16, the division by the rank count, the copy back)
  and torch's PowerSGD hook (rank 1, the default, past its warm-up: start_powerSGD_iter = 2 and the
  hook called on its third iteration).

Usage: PYTHONPATH=<build>/python python3 hook_compute.py [--mb 25] [--repeats 7] [--json FILE]
"""
import argparse
import json
import statistics
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

import a2sgd.torch as at
from a2sgd import _a2sgd


class Bucket:
    """A DDP bucket stand-in: the buffer and the parameters' gradients as views into it."""

    def __init__(self, buffer, shapes):
        self._buffer, self._grads, offset = buffer, [], 0
        for shape in shapes:
            n = shape[0] * (shape[1] if len(shape) > 1 else 1)
            self._grads.append(buffer[offset:offset + n].view(*shape))
            offset += n
        self._params = [torch.empty(s) for s in shapes]

    def buffer(self):
        return self._buffer

    def gradients(self):
        return self._grads

    def parameters(self):
        return self._params

    def index(self):
        return 0

    def is_last(self):
        return True

    def set_buffer(self, t):
        self._buffer.copy_(t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=25.0, help="bucket size in MiB (default 25, DDP's default)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", help="also write the medians and ratios to this file")
    a = ap.parse_args()
    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp()
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rdv", rank=0, world_size=1)
    # Square-ish weight matrices of 1024 columns fill the bucket (PowerSGD compresses matrices).
    n = int(a.mb * 2**20) // 4 // 1024 * 1024
    shapes = [(n // 1024 // 4, 1024)] * 4
    n = sum(r * c for r, c in shapes)
    gen = torch.Generator().manual_seed(1)
    g0 = torch.randn(n, generator=gen)
    g, e = g0.clone(), torch.randn(n, generator=gen) * 0.1
    state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2)
    pbuf = g0.clone()
    pbucket = Bucket(pbuf, shapes)
    for _ in range(3):  # past PowerSGD's vanilla iterations, its memories allocated
        pbuf.copy_(g0)
        psgd.powerSGD_hook(state, pbucket).wait()
        state.maybe_increase_iter(pbucket)

    codec = _a2sgd.A2sgdCodec(n)
    payload = torch.empty(codec.payload_words, dtype=torch.float64)

    def encode():
        return codec.encode(g, e, payload)

    encode()

    def decode():
        # One rank: the payload summed over the ranks is this rank's (global means = local ones).
        codec.decode(payload, 1, g, e)

    gn, en = g.numpy(), e.numpy()  # the same memory
    astate = at.A2SGDState()
    abucket = Bucket(g, shapes)
    fbucket = Bucket(g, shapes)

    def a2sgd_hook():
        at.a2sgd_hook(astate, abucket).wait()

    def fp16_compute():
        g.copy_(g.to(torch.float16).div_(1))

    def fp16():
        default_hooks.fp16_compress_hook(None, fbucket).wait()

    def powersgd():
        psgd.powerSGD_hook(state, pbucket).wait()

    read = ("read: torch.sum of g, of e", "read: torch.amax of g, of e", "read: BLAS sdot(g, e)")
    rmw = ("rmw: torch._foreach_mul_([g, e], 1)", "rmw: g.mul_(1), e.mul_(1)", "rmw: numpy multiply in place")
    kernels = {
        "a2sgd encode": encode,
        read[0]: lambda: (torch.sum(g), torch.sum(e)),
        read[1]: lambda: (torch.amax(g), torch.amax(e)),
        read[2]: lambda: np.dot(gn, en),
        "a2sgd decode": decode,
        rmw[0]: lambda: torch._foreach_mul_([g, e], 1.0),
        rmw[1]: lambda: (g.mul_(1.0), e.mul_(1.0)),
        rmw[2]: lambda: (np.multiply(gn, 1.0, out=gn), np.multiply(en, 1.0, out=en)),
        "torch fp16 hook's compute": fp16_compute,
        "a2sgd hook (1 rank)": a2sgd_hook,
        "torch fp16 hook (1 rank)": fp16,
        "torch PowerSGD hook (rank 1)": powersgd,
    }
    times = {k: [] for k in kernels}
    names = list(kernels)
    for r in range(a.repeats + 1):
        order = names[r % len(names):] + names[:r % len(names)]
        for k in order:
            g.copy_(g0)
            start = time.perf_counter()
            kernels[k]()
            elapsed = time.perf_counter() - start
            if r > 0:  # the first round warms up
                times[k].append(elapsed)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    mib = n * 4 / 2**20
    print(f"bucket {mib:.1f} MiB ({n} float32), 1 thread, medians of {a.repeats} rounds (ms):")
    for k in names:
        print(f"  {k:42s} {med[k]:8.2f}")
    kernels_ms = med["a2sgd encode"] + med["a2sgd decode"]
    read_ceiling = min(med[k] for k in read)
    rmw_ceiling = min(med[k] for k in rmw)
    fp16_ms = med["torch fp16 hook's compute"]
    hook = med["a2sgd hook (1 rank)"]
    ratios = {"encode_of_read_ceiling": read_ceiling / med["a2sgd encode"],
              "decode_of_rmw_ceiling": rmw_ceiling / med["a2sgd decode"],
              "fp16_compute_over_a2sgd_kernels": fp16_ms / kernels_ms,
              "fp16_hook_over_a2sgd_hook": med["torch fp16 hook (1 rank)"] / hook,
              "powersgd_hook_over_a2sgd_hook": med["torch PowerSGD hook (rank 1)"] / hook}
    print(f"a2sgd kernels {kernels_ms:.2f} ms: encode at {100 * ratios['encode_of_read_ceiling']:.0f}% of the read "
          f"ceiling ({read_ceiling:.2f} ms), decode at {100 * ratios['decode_of_rmw_ceiling']:.0f}% of the "
          f"read-modify-write ceiling ({rmw_ceiling:.2f} ms)")
    print(f"torch's fp16 hook's compute {fp16_ms:.2f} ms: {ratios['fp16_compute_over_a2sgd_kernels']:.2f}x the a2sgd "
          "kernels' time")
    print(f"hooks whole: a2sgd {hook:.2f} ms; torch's fp16 hook {ratios['fp16_hook_over_a2sgd_hook']:.2f}x, "
          f"PowerSGD {ratios['powersgd_hook_over_a2sgd_hook']:.2f}x (their time / a2sgd's)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bucket_mib": mib, "values": n, "threads": 1, "repeats": a.repeats, "median_ms": med,
                       "samples_ms": {k: [round(x * 1e3, 3) for x in v] for k, v in times.items()},
                       "ratios": ratios, "torch": torch.__version__}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
