"""Validation perplexity curves of the runs of scripts/studies/paper_experiment.sh.

For every optimizer and link speed, one PNG next to the metrics, DIR/ppl_<optimizer>_<G>gbps.png:
left, the averaged model's validation perplexity against the training step; right, against the
modelled training time at p ranks (default 32) on that link (steps x the modelled seconds per step
of reports/paper_report.py: measured compute, compression and decode plus the alpha-beta
communication time of the method at p). One line per run; the perplexity axis is logarithmic;
the target of the report, when DIR/report.json exists, is drawn as a dashed line.
"""
import argparse
import json
import math
import os
import sys

from .paper_report import PAPER_FOLDERS, load_runs, modelled_step_seconds
from .plots import pyplot
from .registry import figures


def plot(directory, ranks=32, out=None):
    """Draws DIRECTORY's curves into OUT (default: DIRECTORY); returns the PNGs' paths."""
    plt = pyplot()
    if plt is None:
        sys.exit("plot_metrics: error: matplotlib is not installed")
    groups = {}
    for optimizer, by_method in load_runs(directory).items():
        for method, run in by_method.items():
            points = [(e["step"], e["valid_perplexity_averaged"]) for e in run["evals"]
                      if math.isfinite(e.get("valid_perplexity_averaged", float("nan")))]
            if points and run["summary"]:
                groups.setdefault(optimizer, []).append((method, points, run["summary"]))
    if not groups:
        sys.exit(f"plot_metrics: error: no runs with evaluations and a summary in {directory}")
    targets = {}
    report = os.path.join(directory, "report.json")
    if os.path.exists(report):
        with open(report) as f:
            targets = {k: v["target"] for k, v in json.load(f).items()}

    written = []
    for optimizer, runs in sorted(groups.items()):
        for gbps in (10, 100):
            fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
            for method, points, summary in runs:
                steps = [s for s, _ in points]
                ppl = [v for _, v in points]
                by_step.plot(steps, ppl, marker="o", markersize=3, label=method)
                per_step = modelled_step_seconds(summary, ranks, gbps)
                by_time.plot([s * per_step / 60 for s in steps], ppl, marker="o", markersize=3,
                             label=f"{method} ({1e3 * per_step:.0f} ms/step)")
            for ax in (by_step, by_time):
                ax.set_yscale("log")
                ax.grid(True, which="both", alpha=0.3)
                if optimizer in targets:
                    ax.axhline(targets[optimizer], color="gray", linestyle="--", linewidth=1,
                               label=f"target {targets[optimizer]:.1f}")
            by_step.set_xlabel("training step")
            by_step.set_ylabel("validation perplexity, averaged model (log scale)")
            by_time.set_xlabel(f"modelled training time at p = {ranks}, {gbps} Gb/s (minutes)")
            by_step.legend(fontsize=8)
            by_time.legend(fontsize=8)
            fig.suptitle(f"LSTM on Penn Treebank, {optimizer.upper()}: validation perplexity "
                         f"({runs[0][2]['world_size']} ranks measured; time axis modelled)")
            fig.tight_layout()
            path = os.path.join(out or directory, f"ppl_{optimizer}_{gbps}gbps.png")
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)
    return written


for _folder in PAPER_FOLDERS.values():
    figures(_folder, "plot_metrics.plot", lambda root, out, folder=_folder: plot(os.path.join(root, folder), out=out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="directory of the runs' .jsonl metrics")
    ap.add_argument("--ranks", type=int, default=32, choices=(8, 32, 128), help="p of the modelled time axis")
    ap.add_argument("--out", help="where the PNGs go (default: DIR, next to the metrics)")
    args = ap.parse_args()
    for path in plot(args.dir, args.ranks, args.out):
        print(path)


if __name__ == "__main__":
    main()
