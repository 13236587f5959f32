#!/usr/bin/env python3
"""examples/torch/local_sgd.py on a short run (150 steps, 2 ranks, an average every 25 steps after
25 all-reduced ones): a2sgd.torch's PeriodicAverager under torch's post-local SGD hook deploys the
same model as torch's own PostLocalSGDOptimizer with PeriodicModelAverager (equal parameter sums,
equal accuracy), with the bytes counted exactly (25 dense steps and 5 averages of 4 n, torch one
more average at the end of its warm-up); its outer Nesterov step deploys another model at the same
bytes. Usage: check_local_sgd.py EXAMPLE WORK_DIR"""
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
r = subprocess.run([sys.executable, example, "--out", work, "--steps", "150", "--period", "25", "--warmup", "25",
                    "--runs", "torch-postlocal,a2sgd-local,a2sgd-diloco"], capture_output=True, text=True)
print(r.stdout, r.stderr[-2000:])
if r.returncode != 0:
    print("FAIL: the example exited", r.returncode)
    sys.exit(1)
runs = {x["run"]: x for x in json.load(open(os.path.join(work, "local_sgd_m0.9.json")))}
n = runs["torch-postlocal"]["parameters"]
fails = []
torch_run, ours, diloco = runs["torch-postlocal"], runs["a2sgd-local"], runs["a2sgd-diloco"]
if (torch_run["checksum"], torch_run["test_accuracy"]) != (ours["checksum"], ours["test_accuracy"]):
    fails.append(f"a2sgd's averager deploys another model than torch's: checksum {ours['checksum']!r} against "
                 f"{torch_run['checksum']!r}, accuracy {ours['test_accuracy']} against {torch_run['test_accuracy']}")
want = {"a2sgd-local": 30 * 4 * n / 150, "a2sgd-diloco": 30 * 4 * n / 150, "torch-postlocal": 31 * 4 * n / 150}
for name, b in want.items():
    if abs(runs[name]["bytes_per_step"] - b) > 1e-6 * b:
        fails.append(f"{name}: {runs[name]['bytes_per_step']} bytes per step, expected {b}")
if diloco["checksum"] == ours["checksum"]:
    fails.append("the outer Nesterov step deployed the plain average's model")
for name, x in runs.items():
    if x["test_accuracy"] < 0.5:
        fails.append(f"{name}: test accuracy {x['test_accuracy']:.3f} after 150 steps")
print("\n".join("FAIL " + f for f in fails) or "a2sgd's averager equals torch's post-local SGD; bytes as expected")
sys.exit(1 if fails else 0)
