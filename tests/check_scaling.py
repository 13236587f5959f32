#!/usr/bin/env python3
"""scripts/studies/scaling_projection.sh on a stand-in a2sgd-train and reports/scaling_report.py on runs with
known inputs (docs/scaling.md):

- the projection script runs every method once on 2 ranks with the rank counts and links given,
  a2sgd-paper as the paper's exchange (model-wide means, no averaging, zero gradients moved),
  keeps a failing run's log and returns its code, refuses bad options with exit 2;
- the report's GPU step is compute (the language model's FLOPs at the GPU's FP32 peak) + the
  kernels' bytes at its memory bandwidth + the modelled communication, an all-gather method's decode
  bytes scaled by p / the run's ranks; dense / A2SGD is the ratio of those steps; the time to target
  is the measured steps times the modelled step;
- the network table gives each method's measured step (its communication) / modelled step (compute,
  compression and update + the modelled communication) per node count, "not timed" where a node
  count lacks the run, dense / A2SGD of the measured steps, and refuses a run filed under a node
  count other than its world size;
- the drift table takes, per language-model group, A2SGD's default exchange's run whose rate stayed
  uncut longest, and averages the replicas' divergence over the evaluations before the first cut.

Usage: check_scaling.py SCRIPTS_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scriptcheck import check, executable, finish, option, recorded_calls, standin_launcher  # noqa: E402

root, work = os.path.abspath(sys.argv[1]), sys.argv[2]
studies = os.path.join(root, "scripts", "studies")
# python3 -m reports, here and in the drivers these tests start, finds the package at the source root.
os.environ["PYTHONPATH"] = root + os.pathsep + os.environ.get("PYTHONPATH", "")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
sys.path.insert(0, root)
from reports import scaling_report  # noqa: E402

calls = os.path.join(work, "calls.txt")
# A stand-in a2sgd-train: records its arguments, writes a summary and config.ini; qsgd fails with 5.
executable(os.path.join(work, "build", "apps", "train", "a2sgd-train"), f"""#!/usr/bin/env python3
import json, os, sys
a = sys.argv[1:]
with open({calls!r}, "a") as fh:
    fh.write(" ".join(a) + "\\n")
if a[a.index("--compressor") + 1] == "qsgd":
    print("qsgd stand-in failure")
    sys.exit(5)
out = a[a.index("--output-dir") + 1]
os.makedirs(out, exist_ok=True)
with open(a[a.index("--metrics") + 1], "w") as fh:
    fh.write(json.dumps(dict(event="summary", model="lstm-lm 10000-200-200x2")) + "\\n")
with open(os.path.join(out, "config.ini"), "w") as fh:
    fh.write("project-ranks = 2,4\\n")
""")
env = standin_launcher(work, calls)
out = os.path.join(work, "projection")


def project(*args):
    return subprocess.run(["bash", os.path.join(studies, "scaling_projection.sh"), "--build",
                           os.path.join(work, "build"), "--out", out, *args], capture_output=True, text=True, env=env)


r = project("--nosuch")
check(r.returncode == 2 and "unknown option" in r.stderr, f"refuses an unknown option with exit 2 ({r.returncode})")
r = project("--methods", "dense a2sgd a2sgd-paper qsgd powersgd", "--ranks-list", "2,64", "--links", "25:15,200:1")
runs = recorded_calls(calls)
check(r.returncode == 5, f"the failing run's code is the script's ({r.returncode})")
check([option(a, "--compressor") for a in runs] == ["dense", "a2sgd", "a2sgd", "qsgd", "powersgd"],
      f"every method once, in order, past the failure: {[option(a, '--compressor') for a in runs]}")
check(all(option(a, "--project-ranks") == "2,64" and option(a, "--project-links") == "25:15,200:1"
          and option(a, "--model") == "lstm" and option(a, "--dataset") == "ptb" for a in runs),
      "the rank counts and links given, on the language model")
paper = runs[2]
check(option(paper, "--a2sgd-granularity") == "model" and option(paper, "--a2sgd-average-every") == "0"
      and option(paper, "--a2sgd-zero-gradient") == "move", "a2sgd-paper is the paper's exchange")
check(option(runs[1], "--a2sgd-granularity") is None, "a2sgd runs at a2sgd-train's defaults")
check([line for line in open(calls) if line.startswith("np=")] == ["np=2\n"] * 5, "every run on 2 ranks")
check(os.path.exists(os.path.join(out, "qsgd.log")) and not os.path.exists(os.path.join(out, "dense.log")),
      "the failing run's log is kept, a finished run's removed")
check(os.path.exists(os.path.join(out, "a2sgd-paper.jsonl")) and
      os.path.exists(os.path.join(out, "a2sgd-paper", "config.ini")), "run M's metrics in M.jsonl, config in M/")

# The report on runs with known inputs: 2 ranks measured, p = 2 and 64 projected, one link of
# 25 Gbit/s (alpha 15 us). Compute: the 10000-200-200x2 language model, 20 x 35 tokens: per token
# 2*4*200*400 per layer (2 layers) + 2*200*10000 = 5.28 MFLOP, x3 x 700 = 11.088 GFLOP at 67 TFLOP/s.
proj = os.path.join(work, "known")
def run(method, comm2, comm64, compress, apply, allgather=False):
    os.makedirs(os.path.join(proj, method), exist_ok=True)
    summary = dict(event="summary", model="lstm-lm 10000-200-200x2", batch_size=20, world_size=2,
                   decode_scales_with_ranks=allgather, kernel_bytes_compress=compress, kernel_bytes_apply=apply,
                   modelled_comm_s_p2_25gbps=comm2, modelled_comm_s_p64_25gbps=comm64)
    with open(os.path.join(proj, method + ".jsonl"), "w") as fh:
        fh.write(json.dumps(summary) + "\n")
    with open(os.path.join(proj, method, "config.ini"), "w") as fh:
        fh.write("bptt = 35\nproject-ranks = 2,64\nproject-links = 25:15\n")
run("dense", 6e-3, 12e-3, 0.0, 4.8e9)           # apply: 1 ms at 4.8 TB/s
run("a2sgd", 1e-4, 2e-4, 4.8e8, 4.8e8)          # kernels: 0.2 ms
run("topk", 1e-4, 2e-3, 0.0, 4.8e8, allgather=True)  # decode 0.1 ms at 2 ranks, 3.2 ms at 64
compute = 11.088e9 / 67e12
runs_, links, ranks, c = scaling_report.projection(proj)
check(abs(c - compute) < 1e-12 and links == [(25.0, 15.0)] and ranks == [2, 64],
      f"compute {c * 1e3:.6f} ms (expected {compute * 1e3:.6f}), links and ranks from config.ini")
dense64 = compute + 1e-3 + 12e-3
a2sgd64 = compute + 0.2e-3 + 2e-4
topk64 = compute + 3.2e-3 + 2e-3
got = [scaling_report.projected_step_seconds(runs_[m][0], 64, 25.0, compute) for m in ("dense", "a2sgd", "topk")]
check(all(abs(g - w) < 1e-12 for g, w in zip(got, (dense64, a2sgd64, topk64))),
      f"steps at 64 ranks {got}, expected {(dense64, a2sgd64, topk64)} (Top-K's decode x 32)")
table = scaling_report.projection_table(proj, 25.0)
row = next(line for line in table if line.startswith("| 64 |"))
slow = 10 * compute
check(f"| {dense64 / a2sgd64:.1f} |" in row and
      row.endswith(f"| {(slow + 13e-3) / (slow + 0.4e-3):.1f} |"), f"dense / A2SGD at 1x and 10x compute: {row}")
check(f"{1e3 * dense64:.3f}" in row and f"{1e3 * topk64:.3f}" in row, "the row's step times in ms")
# Time to target: a 2-rank group with tuned dense and A2SGD's defaults.
conv = os.path.join(work, "convergence", "lstm_p2_sgd")
os.makedirs(conv)
def conv_run(name, perplexities, bytes_per_step):
    with open(os.path.join(conv, name + ".jsonl"), "w") as fh:
        for step, ppl in perplexities:
            fh.write(json.dumps(dict(event="eval", step=step, valid_perplexity=ppl, valid_perplexity_averaged=ppl,
                                     replica_divergence=0.0)) + "\n")
        fh.write(json.dumps(dict(event="summary", steps=perplexities[-1][0], bytes_per_step=bytes_per_step,
                                 step_time_s=0.1, world_size=2,
                                 total_comm_bytes=bytes_per_step * perplexities[-1][0],
                                 dense_bytes_per_step=1000.0)) + "\n")
conv_run("dense-lr40", [(100, 200.0), (200, 100.0)], 1000.0)      # target 110: crossed between 100 and 200
conv_run("a2sgd-layer-k200-hold-lr30", [(100, 300.0), (200, 110.0), (300, 90.0)], 5.0)
ttt = scaling_report.time_to_target(proj, os.path.dirname(conv))
line = next((line for line in ttt if line.startswith("| 2 ranks")), "")
dense2 = compute + 1e-3 + 6e-3
a2sgd2 = compute + 0.2e-3 + 1e-4
check(" x " in line and f"{200 * a2sgd2:.2f} |" in line,
      f"A2SGD reaches the target at step 200: 200 x its modelled step ({line})")
# The drift table: per group the default run whose rate stayed uncut longest, and the replicas'
# divergence over the evaluations before the first cut only.
drift = os.path.join(work, "drift", "lstm_p4_adam")
os.makedirs(drift)
def drift_run(name, evals, lrs):
    with open(os.path.join(drift, name + ".jsonl"), "w") as fh:
        for (step, ppl, replica, div), lr in zip(evals, lrs):
            fh.write(json.dumps(dict(event="train", step=step, lr=lr)) + "\n")
            fh.write(json.dumps(dict(event="eval", step=step, valid_perplexity=replica,
                                     valid_perplexity_averaged=ppl, replica_divergence=div)) + "\n")
        fh.write(json.dumps(dict(event="summary", steps=evals[-1][0], bytes_per_step=5.0, step_time_s=0.1,
                                 world_size=4, total_comm_bytes=5.0 * evals[-1][0],
                                 dense_bytes_per_step=1000.0)) + "\n")
drift_run("dense-lr0.003", [(100, 200.0, 200.0, 0.0), (200, 100.0, 100.0, 0.0)], [0.003, 0.003])
# Cut after its second evaluation: two evaluations count, the cut ones (divergence 0.9) do not.
drift_run("a2sgd-layer-k200-hold-lr0.003", [(100, 300.0, 310.0, 0.2), (200, 250.0, 260.0, 0.4),
                                            (300, 240.0, 250.0, 0.9), (400, 230.0, 240.0, 0.9)],
          [0.003, 0.003, 0.00075, 0.00075])
drift_run("a2sgd-layer-k200-hold-lr0.003-const", [(100, 300.0, 320.0, 0.1), (200, 200.0, 230.0, 0.3),
                                                  (300, 105.0, 140.0, 0.5)], [0.003] * 3)
drift_run("a2sgd-layer-k110-hold-lr0.003", [(100, 300.0, 300.0, 0.0)] * 1 + [(200, 90.0, 90.0, 0.0),
                                            (300, 80.0, 80.0, 0.0), (400, 70.0, 70.0, 0.0)], [0.003] * 4)
rows = scaling_report.drift_rows(os.path.dirname(drift))
d = rows.get(("adam", 4), {})
check(d.get("config") == "a2sgd-layer-k200-hold-lr0.003-const" and d.get("evals") == 3 and d.get("last_step") == 300,
      f"the drift row takes the default exchange's run with the most evaluations before a cut (K = 110 is not the "
      f"default): {d}")
check(abs(d.get("mean_divergence", 0) - 0.3) < 1e-12 and d.get("max_divergence") == 0.5
      and d.get("replica") == 140.0 and d.get("averaged") == 105.0,
      f"mean and largest divergence over its evaluations, replica and averaged perplexity at the last: {d}")
check(d.get("steps_to_target") is not None and d.get("steps_vs_dense") and d["steps_vs_dense"] > 1.0,
      f"its steps to the group's target (110) and the ratio to dense's: {d}")
line = next((line for line in scaling_report.drift_table(os.path.dirname(drift)) if line.startswith("| adam | 4 |")), "")
check("| 3 (300) | 0.30, 0.50 | 140.0, 105.0 |" in line, f"the drift table's row: {line}")
# Adam's defaults since the warm-up (-lrw200): the rising rate is no cut, the first fall is.
drift_run("a2sgd-layer-k200-hold-lr0.003-lrw200", [(100, 300.0, 320.0, 0.1), (200, 200.0, 230.0, 0.2),
                                                   (300, 150.0, 160.0, 0.3), (400, 104.0, 120.0, 0.6),
                                                   (500, 100.0, 110.0, 0.9)],
          [0.0015, 0.003, 0.003, 0.003, 0.00075])
d = scaling_report.drift_rows(os.path.dirname(drift)).get(("adam", 4), {})
check(d.get("config") == "a2sgd-layer-k200-hold-lr0.003-lrw200" and d.get("evals") == 4 and d.get("last_step") == 400
      and d.get("max_divergence") == 0.6,
      f"a warm-up's evaluations count, those after the first fall of the rate do not: {d}")
# The network table on timed runs with known summaries: dense and A2SGD at 2 and 4 nodes, Top-K at 2.
def timed(folder, name, ranks, step, comm, compute, modelled):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name + ".jsonl"), "w") as fh:
        fh.write(json.dumps({"event": "train", "step": 1}) + "\n")
        fh.write(json.dumps({"event": "summary", "world_size": ranks, "step_time_s": step, "comm_s_per_step": comm,
                             "compute_s_per_step": compute, "compress_s_per_step": 0.01,
                             "optimizer_s_per_step": 0.02, "modelled_comm_s_per_step": modelled,
                             "bytes_per_step": 100}) + "\n")


net = {2: os.path.join(work, "net2"), 4: os.path.join(work, "net4")}
timed(net[2], "dense_sgd", 2, 0.8, 0.6, 0.15, 0.55)
timed(net[2], "a2sgd_sgd", 2, 0.2, 0.01, 0.16, 0.002)
timed(net[2], "topk_sgd", 2, 0.18, 0.005, 0.15, 0.001)
timed(net[4], "dense_sgd", 4, 1.6, 1.2, 0.3, 1.0)
timed(net[4], "a2sgd_sgd", 4, 0.4, 0.05, 0.3, 0.004)
table = scaling_report.network_table(net, "sgd")
print("\n".join(table))
check("| dense | 800 (600) / 730 | 1,600 (1,200) / 1,330 |" in table,
      "dense: measured (comm) / modelled = compute 150 + 10 + 20 + 550 = 730 ms at 2 nodes, 1,330 at 4")
check("| Top-K | 180 (5) / 181 | not timed |" in table, "Top-K timed at 2 nodes only: 'not timed' at 4")
check("| dense / A2SGD, measured step | 4.00x | 4.00x |" in table, "dense / A2SGD of the measured steps")
check("| dense's compute per step and rank (ms) | 150 | 300 |" in table, "dense's compute per node count")
timed(os.path.join(work, "net8"), "dense_sgd", 4, 1.6, 1.2, 0.3, 1.0)
try:
    scaling_report.network_table({8: os.path.join(work, "net8")}, "sgd")
    check(False, "a 4-rank run filed under 8 nodes is refused")
except ValueError as e:
    check("4 ranks" in str(e) and "8 nodes" in str(e), f"a 4-rank run filed under 8 nodes is refused: {e}")
finish()
