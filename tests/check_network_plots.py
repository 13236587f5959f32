#!/usr/bin/env python3
"""reports/plot_network_steps.py on made-up timed runs: the rate of each point (a tc rate as such,
the unshaped one at the bandwidth fitted to it), the milliseconds in the tables, one figure per
node count with two rates or more and none with one, and a clear error for an empty directory.

Usage: check_network_plots.py SCRIPTS_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scriptcheck import check, finish  # noqa: E402

root, work = os.path.abspath(sys.argv[1]), sys.argv[2]
studies = os.path.join(root, "scripts", "studies")
# python3 -m reports, here and in the drivers these tests start, finds the package at the source root.
os.environ["PYTHONPATH"] = root + os.pathsep + os.environ.get("PYTHONPATH", "")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
sys.path.insert(0, root)
from reports.network_model_report import rate_gbps  # noqa: E402


check(rate_gbps("100mbit", 7.0) == 0.1 and rate_gbps("1gbit", 7.0) == 1.0 and rate_gbps("none", 7.0) == 7.0,
      "rates: 100mbit -> 0.1, 1gbit -> 1, none -> the fitted 7 Gbit/s")


def report(directory, link, dense_s, a2sgd_s):
    os.makedirs(directory)
    runs = {"dense": dict(step_s=dense_s, modelled_step_s=dense_s / 2), "a2sgd": dict(step_s=a2sgd_s)}
    with open(os.path.join(directory, "report.json"), "w") as fh:
        json.dump({"sgd": dict(link=link, runs=runs)}, fh)


report(os.path.join(work, "network-100mbit-p2"), "0.0956:12.2", 0.9, 0.25)
report(os.path.join(work, "network-1gbit-p2"), "0.956:19.0", 0.3, 0.24)
report(os.path.join(work, "network-none-p2"), "11.8:23.4", 0.26, 0.24)
report(os.path.join(work, "network-100mbit-p4"), "0.0956:40.0", 1.5, 0.5)

out = subprocess.run([sys.executable, "-m", "reports", "network-steps", work, "--title", "test"],
                     capture_output=True, text=True)
print(out.stdout + out.stderr)
check(out.returncode == 0, f"exit code 0 (got {out.returncode})")
check("| dense | 900.0 / 450.0 | 300.0 / 150.0 | 260.0 / 130.0 |" in out.stdout,
      "2 nodes: dense's row in milliseconds, measured / modelled, rates in increasing order")
check("| a2sgd | 250.0 / - | 240.0 / - | 240.0 / - |" in out.stdout, "a missing model figure is '-'")
check("### 4 nodes, sgd" in out.stdout and "| dense | 1500.0 / 750.0 |" in out.stdout, "4 nodes: one rate, table only")
try:
    import matplotlib  # noqa: F401
    have_plots = True
except ImportError:
    have_plots = False
if have_plots:
    check(os.path.getsize(os.path.join(work, "step_vs_rate_p2_sgd.png")) > 1000, "the 2-node figure was written")
check(not os.path.exists(os.path.join(work, "step_vs_rate_p4_sgd.png")), "no figure from a single rate")

empty = os.path.join(work, "empty")
os.makedirs(empty)
out = subprocess.run([sys.executable, "-m", "reports", "network-steps", empty],
                     capture_output=True, text=True)
check(out.returncode != 0 and "no network-<rate>-p<N>/report.json" in out.stderr,
      f"an empty directory: non-zero exit naming what is missing (got {out.returncode}: {out.stderr.strip()})")
finish()
