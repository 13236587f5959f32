#!/usr/bin/env python3
"""reports/network_model_report.py on made-up a2sgd-netbench CSVs: the summary row per file (the
link fit, the largest error from 64 kB on, measured / modelled milliseconds, the loss counters
summed over the nodes), the rows' order (node count, slow to unshaped, Open MPI's, ring, put), the
collective-algorithm tables (the model from the ring run, both measurements, every forced all-reduce
algorithm beside Open MPI's choice), and clear errors for a bad file name, a bad loss counter file
and an empty directory.

Usage: check_network_model_report.py SCRIPTS_DIR WORK_DIR
"""
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
from reports import network_model_report as nmr  # noqa: E402

HEADER = "label,ranks,op,bytes,repeats,median_s,min_s,predicted_s,alpha_s,bytes_per_s,full_duplex\n"
MB = 1 << 20


def netbench(path, label, ranks, rows, alpha_s=20e-6, bytes_per_s=12e6):
    """rows: [(op, bytes, measured_s, predicted_s)]; the first row is the ping-pong, as netbench writes."""
    with open(path, "w") as fh:
        fh.write(HEADER)
        for op, size, measured, predicted in [("pingpong", 8, alpha_s, alpha_s)] + rows:
            fh.write(f"{label},{ranks},{op},{size},5,{measured},{measured},{predicted},{alpha_s},{bytes_per_s},1\n")


def collectives(scale):
    """The sizes every table reads; measured = scale x modelled (so the error is 1 / scale - 1)."""
    rows = []
    for op, sizes in (("allreduce", (2 * MB, 8 * MB, 64 * MB)), ("allgather", (MB // 2, 2 * MB, 8 * MB))):
        for size in sizes:
            model = size / 12e6
            rows.append((op, size, scale * model, model))
    rows.append(("allreduce", 1024, 0.004, 0.001))  # latency-bound: +300% there, not in the large error
    rows += [("method:dense", 18606400, 2.0, 1.6), ("method:qsgd", 5814504, 0.5, 0.5),
             ("method:a2sgd", 16, 0.00004, 0.00002)]
    return rows


d = os.path.join(work, "study")
os.makedirs(d)
netbench(os.path.join(d, "netbench_p4_100mbit_links1.csv"), "100mbit", 4, collectives(1.25))
netbench(os.path.join(d, "netbench_p4_100mbit_links1_ring.csv"), "100mbit", 4, collectives(1.1))
netbench(os.path.join(d, "netbench_p4_100mbit_links1_put.csv"), "100mbit", 4, collectives(2.0))
netbench(os.path.join(d, "netbench_p4_none_links1.csv"), "none", 4, collectives(1.0), bytes_per_s=1.5e9)
netbench(os.path.join(d, "netbench_p2_1gbit_links1.csv"), "1gbit", 2, collectives(1.0), bytes_per_s=1.2e8)
with open(os.path.join(d, "netbench_p4_100mbit_links1.losses"), "w") as fh:
    fh.write("0 0 1 10 0\n1 2 0 5 1\n2 0 0 0 0\n3 0 0 7 0\n")
for alg, seconds in ((2, (0.9, 3.6)), (4, (0.3, 1.2))):
    with open(os.path.join(d, f"netbench_p4_100mbit_links1_allreduce-alg{alg}.csv"), "w") as fh:
        fh.write(HEADER)
        for size, s in zip((2 * MB, 8 * MB), seconds):
            fh.write(f"100mbit,4,allreduce,{size},5,{s},{s},-1,0,0,1\n")

results = nmr.load_results(d)
check(len(results) == 5, f"one result per study file, the algorithm files apart (got {len(results)})")
summary = nmr.summary_table(results)
body = summary[2:]
order = [(line.split(" | ")[0], line.split(" | ")[1], line.split(" | ")[2]) for line in body]
check(order == [("| 2", "1gbit", "send, Open MPI's"), ("| 4", "100mbit", "send, Open MPI's"),
                ("| 4", "100mbit", "send, ring"), ("| 4", "100mbit", "put, Open MPI's"), ("| 4", "none", "send, Open MPI's")],
      f"rows by node count, then slow to unshaped, then Open MPI's, ring, put (got {order})")
ours = body[1].split(" | ")
check(ours[3] == "20.0" and ours[4] == "0.096", f"alpha in us and the fitted Gbit/s (got {ours[3]}, {ours[4]})")
check(ours[5] == "20%", f"largest error from 64 kB on: |1/1.25 - 1| = 20%, the 1-kB row left out (got {ours[5]})")
check(ours[6] == f"{1.25 * 8 * MB / 12e6 * 1e3:,.0f} / {8 * MB / 12e6 * 1e3:,.0f}",
      f"all-reduce 8 MB measured / modelled ms (got {ours[6]})")
check(ours[9] == "2,000.0 / 1,600.0" and ours[10] == "500.0 / 500.0" and ours[11] == "0.04 / 0.02",
      f"dense, QSGD, A2SGD: measured / modelled ms (got {ours[9]}, {ours[10]}, {ours[11]})")
check(ours[12] == "3, 22, 1 |", f"losses summed over 4 nodes: drops up + down, retransmissions, timeouts (got {ours[12]})")
check(body[2].split(" | ")[12] == "- |", "no loss counter file: '-'")

tables = nmr.collectives_tables(results, 4)
model = next((line for line in tables if line.startswith("| 100mbit | model")), "")
check(model.split(" | ")[2:] == [f"{s / 12e6 * 1e3:,.1f}" for s in (2 * MB, 8 * MB, MB // 2, 2 * MB)] +
      [f"{8 * MB / 12e6 * 1e3:,.1f} |"], f"the model's row: the ring run's predictions (got {model})")
ompi = next((line for line in tables if line.startswith("| 100mbit | Open MPI's choice")), "")
check(ompi.split(" | ")[2] == f"{1.25 * 2 * MB / 12e6 * 1e3:,.1f}", f"Open MPI's choice: its run's median (got {ompi})")
check(not any(line.startswith("| none |") for line in tables[:8]), "no unshaped rows in the algorithm table")
header = next((line for line in tables if "all-reduce, ms, median of 5" in line), "")
check("reduce then broadcast (2)" in header and "ring (4)" in header, f"forced algorithms named (got {header})")
row8 = next((line for line in tables if line.startswith("| 100mbit | 8 MB")), "")
check(row8 == f"| 100mbit | 8 MB | 3,600.0 | 1,200.0 | {1.25 * 8 * MB / 12e6 * 1e3:,.1f} |",
      f"8 MB: each algorithm's median, then Open MPI's choice from the study's run (got {row8})")
check(nmr.collectives_tables(results, 2) == [], "2 nodes without a ring run or forced algorithms: no table")

out = subprocess.run([sys.executable, "-m", "reports", "network-model", d], capture_output=True, text=True)
check(out.returncode == 0, f"the report runs (exit {out.returncode}: {out.stderr.strip()[-300:]})")
md = open(os.path.join(d, "model_report.md")).read() if out.returncode == 0 else ""
check("## Summary" in md and "## Collective algorithms, 4 nodes" in md, "model_report.md has the summary and the algorithms")

bad = os.path.join(work, "badname")
os.makedirs(bad)
netbench(os.path.join(bad, "netbench_pX_fast.csv"), "fast", 2, collectives(1.0))
out = subprocess.run([sys.executable, "-m", "reports", "network-model", bad], capture_output=True, text=True)
check(out.returncode != 0 and "netbench_pX_fast.csv" in out.stderr and "Traceback" not in out.stderr,
      f"a file name network_study.sh does not write: an error naming it (got {out.returncode}: {out.stderr.strip()})")

badloss = os.path.join(work, "badloss")
os.makedirs(badloss)
netbench(os.path.join(badloss, "netbench_p2_1gbit_links1.csv"), "1gbit", 2, collectives(1.0))
with open(os.path.join(badloss, "netbench_p2_1gbit_links1.losses"), "w") as fh:
    fh.write("a2sgd-cluster: error: no cluster 'study' is up\n")
out = subprocess.run([sys.executable, "-m", "reports", "network-model", badloss], capture_output=True, text=True)
check(out.returncode != 0 and "netbench_p2_1gbit_links1.losses" in out.stderr and "Traceback" not in out.stderr,
      f"a loss file that is not the counters: an error naming it (got {out.returncode}: {out.stderr.strip()})")

empty = os.path.join(work, "empty")
os.makedirs(empty)
out = subprocess.run([sys.executable, "-m", "reports", "network-model", empty], capture_output=True, text=True)
check(out.returncode != 0 and "no netbench_p*.csv" in out.stderr, f"an empty directory: an error (got {out.stderr.strip()})")
finish()
