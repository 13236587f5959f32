#!/usr/bin/env python3
"""Tabulates a2sgd runs (e.g. a Slurm array sweep): one row per run directory.

    collect.py RUNS_DIR [--csv FILE] [--plot FILE] [--x lr] [--y test_accuracy_averaged]

Reads <run>/metrics.jsonl in every subdirectory of RUNS_DIR (the layout scripts/studies/slurm/*.sbatch
write). A run's row comes from its summary record when it finished; otherwise its status says how
far it got (stopped: checkpointed and waiting to be requeued; diverged; running: no final record
yet). The table goes to standard output as Markdown; --csv writes the same rows, --plot draws the
metric --y against --x with one line per exchange method (matplotlib).
Exit code: 0, or 2 when RUNS_DIR holds no run.
"""
import argparse
import csv
import json
import os
import sys

COLUMNS = ["run", "status", "compressor", "optimizer", "lr", "world_size", "steps", "restarts",
           "test_accuracy", "test_accuracy_averaged", "step_time_s", "bytes_per_step", "reduction_factor"]


def read_run(path):
    records = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                print(f"collect.py: {path}:{number}: not a JSON record ({e}); skipped", file=sys.stderr)
    row = {"restarts": sum(1 for r in records if r.get("event") == "resume")}
    summary = next((r for r in reversed(records) if r.get("event") == "summary"), None)
    last = records[-1] if records else {}
    if summary:
        row.update({k: summary.get(k) for k in COLUMNS if k in summary})
        row["status"] = "finished"
    else:
        row["status"] = {"stopped": "stopped", "diverged": "diverged"}.get(last.get("event"), "running")
        row["steps"] = max((r.get("step", 0) for r in records), default=0)
        evals = [r for r in records if r.get("event") == "eval"]
        if evals:
            row["test_accuracy"] = evals[-1].get("test_accuracy")
            row["test_accuracy_averaged"] = evals[-1].get("test_accuracy_averaged")
    # The options of runs without a summary come from the config.ini a2sgd-train writes.
    ini = os.path.join(os.path.dirname(path), "config.ini")
    if os.path.exists(ini):
        with open(ini) as f:
            for line in f:
                key, _, value = line.partition("=")
                key, value = key.strip(), value.strip()
                if key in ("compressor", "optimizer", "lr") and row.get(key) is None:
                    row[key] = float(value) if key == "lr" else value
    return row


def fmt(value):
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs")
    parser.add_argument("--csv")
    parser.add_argument("--plot")
    parser.add_argument("--x", default="lr")
    parser.add_argument("--y", default="test_accuracy_averaged")
    args = parser.parse_args()
    rows = []
    for name in sorted(os.listdir(args.runs)) if os.path.isdir(args.runs) else []:
        metrics = os.path.join(args.runs, name, "metrics.jsonl")
        if os.path.isfile(metrics):
            row = read_run(metrics)
            row["run"] = name
            rows.append(row)
    if not rows:
        print(f"collect.py: no run directory with a metrics.jsonl in {args.runs}", file=sys.stderr)
        return 2
    rows.sort(key=lambda r: (str(r.get("compressor")), r.get("lr") or 0, r["run"]))
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(fmt(row.get(c)) for c in COLUMNS) + " |")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for method in sorted({str(r.get("compressor")) for r in rows}):
            points = sorted((r.get(args.x), r.get(args.y)) for r in rows
                            if str(r.get("compressor")) == method and r.get(args.x) is not None
                            and r.get(args.y) is not None)
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=method)
        ax.set_xlabel(args.x)
        ax.set_ylabel(args.y)
        if args.x == "lr":
            ax.set_xscale("log")
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
