#!/usr/bin/env python3
"""scripts/studies/lr_sweep.sh and reports/lr_sweep_report.py (docs/tuning.md) on a stand-in a2sgd-train:

- the sweep runs every method x optimizer x rate once, with exactly that method, optimizer and rate
  (momentum with --momentum 0.9), into OUT/<model>_p<ranks>_<optimizer>/<method>_lr<rate>/, keeps
  finished runs and redoes a run that stopped part-way, refuses unknown methods, optimizers and rates
  with exit 2 before training, carries on past a diverged run (exit 3) and returns the first other
  failure's code;
- the report scores each run by the averaged model's last evaluation (perplexity: lower is better;
  accuracy: higher is better), counts a diverged or unfinished run as tried and worst, picks the best
  rate per method and flags it `edge` when it is the smallest or largest rate tried.

Usage: check_lr_sweep.py SCRIPTS_DIR WORK_DIR
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

calls = os.path.join(work, "calls.txt")
# A stand-in for a2sgd-train: lists two methods; reports 10 steps per epoch for the one-step probe;
# otherwise records its arguments and writes metrics whose final averaged perplexity is
# (lr - 27)^2 + 100 for dense (best of 10, 20, 30, 40: 30) and (lr - 10)^2 + 150 for a2sgd (best:
# 10, the end of the grid), accuracy 0.9 - |lr - 0.1| for the MLP;
# --lr 40 with a2sgd diverges (exit 3, a diverged record); --lr 555 fails with 5.
executable(os.path.join(work, "build", "apps", "train", "a2sgd-train"), f"""#!/usr/bin/env python3
import json, os, sys
a = sys.argv[1:]
if a == ["--list-methods"]:
    print("dense\\tMPI_Allreduce of the whole gradient")
    print("a2sgd\\ttwo-level gradient averaging")
    sys.exit(0)
if a[a.index("--steps") + 1] == "1":
    print("  exchange x, optimizer y, lr 1 (plateau), batch 20 per rank, 1 steps (10 per epoch)")
    sys.exit(0)
with open({calls!r}, "a") as fh:
    fh.write(" ".join(a) + "\\n")
out = a[a.index("--output-dir") + 1]
os.makedirs(out, exist_ok=True)
lr = float(a[a.index("--lr") + 1])
method = a[a.index("--compressor") + 1]
mlp = a[a.index("--model") + 1] == "mlp"
with open(os.path.join(out, "metrics.jsonl"), "w") as fh:
    if lr == 555:
        sys.exit(5)
    if method == "a2sgd" and lr == 40:
        fh.write(json.dumps({{"event": "diverged", "step": 3}}) + "\\n")
        sys.exit(3)
    if mlp:
        s = {{"test_accuracy_averaged": 0.9 - abs(lr - 0.1)}}
    else:
        s = {{"valid_perplexity_averaged": (lr - 27) ** 2 + 100 if method == "dense" else (lr - 10) ** 2 + 150}}
    fh.write(json.dumps(dict(event="eval", step=5, **s)) + "\\n")
    fh.write(json.dumps(dict(event="summary", **s)) + "\\n")
with open(os.path.join(out, "config.ini"), "w") as fh:
    fh.write("lr = %g\\n" % lr)
""")
env = standin_launcher(work, calls)
out = os.path.join(work, "sweep")


def sweep(*args):
    return subprocess.run(["bash", os.path.join(studies, "lr_sweep.sh"), "--build", os.path.join(work, "build"),
                           "--out", out, *args], capture_output=True, text=True, env=env)


def recorded():
    return recorded_calls(calls)


# Refusals before any training.
for bad, what in ((["--methods", "dense nosuch"], "an unknown method"), (["--optimizers", "momentum"], "momentum on lstm"),
                  (["--rates", "sgd=1,x"], "a rate that is not a number"), (["--model", "cnn"], "an unknown model"),
                  (["--steps", "0"], "zero steps")):
    r = sweep("--methods", "dense", *bad) if bad[0] != "--methods" else sweep(*bad)
    check(r.returncode == 2 and "error" in r.stderr, f"refuses {what} with exit 2 ({r.returncode}: {r.stderr.strip()[:80]})")
check(recorded() == [], "nothing trained by the refused sweeps")

# The LSTM sweep: 2 methods x SGD x 4 rates at 2 ranks.
r = sweep("--methods", "dense a2sgd", "--optimizers", "sgd", "--steps", "50", "--eval-every", "10")
runs = recorded()
check(r.returncode == 0, f"a sweep with a diverged run exits 0 ({r.returncode}: {r.stderr[-300:]})")
check(len(runs) == 8, f"8 runs (2 methods x 4 rates): {len(runs)}")
want = {(m, lr) for m in ("dense", "a2sgd") for lr in ("10", "20", "30", "40")}
check({(option(a, "--compressor"), option(a, "--lr")) for a in runs} == want, "every method at every rate once")
check(all(option(a, "--optimizer") == "sgd" and option(a, "--steps") == "50" and option(a, "--eval-every") == "10"
          and option(a, "--model") == "lstm" for a in runs), "optimizer, steps and evaluation interval as given")
check(all(option(a, "--output-dir") == os.path.join(out, "lstm_p2_sgd", f"{option(a, '--compressor')}_lr{option(a, '--lr')}")
          for a in runs), "each run in OUT/lstm_p2_sgd/<method>_lr<rate>")
best = json.load(open(os.path.join(out, "best.json")))
cell = best.get("lstm_p2_sgd", {})
check(cell.get("dense", {}).get("lr") == 30 and cell["dense"]["edge"] is False,
      f"dense's best rate 30 (perplexity 109), inside the grid: {cell.get('dense')}")
check(cell.get("a2sgd", {}).get("lr") == 10 and cell["a2sgd"]["edge"] is True,
      f"a2sgd's best rate 10 flagged edge (the smallest tried): {cell.get('a2sgd')}")
check(cell.get("a2sgd", {}).get("tried", {}).get("40", "x") is None, "the diverged rate counts as tried, without a score")
report = open(os.path.join(out, "report.md")).read()
check("| a2sgd | **150.0** | 250.0 | 550.0 | div | 10 (edge) |" in report, "the report row of a2sgd (best bold, div, edge)")

# Finished runs are kept; a run that stopped part-way (no summary) is redone.
open(calls, "w").close()
with open(os.path.join(out, "lstm_p2_sgd", "dense_lr20", "metrics.jsonl"), "w") as fh:
    fh.write(json.dumps({"event": "eval", "step": 5, "valid_perplexity_averaged": 1.0}) + "\n")
r = sweep("--methods", "dense a2sgd", "--optimizers", "sgd", "--steps", "50", "--eval-every", "10")
runs = recorded()
check([(option(a, "--compressor"), option(a, "--lr")) for a in runs] == [("dense", "20")],
      f"a rerun redoes only the unfinished run: {[(option(a, '--compressor'), option(a, '--lr')) for a in runs]}")

# A failing run's code is the sweep's, and the rest still runs.
open(calls, "w").close()
r = sweep("--methods", "dense", "--optimizers", "sgd", "--rates", "sgd=555,1", "--steps", "50", "--eval-every", "10",
          "--no-report")
check(r.returncode == 5, f"a run failing with 5 makes the sweep exit 5 ({r.returncode})")
check(len(recorded()) == 2, "the run after the failure still ran")

# The MLP: steps from the epoch (3 epochs of 10), momentum with 0.9, accuracy is higher-better.
open(calls, "w").close()
r = sweep("--model", "mlp", "--ranks", "4", "--methods", "dense", "--optimizers", "momentum",
          "--rates", "momentum=0.05,0.1,0.2")
runs = recorded()
check(r.returncode == 0 and len(runs) == 3, f"3 MLP runs ({r.returncode}, {len(runs)})")
check(all(option(a, "--steps") == "30" and option(a, "--eval-every") == "5" and option(a, "--momentum") == "0.9"
          for a in runs), "MLP horizon 3 epochs, evaluations every half epoch, momentum 0.9")
check("np=4" in open(calls).read(), "the MLP runs on 4 ranks")
best = json.load(open(os.path.join(out, "best.json")))
check(best.get("mlp_p4_momentum", {}).get("dense", {}).get("lr") == 0.1, "the MLP's best is the highest accuracy (0.1)")
finish()
