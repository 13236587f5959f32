#!/usr/bin/env python3
"""reports/network_report.py on made-up runs: the time to the target is the full run's steps to it
(interpolated on log perplexity) times the step time measured over the network, the ratios follow
from those times, and a full run at another rank count than its timed run is refused with exit 1
and a message naming both counts (its steps to a target would not apply); a stated target written
with --report NAME goes to NAME.json and leaves the default report alone.

Usage: check_network_report.py SCRIPTS_DIR WORK_DIR
"""
import json
import math
import os
import re
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


def write(path, records):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write("\n".join(json.dumps(r) for r in records) + "\n")


def full_run(path, perplexities, ranks):
    """Evaluations every 100 steps with these averaged validation perplexities."""
    evals = [{"event": "eval", "step": 100 * (i + 1), "valid_perplexity_averaged": p} for i, p in enumerate(perplexities)]
    write(path, evals + [{"event": "summary", "model": "lstm", "world_size": ranks}])


def timed_run(path, step_s, comm_s, ranks):
    write(path, [{"event": "summary", "model": "lstm", "world_size": ranks, "step_time_s": step_s,
                  "compute_s_per_step": step_s - comm_s, "compress_s_per_step": 0.0, "optimizer_s_per_step": 0.0,
                  "comm_s_per_step": comm_s, "bytes_per_step": 1000, "modelled_comm_s_per_step": comm_s / 2}])


def report(full, net):
    return subprocess.run([sys.executable, "-m", "reports", "network", full, net],
                          capture_output=True, text=True)


# Dense ends at 100 -> target 110, crossed exactly at step 300; A2SGD crosses 110 between its
# evaluations at 200 (121) and 300 (100): log-interpolated at 200 + 100 ln(121/110) / ln(121/100) = 250.
full, net = os.path.join(work, "full"), os.path.join(work, "net")
full_run(os.path.join(full, "dense_sgd.jsonl"), [300, 200, 110, 100], 4)
full_run(os.path.join(full, "a2sgd_sgd.jsonl"), [300, 121, 100, 90], 4)
timed_run(os.path.join(net, "dense_sgd.jsonl"), 2.0, 1.5, 4)
timed_run(os.path.join(net, "a2sgd_sgd.jsonl"), 0.5, 0.01, 4)
out = report(full, net)
print(out.stdout + out.stderr)
check(out.returncode == 0, f"matching rank counts: exit 0 (got {out.returncode})")
if out.returncode == 0:
    rep = json.load(open(os.path.join(net, "report.json")))["sgd"]
    dense, a2sgd = rep["runs"]["dense"], rep["runs"]["a2sgd"]
    check(abs(rep["target"] - 110.0) < 1e-9, f"target dense's final x 1.1 = 110 (got {rep['target']})")
    check(abs(dense["steps_to_target"] - 300) < 1e-6 and abs(a2sgd["steps_to_target"] - 250) < 1e-6,
          f"steps to the target 300 and 250 (got {dense['steps_to_target']}, {a2sgd['steps_to_target']})")
    check(abs(dense["measured_s"] - 600) < 1e-6 and abs(a2sgd["measured_s"] - 125) < 1e-6,
          f"time to the target = steps x measured step: 600 s and 125 s (got {dense['measured_s']}, {a2sgd['measured_s']})")
    ratio = rep["ratios"]["a2sgd:dense"]["measured_s"]
    check(abs(ratio - 4.8) < 1e-9, f"A2SGD : dense = 600 / 125 = 4.8x (got {ratio})")
    # modelled: (compute + modelled comm) x steps: dense (0.5 + 0.75) x 300, A2SGD (0.49 + 0.005) x 250
    modelled = rep["ratios"]["a2sgd:dense"]["modelled_s"]
    check(abs(modelled - 375 / 123.75) < 1e-9, f"modelled ratio 375 / 123.75 (got {modelled})")

# A stated target written under another name: 121 is crossed by dense between 200 (200) and 300 (110),
# at 200 + 100 ln(200/121) / ln(200/110), and by A2SGD at its evaluation at step 200; the default
# report written above stays as it was.
if out.returncode == 0:
    before = open(os.path.join(net, "report.json")).read()
    stated = subprocess.run([sys.executable, "-m", "reports", "network", full, net,
                             "--target", "sgd=121", "--report", "stated"], capture_output=True, text=True)
    check(stated.returncode == 0,
          f"--target sgd=121 --report stated: exit 0 (got {stated.returncode}: {stated.stderr.strip()})")
    if stated.returncode == 0:
        rep = json.load(open(os.path.join(net, "stated.json")))["sgd"]
        expected = 200 + 100 * math.log(200 / 121) / math.log(200 / 110)
        check(rep["target"] == 121.0 and abs(rep["runs"]["dense"]["steps_to_target"] - expected) < 1e-6
              and abs(rep["runs"]["a2sgd"]["steps_to_target"] - 200) < 1e-6,
              f"stated target 121: steps {expected:.3f} and 200 (got {rep['target']}, "
              f"{rep['runs']['dense']['steps_to_target']}, {rep['runs']['a2sgd']['steps_to_target']})")
        check(os.path.exists(os.path.join(net, "stated.md")), "stated.md written")
    check(open(os.path.join(net, "report.json")).read() == before, "report.json left as it was")
    bad = subprocess.run([sys.executable, "-m", "reports", "network", full, net,
                          "--report", "../escape"], capture_output=True, text=True)
    check(bad.returncode != 0 and "--report" in bad.stderr and not os.path.exists(os.path.join(work, "escape.json")),
          f"--report with a path is refused (got {bad.returncode}: {bad.stderr.strip()})")

# the network-lstm-p2 block (network_report) from the same runs laid out as the results tree holds them:
# the time to the target and the ratio as the report has them, headings turned into bold lines.
sys.path.insert(0, root)
from reports import network_report as net_blocks  # noqa: E402
from reports.registry import GENERATORS  # noqa: E402
tree = os.path.join(work, "tree")
full_p2, net_p2 = net_blocks.NETWORK_BLOCKS["network-lstm-p2"]
for name in ("dense_sgd", "a2sgd_sgd"):
    for src, dst in ((full, full_p2), (net, net_p2)):
        os.makedirs(os.path.join(tree, dst), exist_ok=True)
        shutil.copy(os.path.join(src, name + ".jsonl"), os.path.join(tree, dst, name + ".jsonl"))
block = "\n".join(GENERATORS["network-lstm-p2"][0](tree))
print(block)
check(re.search(r"\*\*sgd: target validation perplexity 110 \(dense's final after its [0-9,]+ steps x 1\.1\)\*\*", block) is not None and "## " not in block,
      "the block's heading is a bold line with the target")
check("| a2sgd_sgd | 250 | 500.0 (10.0) |" in block and "| 125 s |" in block and "| 600 s |" in block,
      "the block has A2SGD's 250 steps, 0.5 s step and 125 s to the target, dense's 600 s")
check("| a2sgd : dense | 4.80x |" in block, "and the ratio 600 / 125 = 4.80x")
check(block.rstrip().endswith(f"from `{net_p2}/` (`python3 -m reports network {full_p2} {net_p2}`: steps to the "
                              "target from the full runs x the step timed over the network)._"),
      "the block ends with its source line naming the timed runs' folder")

# --full-run: full runs named as another study names them (convergence_study.sh's configurations,
# one folder per optimizer), stated per timed run relative to FULL; a timed run without one is
# tabulated as "no full run"; a stated run that is not there, or a name nobody timed, is refused.
study = os.path.join(work, "study")
full_run(os.path.join(study, "p4_sgd", "dense-lr40.jsonl"), [300, 200, 110, 100], 4)
full_run(os.path.join(study, "p4_sgd", "a2sgd-layer-k200", "metrics.jsonl"), [300, 121, 100, 90], 4)
# PowerSGD's full run lies outside FULL (as the paper experiment's runs lie next to the convergence
# study's): crosses 110 at step 300, x its 0.4-s step = 120 s, so A2SGD (125 s) is 0.96x as fast.
full_run(os.path.join(work, "paper", "powersgd_sgd.jsonl"), [300, 200, 110, 100], 4)
net3 = os.path.join(work, "net3")
for name, step_s, comm_s in (("dense_sgd", 2.0, 1.5), ("a2sgd_sgd", 0.5, 0.01), ("qsgd_sgd", 1.0, 0.5),
                             ("powersgd_sgd", 0.4, 0.02)):
    timed_run(os.path.join(net3, name + ".jsonl"), step_s, comm_s, 4)
mapping = ["--full-run", "dense_sgd=p4_sgd/dense-lr40.jsonl", "--full-run", "a2sgd_sgd=p4_sgd/a2sgd-layer-k200",
           "--full-run", "powersgd_sgd=../paper/powersgd_sgd.jsonl"]
out = subprocess.run([sys.executable, "-m", "reports", "network", study, net3] + mapping,
                     capture_output=True, text=True)
check(out.returncode == 0, f"--full-run: exit 0 (got {out.returncode}: {out.stderr.strip()})")
if out.returncode == 0:
    rep = json.load(open(os.path.join(net3, "report.json")))["sgd"]
    check(abs(rep["target"] - 110.0) < 1e-9 and abs(rep["runs"]["a2sgd"]["steps_to_target"] - 250) < 1e-6
          and abs(rep["runs"]["a2sgd"]["measured_s"] - 125) < 1e-6,
          f"--full-run: target 110 from the mapped dense run, A2SGD 250 steps and 125 s (got {rep['target']}, "
          f"{rep['runs']['a2sgd'].get('steps_to_target')}, {rep['runs']['a2sgd'].get('measured_s')})")
    check(not rep["runs"]["qsgd"]["full_run"] and rep["runs"]["qsgd"]["steps_to_target"] is None
          and "| qsgd_sgd | no full run |" in open(os.path.join(net3, "report.md")).read(),
          "a timed run without a full run: 'no full run', no time to the target")
    check(rep["ratios"]["a2sgd:qsgd"]["no_full_run"] == ["qsgd"] and rep["ratios"]["a2sgd:qsgd"]["unreached"] == []
          and "| a2sgd : qsgd | no full run of qsgd |" in open(os.path.join(net3, "report.md")).read(),
          "and its ratio says 'no full run of qsgd', not that qsgd missed the target")
    power = rep["runs"]["powersgd"]
    check(power["full_run"] and abs(power["steps_to_target"] - 300) < 1e-6 and abs(power["measured_s"] - 120) < 1e-6
          and abs(rep["ratios"]["a2sgd:powersgd"]["measured_s"] - 0.96) < 1e-9
          and "| a2sgd : powersgd | 0.96x |" in open(os.path.join(net3, "report.md")).read(),
          f"PowerSGD's full run outside FULL: 300 steps, 120 s, A2SGD : PowerSGD 120 / 125 = 0.96x (got "
          f"{power.get('steps_to_target')}, {power.get('measured_s')}, {rep['ratios'].get('a2sgd:powersgd')})")
for extra, expect in ((["--full-run", "qsgd_sgd=p4_sgd/qsgd-lr30.jsonl"], "no such run"),
                      (["--full-run", "topk_sgd=p4_sgd/dense-lr40.jsonl"], "has not timed: topk_sgd"),
                      (["--full-run", "dense_sgd"], "RUN=PATH expected")):
    bad = subprocess.run([sys.executable, "-m", "reports", "network", study, net3] + extra,
                         capture_output=True, text=True)
    check(bad.returncode == 1 and expect in bad.stderr,
          f"{' '.join(extra)}: exit 1 saying '{expect}' (got {bad.returncode}: {bad.stderr.strip()})")

# A full run at 2 ranks next to a timed run at 4: refused, nothing written.
bad_net = os.path.join(work, "net_bad")
full_run(os.path.join(work, "full2", "dense_sgd.jsonl"), [300, 200, 110, 100], 2)
timed_run(os.path.join(bad_net, "dense_sgd.jsonl"), 2.0, 1.5, 4)
out = report(os.path.join(work, "full2"), bad_net)
check(out.returncode == 1 and "2 ranks" in out.stderr and "timed run 4" in out.stderr,
      f"full run at 2 ranks, timed at 4: exit 1 naming both (got {out.returncode}: {out.stderr.strip()})")
check(not os.path.exists(os.path.join(bad_net, "report.json")), "and no report written")
finish()
