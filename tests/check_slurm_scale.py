#!/usr/bin/env python3
"""scripts/studies/slurm/scale.sh on a stand-in sbatch: one job per rank count with that many tasks, the
CPU or GPU job script, nodes and GPUs per node from --per-node, the a2sgd-train options passed on
to every job unchanged; bad options refused with exit 2 before anything is submitted; a refused
submission stops the script with sbatch's code and names what was submitted before it.

Usage: check_slurm_scale.py SCRIPTS_DIR WORK_DIR
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scriptcheck import check, executable, finish  # noqa: E402

root, work = os.path.abspath(sys.argv[1]), sys.argv[2]
studies = os.path.join(root, "scripts", "studies")
# python3 -m reports, here and in the drivers these tests start, finds the package at the source root.
os.environ["PYTHONPATH"] = root + os.pathsep + os.environ.get("PYTHONPATH", "")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
calls = os.path.join(work, "calls.txt")
# The stand-in prints "<job id>;cluster" (sbatch --parsable) and fails for a 16-task job when asked.
sbatch = os.path.join(work, "sbatch")
executable(sbatch, f"""#!/bin/sh
echo "$*" >> {calls!r}
n=$(wc -l < {calls!r})
case "$*" in *--ntasks=16*) [ -n "$FAIL16" ] && exit 7 ;; esac
echo "$((100 + n));cluster"
""")
env = dict(os.environ, SBATCH=sbatch)
scale = os.path.join(studies, "slurm", "scale.sh")


def run(*args, **extra):
    if os.path.exists(calls):
        os.remove(calls)
    r = subprocess.run(["bash", scale, *args], capture_output=True, text=True, env=dict(env, **extra))
    lines = open(calls).read().splitlines() if os.path.exists(calls) else []
    return r, lines


for bad in (["--ranks", "8 x"], ["--ranks", " "], ["--per-node", "0"], ["--nosuch"]):
    r, lines = run(*bad)
    check(r.returncode == 2 and "error" in r.stderr and not lines, f"{bad} refused with exit 2 before sbatch")

r, lines = run("--ranks", "8 16 32", "--", "--model", "lstm", "--epochs", "9")
cpu = os.path.join(studies, "slurm", "cpu.sbatch")
check(r.returncode == 0 and len(lines) == 3, f"three jobs submitted ({r.returncode}, {len(lines)})")
for p, line in zip((8, 16, 32), lines):
    check(line == f"--parsable --ntasks={p} --job-name=a2sgd-p{p} {cpu} --model lstm --epochs 9",
          f"{p} ranks: {line}")
check("8 ranks: job 101 (runs/101/)" in r.stdout and "32 ranks: job 103" in r.stdout, f"job ids reported: {r.stdout}")

r, lines = run("--ranks", "2 8", "--gpu", "--time", "02:00:00")
gpu = os.path.join(studies, "slurm", "gpu.sbatch")
check(lines == [f"--parsable --ntasks=2 --job-name=a2sgd-p2 --nodes=1 --ntasks-per-node=2 --gpus-per-node=2 "
                f"--time=02:00:00 {gpu}",
                f"--parsable --ntasks=8 --job-name=a2sgd-p8 --nodes=2 --ntasks-per-node=4 --gpus-per-node=4 "
                f"--time=02:00:00 {gpu}"], f"GPU jobs: 4 per node by default, fewer when the job is smaller: {lines}")

r, lines = run("--ranks", "8 16 32", FAIL16="1")
check(r.returncode == 7 and len(lines) == 2, f"a refused submission stops with sbatch's code 7 ({r.returncode})")
check("refused the 16-rank job" in r.stderr and "8 ranks: job 101" in r.stderr, f"names what was submitted: {r.stderr}")

r, lines = run("--ranks", "8 16", "--dry-run", "--", "--lr", "20")
check(r.returncode == 0 and not lines and r.stdout.count(cpu) == 2 and "--ntasks=16" in r.stdout,
      f"--dry-run prints and submits nothing: {r.stdout}")
finish()
