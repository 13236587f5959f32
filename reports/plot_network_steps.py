"""Time per step against the link rate, per method: the timed runs of an emulated cluster, plotted.

Reads DIR/network-<rate>-p<N>/report.json (reports/network_report.py, written by
scripts/studies/compare_methods.sh or scripts/studies/paper_experiment.sh --network) and writes, per node count N
with at least two rates, DIR/step_vs_rate_p<N>[_<optimizer>].png: each method's wall-clock time per
step measured over the network (solid; compute, compression, communication and update, evaluations
excluded) and the alpha-beta model's (dashed; the same run's compute, compression and update plus
NetworkModel's communication on the link fitted in that run), both axes logarithmic. A shaped rate
is plotted at its tc rate; the unshaped one ("none") at the bandwidth fitted to it. Also prints
the plotted values as one markdown table per figure.
"""
import argparse
import glob
import json
import os
import re
import sys

from .network_model_report import rate_figure, rate_gbps
from .plots import require
from .tables import table_head


def load(directory):
    """{(nodes, optimizer): [(gbps, label, {run: row})]} from every timed directory."""
    groups = {}
    for path in glob.glob(os.path.join(directory, "network-*-p*", "report.json")):
        m = re.fullmatch(r"network-(.+)-p(\d+)", os.path.basename(os.path.dirname(path)))
        if not m:
            continue
        label, nodes = m.group(1), int(m.group(2))
        with open(path) as fh:
            report = json.load(fh)
        for optimizer, group in report.items():
            fitted = float(group["link"].split(":")[0]) if group.get("link", "?") != "?" else None
            gbps = rate_gbps(label, fitted)
            if gbps is None:
                print(f"plot_network_steps.py: warning: {path}: no fitted link for '{label}'; skipped",
                      file=sys.stderr)
                continue
            groups.setdefault((nodes, optimizer), []).append((gbps, label, group["runs"]))
    return {k: sorted(v, key=lambda e: e[0]) for k, v in groups.items()}


def methods_of(points):
    """Every method timed at any rate, dense first."""
    return sorted({m for _, _, runs in points for m in runs}, key=lambda m: (m != "dense", m))


def table(nodes, optimizer, points):
    methods = methods_of(points)
    md = [f"### {nodes} nodes{'' if optimizer == 'default' else ', ' + optimizer}: ms per step, measured / modelled",
          "", *table_head(["method", *(label for _, label, _ in points)])]
    for method in methods:
        cells = []
        for _, _, runs in points:
            r = runs.get(method, {})
            meas, mod = r.get("step_s"), r.get("modelled_step_s")
            cells.append("-" if meas is None else f"{1e3 * meas:.1f} / " + ("-" if mod is None else f"{1e3 * mod:.1f}"))
        md.append(f"| {method} | " + " | ".join(cells) + " |")
    return md + [""]


def plot(directory, nodes, optimizer, points, title):
    plt = require("plot_network_steps.py")
    series = []
    for method in methods_of(points):
        meas = [(g, runs[method]["step_s"]) for g, _, runs in points if "step_s" in runs.get(method, {})]
        mod = [(g, runs[method]["modelled_step_s"]) for g, _, runs in points
               if "modelled_step_s" in runs.get(method, {})]
        if meas:
            series.append((method, meas, mod))
    opt = "" if optimizer == "default" else f", {optimizer}"
    name = f"step_vs_rate_p{nodes}{'' if optimizer == 'default' else '_' + optimizer}.png"
    rate_figure(plt, series, "time per step (s)", f"{title}, {nodes} nodes{opt}", os.path.join(directory, name))
    return name


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="directory holding network-<rate>-p<N>/report.json")
    ap.add_argument("--title", default="time per step", help="the figures' title (e.g. the model)")
    ap.add_argument("--no-plot", action="store_true", help="only print the tables")
    args = ap.parse_args()
    groups = load(args.dir)
    if not groups:
        sys.exit(f"plot_network_steps.py: error: no network-<rate>-p<N>/report.json under {args.dir}")
    for (nodes, optimizer), points in sorted(groups.items()):
        print("\n".join(table(nodes, optimizer, points)))
        if args.no_plot or len(points) < 2:
            continue
        try:
            name = plot(args.dir, nodes, optimizer, points, args.title)
        except ImportError:
            print("plot_network_steps.py: matplotlib not found; tables only", file=sys.stderr)
            args.no_plot = True
            continue
        print(f"wrote {os.path.join(args.dir, name)}\n")


if __name__ == "__main__":
    main()
