#!/usr/bin/python3
"""Plots a2sgd-bench --project --csv output: projected time per step against the number of
ranks p, one line per method, one PNG per (gradient size, link).

    mpiexec -n 2 build/benchmarks/bench/a2sgd-bench --project --csv bench.csv
    python3 -m reports bench bench.csv --out plots/

Needs Debian's python3 (/usr/bin/python3) with python3-matplotlib (scripts/deps.sh installs it).

"""
import argparse
import csv
import os
import sys
from collections import defaultdict


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", help="CSV written by a2sgd-bench --project --csv FILE")
    parser.add_argument("--out", default=".", help="directory for the PNG files (default: .)")
    args = parser.parse_args()

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_bench.py: matplotlib is missing (apt-get install python3-matplotlib)")

    series = defaultdict(lambda: defaultdict(list))  # (values, link, alpha) -> method -> [(p, ms)]
    try:
        with open(args.csv, newline="") as f:
            reader = csv.DictReader(f)
            need = {"kind", "method", "values", "ranks", "link_gbps", "alpha_us", "step_s"}
            if not reader.fieldnames or not need.issubset(reader.fieldnames):
                sys.exit(f"plot_bench.py: {args.csv}: not an a2sgd-bench CSV (columns {sorted(need)} expected)")
            for row in reader:
                if row["kind"] != "projected":
                    continue
                key = (int(row["values"]), float(row["link_gbps"]), float(row["alpha_us"]))
                series[key][row["method"]].append((int(row["ranks"]), 1e3 * float(row["step_s"])))
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"plot_bench.py: {args.csv}: {e}")
    if not series:
        sys.exit(f"plot_bench.py: {args.csv} has no projected rows (run a2sgd-bench with --project)")

    os.makedirs(args.out, exist_ok=True)
    for (values, gbps, alpha), methods in sorted(series.items()):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for method, points in methods.items():
            points.sort()
            ax.plot([p for p, _ in points], [t for _, t in points], marker="o", markersize=3, label=method)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("ranks p")
        ax.set_ylabel("projected time per step (ms)")
        ax.set_title(f"n = {values:,} values, {gbps:g} Gb/s, alpha {alpha:g} us")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, ncol=2)
        fig.tight_layout()
        path = os.path.join(args.out, f"bench-n{values}-{gbps:g}gbps.png")
        fig.savefig(path, dpi=120)
        plt.close(fig)
        print(path)


if __name__ == "__main__":
    main()
