#!/usr/bin/env python3
"""scripts/studies/convergence_study.sh and reports/convergence_report.py (docs/convergence.md) on a stand-in
a2sgd-train and made-up metrics:

- the study turns a configuration name into the a2sgd-train options it stands for (every A2SGD
  option stated, the optimizer's rate replaced by a named one), the horizon into steps from the
  steps per epoch a2sgd-train reports, skips runs whose metrics are complete, refuses an unknown
  configuration or optimizer with exit 2 before training, carries on past a diverged run (exit 3)
  and returns the first failing run's code;
- the report's target is dense's final x 1.1, its steps to the target are interpolated on log
  perplexity, a group without dense takes a longer dense run's prefix (--dense), and its bytes per
  step are the whole run's (final average included) or the steps' only (--bytes steps), a group
  that mixes metrics with and without the final average being flagged;
- --checkpoint-every: a stopped run continues from its checkpoint without a record twice, and keeps
  no checkpoint once finished.

Usage: check_convergence_study.py SCRIPTS_DIR WORK_DIR
"""
import json
import math
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
# A stand-in for a2sgd-train: reports 100 steps per epoch for the one-step probe; otherwise records
# its arguments, writes a finished metrics file, and exits 3 (diverged) for --lr 999, 5 for --lr 555.
# Every stand-in's start: the probe's answer, then the call recorded.
STANDIN_HEAD = f"""#!/usr/bin/env python3
import glob, json, os, sys
a = sys.argv[1:]
if a[a.index("--steps") + 1] == "1":
    print("  exchange x, optimizer y, lr 1 (plateau), batch 20 per rank, 1 steps (100 per epoch)")
    sys.exit(0)
with open({calls!r}, "a") as fh:
    fh.write(" ".join(a) + "\\n")
"""
executable(os.path.join(work, "build", "apps", "train", "a2sgd-train"), STANDIN_HEAD + f"""with open(a[a.index("--metrics") + 1], "w") as fh:
    fh.write(json.dumps({{"event": "summary", "steps": int(a[a.index("--steps") + 1])}}) + "\\n")
lr = a[a.index("--lr") + 1]
sys.exit(3 if lr == "999" else 5 if lr == "555" else 0)
""")
# A stand-in for mpirun: records the rank count and runs the program once.
env = standin_launcher(work, calls)


def study(*args):
    return subprocess.run(["bash", os.path.join(studies, "convergence_study.sh"), "--build",
                           os.path.join(work, "build"), "--out", os.path.join(work, "study"), "--no-report", *args],
                          capture_output=True, text=True, env=env)


def recorded():
    return recorded_calls(calls)


out = study("--ranks", "2", "--optimizers", "sgd", "--epochs", "3", "--evals-per-epoch", "2",
            "--configs", "dense a2sgd-layer-k200-hold-global-lr30")
print(out.stderr)
check(out.returncode == 0, f"study: exit 0 (got {out.returncode})")
runs = recorded()
check(len(runs) == 2, f"two runs trained (got {len(runs)})")
check("np=2" in open(calls).read() if os.path.exists(calls) else False, "at 2 ranks")
if len(runs) == 2:
    dense, a2sgd = runs
    check(option(dense, "--compressor") == "dense" and option(dense, "--lr") == "20"
          and option(dense, "--optimizer") == "sgd", f"dense: --compressor dense --optimizer sgd --lr 20 ({dense})")
    check(option(dense, "--steps") == "300" and option(dense, "--eval-every") == "50",
          "3 epochs of 100 steps, 2 evaluations per epoch: --steps 300 --eval-every 50")
    expected = {"--compressor": "a2sgd", "--a2sgd-granularity": "layer", "--a2sgd-average-every": "200",
                "--a2sgd-residual": "global", "--a2sgd-averaging": "mean", "--a2sgd-zero-gradient": "hold",
                "--a2sgd-warmup-steps": "0", "--a2sgd-moments": "local", "--lr": "30"}
    got = {k: option(a2sgd, k) for k in expected}
    check(got == expected, f"a2sgd-layer-k200-hold-global-lr30 -> {expected} (got {got})")
    check(a2sgd.count("--lr") == 1, "the named rate replaces the optimizer's (one --lr)")
    check(option(dense, "--output-dir") == os.path.join(work, "study", "lstm_p2_sgd", "dense")
          and option(dense, "--metrics") == os.path.join(work, "study", "lstm_p2_sgd", "dense.jsonl"),
          f"metrics in <group>/dense.jsonl, the effective config.ini in <group>/dense/ ({dense})")

out = study("--ranks", "2", "--optimizers", "sgd", "--epochs", "3",
            "--configs", "dense a2sgd-layer-k200-hold-global-lr30")
check(out.returncode == 0 and len(recorded()) == 2 and "done before, kept" in out.stderr,
      f"finished runs are kept, not trained again (exit {out.returncode}, {len(recorded())} runs)")

out = study("--ranks", "2", "--optimizers", "sgd", "--epochs", "3", "--configs", "dense-lr40-clip0.5")
runs = recorded()
check(out.returncode == 0 and len(runs) == 3 and option(runs[2], "--lr") == "40" and runs[2].count("--lr") == 1
      and option(runs[2], "--clip") == "0.5" and option(runs[2], "--compressor") == "dense",
      f"dense-lr40-clip0.5: dense at --lr 40 (one --lr) and --clip 0.5 ({runs[-1] if runs else None})")

out = study("--ranks", "2", "--optimizers", "adam", "--epochs", "3", "--configs", "dense-lr0.002-const a2sgd-k200-const")
runs = recorded()
check(out.returncode == 0 and len(runs) == 5
      and all(option(r, "--lr-schedule") == "constant" for r in runs[3:5])
      and option(runs[3], "--compressor") == "dense" and option(runs[4], "--a2sgd-average-every") == "200"
      and all(option(r, "--lr-schedule") is None for r in runs[:3]),
      f"-const: --lr-schedule constant on dense and a2sgd, absent otherwise (exit {out.returncode}: {runs[3:]})")

out = study("--ranks", "2", "--optimizers", "adam", "--epochs", "3", "--configs",
            "dense-lr0.002-lrw200 a2sgd-k200-w5-lrw200")
runs = recorded()
check(out.returncode == 0 and len(runs) == 7
      and all(option(r, "--lr-warmup-steps") == "200" for r in runs[5:7])
      and option(runs[5], "--compressor") == "dense" and option(runs[6], "--a2sgd-warmup-steps") == "5"
      and all(option(r, "--lr-warmup-steps") == "0" for r in runs[:5]),
      f"-lrw200: --lr-warmup-steps 200 on dense and a2sgd, apart from -w (the dense exchange's warm-up); 0 stated "
      f"otherwise, whatever the model's default (exit {out.returncode}: {runs[5:]})")
calls_so_far = len(runs)

for configs, what in (("a2sgd-bogus", "unknown part"), ("a2sgd-k0", "K = 0"), ("topk", "not dense or a2sgd"),
                      ("dense-k100", "an A2SGD part on dense"), ("a2sgd-lrw0", "a warm-up of 0 steps"),
                      ("dense-lrwx", "a warm-up that is no number")):
    out = study("--ranks", "2", "--optimizers", "sgd", "--configs", configs)
    check(out.returncode == 2 and configs in out.stderr and len(recorded()) == calls_so_far,
          f"--configs {configs} ({what}): exit 2 naming it, nothing trained "
          f"(got {out.returncode}: {out.stderr.strip()})")
out = study("--ranks", "2", "--optimizers", "momentum", "--configs", "dense")
check(out.returncode == 2 and "momentum" in out.stderr, f"momentum with the LSTM: exit 2 (got {out.returncode})")

out = study("--model", "mlp", "--ranks", "4", "--optimizers", "adam", "--configs",
            "a2sgd-k100-frozen-w20-lr0.0005 a2sgd-decoded")
runs = recorded()
check(out.returncode == 0 and len(runs) == calls_so_far + 2,
      f"mlp adam: exit 0, two more runs (got {out.returncode}, {len(runs) - calls_so_far})")
if len(runs) == calls_so_far + 2:
    check(option(runs[-1], "--a2sgd-moments") == "decoded" and option(runs[-1], "--a2sgd-average-every") == "0",
          f"a2sgd-decoded: the decoded moment scheme, no averaging: {runs[-1]}")
    r = runs[-2]
    check(option(r, "--model") == "mlp" and option(r, "--optimizer") == "adam" and option(r, "--lr") == "0.0005"
          and option(r, "--a2sgd-moments") == "frozen" and option(r, "--a2sgd-warmup-steps") == "20"
          and option(r, "--a2sgd-granularity") == "model" and option(r, "--steps") == "300",
          f"a2sgd-k100-frozen-w20-lr0.0005 with Adam on the MLP (3 epochs by default): {r}")

# Local SGD, the outer optimizer and seeds (the outer-optimizer study's names).
calls_so_far = len(recorded())
out = study("--model", "mlp", "--ranks", "4", "--optimizers", "momentum", "--configs",
            "local-k50-lr0.02-s2 local-diloco-w10 a2sgd-k100-diloco-olr0.5-lr0.02-s3")
runs = recorded()
check(out.returncode == 0 and len(runs) == calls_so_far + 3,
      f"local and outer configurations: exit 0, three runs (got {out.returncode}, {len(runs) - calls_so_far})")
if len(runs) == calls_so_far + 3:
    k50, diloco, a2 = runs[-3:]
    check(option(k50, "--compressor") == "local" and option(k50, "--average-every") == "50"
          and option(k50, "--lr") == "0.02" and option(k50, "--seed") == "2"
          and option(k50, "--outer-optimizer") == "average" and option(k50, "--local-warmup-steps") == "0",
          f"local-k50-lr0.02-s2: local SGD averaged every 50 steps, seed 2: {k50}")
    check(option(diloco, "--average-every") == "100" and option(diloco, "--outer-optimizer") == "nesterov"
          and option(diloco, "--outer-lr") == "0.7" and option(diloco, "--outer-momentum") == "0.9"
          and option(diloco, "--local-warmup-steps") == "10" and option(diloco, "--seed") is None,
          f"local-diloco-w10: the MLP's period 100, DiLoCo's outer Nesterov, 10 dense steps first: {diloco}")
    check(option(a2, "--compressor") == "a2sgd" and option(a2, "--outer-optimizer") == "nesterov"
          and option(a2, "--outer-lr") == "0.5" and option(a2, "--outer-momentum") == "0.9"
          and option(a2, "--a2sgd-average-every") == "100" and option(a2, "--seed") == "3",
          f"a2sgd-k100-diloco-olr0.5-lr0.02-s3: A2SGD with the outer step at lr 0.5, seed 3: {a2}")
for configs in ("local-mavg", "dense-diloco", "local-s0"):
    out = study("--model", "mlp", "--ranks", "4", "--optimizers", "sgd", "--configs", configs)
    check(out.returncode == 2 and configs in out.stderr, f"--configs {configs}: exit 2 naming it (got {out.returncode})")
calls_so_far = len(recorded())

out = study("--ranks", "2", "--optimizers", "sgd", "--epochs", "1", "--configs", "a2sgd-lr999 a2sgd-lr555 a2sgd-lr1")
check(out.returncode == 5 and len(recorded()) == calls_so_far + 3,
      f"a diverged run (3) does not stop the study, a failed one (5) is its exit code, the rest still run "
      f"(got {out.returncode}, {len(recorded())} runs)")

# The report on made-up metrics: dense ends at 100, target 110, crossed between step 300 (120) and
# 400 (100); a2sgd-new crosses it between 200 (121) and 300 (100).
rep_dir = os.path.join(work, "report")


def metrics(path, perplexities, summary):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    evals = [{"event": "eval", "step": 100 * (i + 1), "valid_perplexity_averaged": p, "valid_perplexity": p * 1.05,
              "replica_divergence": 0.1 * i} for i, p in enumerate(perplexities)]
    s = dict({"event": "summary", "steps": 100 * len(perplexities), "step_time_s": 0.5, "world_size": 2}, **summary)
    with open(path, "w") as fh:
        fh.write("\n".join(json.dumps(r) for r in evals + [s]) + "\n")


group = os.path.join(rep_dir, "lstm_p2_sgd")
metrics(os.path.join(group, "dense.jsonl"), [300, 200, 120, 100], dict(bytes_per_step=1000, total_comm_bytes=400000))
# Newer metrics count the final average (total_comm_bytes); older ones have the steps' bytes only.
metrics(os.path.join(group, "a2sgd-new.jsonl"), [300, 121, 100, 90], dict(bytes_per_step=10, total_comm_bytes=6000))
metrics(os.path.join(group, "a2sgd-old.jsonl"), [300, 150, 130, 115], dict(bytes_per_step=10))
# A group without dense: it takes dense's run above up to its own horizon (200: 200 x 1.1 = 220).
metrics(os.path.join(rep_dir, "lstm_p4_sgd", "a2sgd-short.jsonl"), [250, 210], dict(bytes_per_step=10))


def report(*args):
    return subprocess.run([sys.executable, "-m", "reports", "convergence", rep_dir, "--no-plots",
                           "--dense", "lstm_p4_sgd=" + os.path.join(group, "dense.jsonl"), *args],
                          capture_output=True, text=True)


out = report()
print(out.stdout + out.stderr)
check(out.returncode == 0, f"report: exit 0 (got {out.returncode})")
if out.returncode == 0:
    rep = json.load(open(os.path.join(rep_dir, "report.json")))
    g = rep["lstm_p2_sgd"]
    dense_steps = 300 + 100 * math.log(120 / 110) / math.log(120 / 100)
    new_steps = 200 + 100 * math.log(121 / 110) / math.log(121 / 100)
    check(abs(g["target"] - 110) < 1e-9, f"target dense's final x 1.1 = 110 (got {g['target']})")
    check(abs(g["runs"]["dense"]["steps_to_target"] - dense_steps) < 1e-6
          and abs(g["runs"]["a2sgd-new"]["steps_to_target"] - new_steps) < 1e-6,
          f"steps to target {dense_steps:.3f} and {new_steps:.3f}, log-interpolated "
          f"(got {g['runs']['dense']['steps_to_target']}, {g['runs']['a2sgd-new']['steps_to_target']})")
    check(g["runs"]["a2sgd-old"]["steps_to_target"] is None, "115 at the end: not reached")
    check(abs(g["runs"]["a2sgd-new"]["steps_vs_dense"] - new_steps / dense_steps) < 1e-9, "x dense = the steps' ratio")
    check(g["runs"]["a2sgd-new"]["bytes_per_step"] == 15 and g["runs"]["a2sgd-old"]["bytes_per_step"] == 10,
          f"default: the whole run's bytes, 6000 / 400 = 15, and 10 where the metrics lack the total "
          f"(got {g['runs']['a2sgd-new']['bytes_per_step']}, {g['runs']['a2sgd-old']['bytes_per_step']})")
    check(abs(g["runs"]["a2sgd-new"]["traffic_vs_dense"] - 0.015) < 1e-12, "15 of dense's 1000 bytes: 1.5%")
    check("a2sgd-old" in out.stderr and "final average" in out.stderr
          and "a2sgd-old" in open(os.path.join(rep_dir, "report.md")).read().split("Note:", 1)[-1],
          "the mixed accounting is flagged on stderr and in report.md, naming the older run")
    # The prefix ends at 200 (perplexity 200): target 220, crossed by dense between 100 (300) and 200,
    # by a2sgd-short between 100 (250) and 200 (210).
    short = rep.get("lstm_p4_sgd", {}).get("runs", {})
    want = (100 + 100 * math.log(300 / 220) / math.log(300 / 200),
            100 + 100 * math.log(250 / 220) / math.log(250 / 210))
    got = tuple(short.get(k, {}).get("steps_to_target") or 0 for k in ("dense", "a2sgd-short"))
    check(abs(rep.get("lstm_p4_sgd", {}).get("target", 0) - 220) < 1e-9
          and all(abs(a - b) < 1e-6 for a, b in zip(got, want)) and short["dense"]["steps"] == 200,
          f"--dense: the longer dense run's prefix to step 200 gives the target 220, crossed at "
          f"{want[0]:.3f} and {want[1]:.3f} (got {got})")

out = report("--bytes", "steps")
check(out.returncode == 0 and "warning" not in out.stderr, f"--bytes steps: exit 0, no warning ({out.stderr.strip()})")
if out.returncode == 0:
    g = json.load(open(os.path.join(rep_dir, "report.json")))["lstm_p2_sgd"]
    check(g["runs"]["a2sgd-new"]["bytes_per_step"] == 10, "--bytes steps: the steps' bytes, 10")

# Dense at two rates: the better one (the tuned baseline) sets the target, the other is a row.
group2 = os.path.join(rep_dir, "lstm_p8_sgd")
metrics(os.path.join(group2, "dense.jsonl"), [300, 200, 150], dict(bytes_per_step=1000))
metrics(os.path.join(group2, "dense-lr40.jsonl"), [280, 150, 100], dict(bytes_per_step=1000))
metrics(os.path.join(group2, "a2sgd.jsonl"), [290, 160, 105], dict(bytes_per_step=10))
out = report()
if out.returncode == 0:
    g = json.load(open(os.path.join(rep_dir, "report.json")))["lstm_p8_sgd"]
    check(abs(g["target"] - 110) < 1e-9 and g["runs"]["dense-lr40"]["reference"] and not g["runs"]["dense"]["reference"]
          and g["runs"]["dense"]["steps_to_target"] is None
          and abs(g["runs"]["a2sgd"]["steps_vs_dense"] - g["runs"]["a2sgd"]["steps_to_target"]
                  / g["runs"]["dense-lr40"]["steps_to_target"]) < 1e-12,
          f"dense and dense-lr40: the better (dense-lr40, final 100) sets the target 110 and the x dense ratios "
          f"(got target {g['target']})")
else:
    check(False, f"report with two dense runs: exit 0 (got {out.returncode}: {out.stderr.strip()})")

out = subprocess.run([sys.executable, "-m", "reports", "convergence", rep_dir,
                      "--dense", "lstm_p4_sgd=nope"], capture_output=True, text=True)
check(out.returncode != 0 and "--dense" in out.stderr, f"--dense naming no file: refused ({out.stderr.strip()})")
# --checkpoint-every: a run stopped after its checkpoint at step 100 continues from it; the record it
# had written past the checkpoint (step 150) is dropped first, so none appears twice; the finished
# run keeps no checkpoints and no checkpoint records. A stand-in that stops (exit 75) after writing
# records 50, 100, 150 and a checkpoint at 100 the first time, and continues from the checkpoint.
executable(os.path.join(work, "build", "apps", "train", "a2sgd-train"), STANDIN_HEAD + f"""ckpt = a[a.index("--checkpoint-dir") + 1]
steps = int(a[a.index("--steps") + 1])
found = sorted(glob.glob(os.path.join(ckpt, "ckpt-*.h5")))
start = int(os.path.basename(found[-1])[5:14]) if found else 0
with open(a[a.index("--metrics") + 1], "a") as fh:
    for step in range(start + 50, steps + 1, 50):
        fh.write(json.dumps({{"event": "eval", "step": step}}) + "\\n")
        if step == 100 and not found:
            os.makedirs(ckpt, exist_ok=True)
            open(os.path.join(ckpt, "ckpt-000000100.h5"), "w").close()
            fh.write(json.dumps({{"event": "checkpoint", "step": 100}}) + "\\n")
        if step == 150 and not found:
            sys.exit(75)
    fh.write(json.dumps({{"event": "summary", "steps": steps}}) + "\\n")
""")
resumable = os.path.join(work, "study", "lstm_p2_sgd", "dense-lr7")
os.makedirs(os.path.dirname(resumable), exist_ok=True)
with open(resumable + ".jsonl", "w") as fh:
    fh.write(json.dumps({"event": "eval", "step": 999}) + "\n")  # an earlier try's record, before any checkpoint
before = len(recorded())
out = study("--ranks", "2", "--optimizers", "sgd", "--epochs", "3", "--checkpoint-every", "50", "--configs", "dense-lr7")
runs = recorded()[before:]
check(out.returncode == 75 and len(runs) == 1 and option(runs[0], "--checkpoint-dir") == resumable + "/checkpoints"
      and option(runs[0], "--checkpoint-every") == "50" and option(runs[0], "--resume") == "auto"
      and option(runs[0], "--keep-checkpoints") == "1",
      f"--checkpoint-every 50: the run writes its checkpoints into <run>/checkpoints and resumes from them "
      f"(exit {out.returncode}: {runs})")
steps_written = [json.loads(line).get("step") for line in open(resumable + ".jsonl")]
check(steps_written[:1] == [50], f"a fresh start drops an earlier try's records ({steps_written})")
out = study("--ranks", "2", "--optimizers", "sgd", "--epochs", "3", "--checkpoint-every", "50", "--configs", "dense-lr7")
records = [json.loads(line) for line in open(resumable + ".jsonl")]
evals = [r["step"] for r in records if r["event"] == "eval"]
check(out.returncode == 0 and "continued from step 100" in out.stderr and evals == [50, 100, 150, 200, 250, 300]
      and records[-1]["event"] == "summary",
      f"started again: continued from step 100, every evaluation once (exit {out.returncode}: {evals})")
check(not any(r["event"] == "checkpoint" for r in records) and not os.path.exists(resumable + "/checkpoints"),
      "the finished run keeps neither its checkpoints nor their records")
out = study("--ranks", "2", "--optimizers", "sgd", "--checkpoint-every", "x", "--configs", "dense")
check(out.returncode == 2 and "--checkpoint-every" in out.stderr, f"--checkpoint-every x: exit 2 ({out.stderr.strip()})")
finish()
