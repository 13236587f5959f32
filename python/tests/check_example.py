#!/usr/bin/env python3
"""examples/torch/ddp_hooks.py on a short run (60 steps, 2 ranks): every exchange trains past chance,
and the bytes each rank hands to all_reduce per step are exact: DDP's all-reduce 4 n, fp16 2 n,
a2sgd 16 (one bucket), Top-K 8 k, QSGD 4 + 4 ceil(10 n / 32), EF-sign 4 + 4 ceil(n / 32) (to
all_gather), PowerSGD between (its two warm-up steps are dense).
Usage: check_example.py EXAMPLE WORK_DIR"""
import json
import os
import shutil
import subprocess
import sys

try:
    import torch  # noqa: F401
except ImportError as e:
    print(f"SKIPPED: no torch ({e})")
    sys.exit(0)
example, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
r = subprocess.run([sys.executable, example, "--out", work, "--steps", "60"], capture_output=True, text=True)
print(r.stdout, r.stderr[-2000:])
if r.returncode != 0:
    print("FAIL: the example exited", r.returncode)
    sys.exit(1)
runs = {x["exchange"]: x for x in json.load(open(os.path.join(work, "example.json")))}
n = runs["allreduce"]["parameters"]
fails = []
want = {"allreduce": 4 * n, "fp16": 2 * n, "a2sgd": 16, "topk": 8 * max(1, round(0.001 * n)),
        "qsgd": 4 + 4 * -(-10 * n // 32), "efsign": 4 + 4 * -(-n // 32)}
for name, b in want.items():
    if runs[name]["bytes_per_step"] != b:
        fails.append(f"{name}: {runs[name]['bytes_per_step']} bytes per step, expected {b}")
if not 16 < runs["powersgd"]["bytes_per_step"] < 4 * n:
    fails.append(f"powersgd: {runs['powersgd']['bytes_per_step']} bytes per step")
for name, x in runs.items():
    if x["test_accuracy"] < 0.5:
        fails.append(f"{name}: test accuracy {x['test_accuracy']:.3f} after 60 steps")
print("\n".join("FAIL " + f for f in fails) or "the example ran every exchange with the expected bytes")
sys.exit(1 if fails else 0)
