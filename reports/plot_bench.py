"""a2sgd-bench's results: the plots of its --project --csv output (projected time per step against
the number of ranks p, one line per method, one PNG per (gradient size, link)), and the docs'
kernel table from benchmarks/kernel_bench.sh's runs.

    mpiexec -n 2 build/benchmarks/bench/a2sgd-bench --project --csv bench.csv
    python3 -m reports bench bench.csv --out plots/

Needs Debian's python3 (/usr/bin/python3) with python3-matplotlib (scripts/deps.sh installs it).

"""
import argparse
import csv
import glob
import json
import os
import statistics
import sys
from collections import defaultdict

from .plots import pyplot
from .registry import current_paths, generator, source_line
from .tables import table_head


# ---- the docs' blocks of the kernel benchmark (docs/benchmarks.md; benchmarks/kernel_bench.sh's runs) ----
KERNELS = "docs/results/bench/kernels-16m"        # 2 ranks: two cores share the memory bus
KERNELS_P1 = "docs/results/bench/kernels-16m-p1"  # 1 rank: one core has the bus alone
KERNEL_METHODS = ["dense", "a2sgd", "topk", "randomk", "qsgd", "efsign", "powersgd", "fp16", "bf16"]


def kernel_table(root, results):
    """The kernel table of one kernel_bench.sh folder: medians of its runs per method, with each
    phase's percentage of its ceilings as median (lowest-highest)."""
    folder = os.path.join(root, results)
    with open(os.path.join(folder, "meta.json")) as f:
        meta = json.load(f)
    runs = []
    for path in sorted(glob.glob(os.path.join(folder, "run*.csv"))):
        with open(path) as f:
            runs.append(list(csv.DictReader(f)))
    if len(runs) != meta["runs"]:
        raise ValueError(f"{results}: {len(runs)} run files, meta.json says {meta['runs']}")

    def rows(kind, method):
        out = []
        for run in runs:
            r = [x for x in run if x["kind"] == kind and x["method"] == method]
            if len(r) != 1:
                raise ValueError(f"{results}: a run without exactly one '{kind},{method}' row")
            out.append(r[0])
        return out

    def med(rs, key, scale=1.0):
        return statistics.median([float(r[key]) * scale for r in rs])

    def percent(rs, key):
        values = [100 * float(r[key]) for r in rs]
        return f"{statistics.median(values):.0f}% ({min(values):.0f}-{max(values):.0f})"

    first = rows("measured", "dense")
    lines = [*table_head(["method", "compress ms", "comm ms", "decode + apply ms", "bytes per rank",
                          "compress, % of ceiling (range)", "apply, % of ceiling (range)"])]
    for m in KERNEL_METHODS:
        rs = rows("measured", m)
        comp = med(rs, "compress_s", 1e3)
        cpct = "-" if all(float(r["compress_bytes_touched"]) == 0 for r in rs) else percent(rs, "compress_of_ceiling")
        lines.append(f"| {m} | {comp:.3f} | {med(rs, 'comm_s', 1e3):.3f} | {med(rs, 'apply_s', 1e3):.3f} "
                     f"| {int(float(rs[0]['bytes_per_rank'])):,} | {cpct} | {percent(rs, 'apply_of_ceiling')} |")
    ceilings = ", ".join(f"{name} {med(first, key):.1f}" for name, key in
                         [("read", "read_gbs"), ("copy", "copy_gbs"), ("triad", "triad_gbs"), ("axpy", "axpy_gbs"),
                          ("read-modify-write", "rmw_gbs")])
    nth = rows("reference", "nth_element")
    topk = rows("measured", "topk")
    ranks = meta["ranks"]
    lines += ["", f"Medians of {len(runs)} runs ({ranks} rank{'s' if ranks != 1 else ''}, "
              f"{int(float(first[0]['values'])):,} values, each run's figures the medians of its timed steps, the "
              f"slower rank's; in brackets the lowest and highest run). Ceilings in GB/s, write-allocate counted "
              f"(medians): {ceilings}. QSGD's arithmetic in L1 (medians): its whole pack "
              f"{med(first, 'packing_gvs'):.2f} G values/s (the rounding alone {med(first, 'rounding_gvs'):.2f}), "
              f"its decode's unpacking {med(first, 'unpacking_gfs'):.2f} G fields/s. Top-K's selection took {med(topk, 'compress_s', 1e3):.1f} ms against "
              f"{med(nth, 'step_s', 1e3):.1f} ms for `std::nth_element` of the same magnitudes. CPU: {meta['cpu']}, "
              f"{meta['cores']} cores; commit {meta['commit']}.", "",
              source_line(results, f"`{current_paths(meta['command'])}`; every run's CSV and report are there")]
    return lines


@generator("bench-kernels", KERNELS)
def bench_kernels(root):
    return kernel_table(root, KERNELS)


@generator("bench-kernels-p1", KERNELS_P1)
def bench_kernels_p1(root):
    return kernel_table(root, KERNELS_P1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", help="CSV written by a2sgd-bench --project --csv FILE")
    parser.add_argument("--out", default=".", help="directory for the PNG files (default: .)")
    args = parser.parse_args()

    plt = pyplot()
    if plt is None:
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
