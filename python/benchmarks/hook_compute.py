#!/usr/bin/env python3
"""The compute of a2sgd.torch's hook on one DDP bucket against torch's own passes over the same
memory streams and against torch's fp16 and PowerSGD hooks, measured in one run (docs/pytorch.md).

Single-threaded (torch.set_num_threads(1), as the library's Kokkos Serial build runs), one bucket
of --mb MiB of float32 gradients, medians of --repeats rounds; within a round every kernel runs
once, in a rotating order, so that a slow spell of a shared machine hits all of them alike.

- a2sgd encode: one pass reading g and e; reference: torch.dot(g, e) (one pass, the same two read
  streams);
- a2sgd decode: one pass reading g and e and writing both; reference: torch._foreach_mul_([g, e], 1)
  (the same two read-modify-write streams, in two passes).
  These references are what torch does with the same streams, not the machine's ceilings (the
  library's a2sgd-bench measures those); where the kernel beats them, the reference is the slower.
- torch's fp16 hook's compute: the bucket cast to float16 and back (its all-reduce left out);
- torch's PowerSGD hook (rank 1, the default, without its warm-up: start_powerSGD_iter = 2 and the
  hook called on its third iteration) on a process group of one rank: its compute and two
  all-reduces of a single rank, which return at once.

Usage: PYTHONPATH=<build>/python python3 hook_compute.py [--mb 25] [--repeats 7]
"""
import argparse
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

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
    bounds = [0, n]
    state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2)
    pbuf = g0.clone()
    pbucket = Bucket(pbuf, shapes)
    for _ in range(3):  # past PowerSGD's vanilla iterations, its memories allocated
        pbuf.copy_(g0)
        psgd.powerSGD_hook(state, pbucket).wait()
        state.maybe_increase_iter(pbucket)

    def encode():
        return _a2sgd.encode(g.data_ptr(), e.data_ptr(), n, bounds)

    payload, local, _ = encode()

    def decode():
        _a2sgd.decode_in_place(g.data_ptr(), e.data_ptr(), n, bounds, local, local)

    def fp16():
        g.copy_(g.to(torch.float16))

    def powersgd():
        psgd.powerSGD_hook(state, pbucket).wait()

    kernels = {
        "a2sgd encode": encode,
        "torch: two read streams (dot)": lambda: torch.dot(g, e),
        "a2sgd decode": decode,
        "torch: two read-modify-write streams": lambda: torch._foreach_mul_([g, e], 1.0),
        "torch fp16 hook compute": fp16,
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
    hook = med["a2sgd encode"] + med["a2sgd decode"]
    ref = med["torch: two read streams (dot)"] + med["torch: two read-modify-write streams"]
    print(f"a2sgd hook compute {hook:.2f} ms; torch's passes over the same streams take "
          f"{med['torch: two read streams (dot)'] / med['a2sgd encode']:.2f}x (encode) and "
          f"{med['torch: two read-modify-write streams'] / med['a2sgd decode']:.2f}x (decode) its time, "
          f"{ref / hook:.2f}x both")
    print(f"against torch's fp16 hook compute {med['torch fp16 hook compute'] / hook:.2f}x, "
          f"PowerSGD {med['torch PowerSGD hook (rank 1)'] / hook:.2f}x (their time / a2sgd's)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
