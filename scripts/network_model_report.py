#!/usr/bin/env python3
"""The alpha-beta model against the emulated network: tables and plots of scripts/network_study.sh.

Reads DIR/netbench_p<N>_<rate>[_links<K>][_put][_ring].csv (a2sgd-netbench --csv; _put: Open MPI's
RDMA-put protocol, a2sgd-cluster run --tcp-protocol put; _ring: all-reduce and all-gather forced to the
ring, a2sgd-cluster run --collectives ring) and writes DIR/model_report.md, DIR/model_report.json and,
with matplotlib, DIR/comm_vs_rate_p<N>[_ring].png (one connection, protocol send). Per file: the link fitted
to the ping-pong (alpha, bandwidth, duplex from the simultaneous exchange); every all-reduce,
all-gather and method row's measured median time against NetworkModel's prediction on that link,
and the relative error (predicted / measured - 1); the largest error for messages of 64 kB and
more (the model's target: within 25%) and, separately, for the latency-bound smaller ones.

With --timing DIR (runs of a2sgd-train across the same network, scripts/cluster/timing.sh: their
compute, compression and update times per step), the plots show time per step (those plus each
method's measured communication) instead of communication alone.
"""
import argparse
import csv
import glob
import json
import math
import os
import re
import sys

LARGE = 64 << 10


def load(path):
    rows = list(csv.DictReader(open(path)))
    for r in rows:
        for k in ("bytes", "repeats", "ranks"):
            r[k] = int(r[k])
        for k in ("median_s", "min_s", "predicted_s", "alpha_s", "bytes_per_s"):
            r[k] = float(r[k])
        r["full_duplex"] = r.get("full_duplex", "1") in ("1", "true")
    return rows


def rate_gbps(label, fitted):
    m = re.fullmatch(r"([\d.]+)([kmg]?)bit", label)
    if not m:
        return fitted  # unshaped: the fitted bandwidth is the link
    return float(m.group(1)) * {"k": 1e-6, "m": 1e-3, "g": 1.0, "": 1e-9}[m.group(2)]


def error(r):
    return r["predicted_s"] / r["median_s"] - 1 if r["predicted_s"] > 0 and r["median_s"] > 0 else None


def other_seconds(timing):
    """compute + compression + update seconds per step, per method, from timed runs."""
    out = {}
    for path in glob.glob(os.path.join(timing, "*.jsonl")):
        method = os.path.basename(path)[:-6].rsplit("_", 1)[0]
        for line in open(path):
            rec = json.loads(line)
            if rec.get("event") == "summary":
                out.setdefault(method, rec["compute_s_per_step"] + rec["compress_s_per_step"] +
                               rec["optimizer_s_per_step"])
    return out


def rate_figure(plt, series, ylabel, title, path):
    """One log-log figure of time against link rate: per method, measured (solid, points) and
    modelled (dashed, same colour). series: [(method, [(gbps, measured_s)], [(gbps, modelled_s)])]."""
    fig, ax = plt.subplots(figsize=(8, 5))
    for method, measured, modelled in series:
        line, = ax.plot(*zip(*measured), marker="o", label=method)
        if modelled:
            ax.plot(*zip(*modelled), linestyle="--", color=line.get_color(), alpha=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("link rate per node (Gbit/s; the unshaped point at its fitted bandwidth)")
    ax.set_ylabel(ylabel)
    ax.set_title(title + ": measured (solid), alpha-beta model (dashed)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot(directory, results, other):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made = []
    for nodes, collectives in sorted({(r["nodes"], r["collectives"]) for r in results}):
        runs = sorted((r for r in results if r["nodes"] == nodes and r["collectives"] == collectives and
                       r["links"] == 1 and r["protocol"] == "send"), key=lambda r: r["gbps"])
        if len(runs) < 2:
            continue
        series = []
        for method in runs[0]["methods"]:
            base = other.get(method, 0.0)
            series.append((method, [(r["gbps"], base + r["methods"][method]["measured_s"]) for r in runs],
                           [(r["gbps"], base + r["methods"][method]["predicted_s"]) for r in runs]))
        ring = collectives == "ring"
        name = f"comm_vs_rate_p{nodes}{'_ring' if ring else ''}.png"
        rate_figure(plt, series, ("time per step" if other else "communication time per step") + " (s)",
                    f"LSTM language model, {nodes} nodes{', ring collectives' if ring else ''}",
                    os.path.join(directory, name))
        made.append(name)
    return made


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--timing", help="a directory of timed training runs (compute and update times per step)")
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(args.dir, "netbench_p*.csv")))
    if not files:
        sys.exit(f"network_model_report.py: error: no netbench_p*.csv in {args.dir}")
    other = other_seconds(args.timing) if args.timing else {}
    md = ["# The alpha-beta model against the emulated network", ""]
    results = []
    for path in files:
        tag = os.path.basename(path)[len("netbench_"):-4]
        rows = load(path)
        if not rows:
            continue
        m = re.fullmatch(r"p(\d+)_(.+?)(?:_links(\d+))?(_put)?(_ring)?", tag)
        nodes, label, links = int(m.group(1)), m.group(2), int(m.group(3) or 1)
        protocol = "put" if m.group(4) else "send"
        collectives = "ring" if m.group(5) else "openmpi"
        first = rows[0]
        gbps = first["bytes_per_s"] * 8 / 1e9
        res = dict(tag=tag, nodes=nodes, rate=label, links=links, protocol=protocol, collectives=collectives,
                   gbps=rate_gbps(label, gbps),
                   alpha_us=first["alpha_s"] * 1e6, fitted_gbps=gbps, full_duplex=first["full_duplex"],
                   rows=[], methods={})
        for r in rows:
            e = error(r)
            entry = dict(op=r["op"], bytes=r["bytes"], measured_s=r["median_s"], predicted_s=r["predicted_s"],
                         error=e, repeats=r["repeats"])
            res["rows"].append(entry)
            if r["op"].startswith("method:"):
                res["methods"][r["op"][7:]] = entry
        coll = [x for x in res["rows"] if x["op"] in ("allreduce", "allgather", "sendrecv") and x["error"] is not None]
        big = [abs(x["error"]) for x in coll if x["bytes"] >= LARGE]
        small = [abs(x["error"]) for x in coll if x["bytes"] < LARGE]
        meth_big = [abs(x["error"]) for x in res["methods"].values() if x["error"] is not None and x["bytes"] >= LARGE]
        res.update(max_error_large=max(big) if big else None, max_error_small=max(small) if small else None,
                   max_error_methods_large=max(meth_big) if meth_big else None)
        results.append(res)

        algorithms = "ring collectives" if collectives == "ring" else "Open MPI's collectives"
        md += [f"## {nodes} nodes, {label}, {links} TCP connection(s) per pair, protocol {protocol}, {algorithms}", "",
               f"Fitted to the ping-pong: alpha {res['alpha_us']:.1f} us, bandwidth {gbps:.3f} Gbit/s "
               f"({first['bytes_per_s'] / 1e6:.1f} MB/s), {'full' if res['full_duplex'] else 'half'} duplex "
               f"(simultaneous exchange against the ping-pong). Largest model error: "
               f"{fmt_pct(res['max_error_large'])} for collectives of 64 kB and more, "
               f"{fmt_pct(res['max_error_small'])} below; {fmt_pct(res['max_error_methods_large'])} for the "
               f"methods' steps of 64 kB and more.", "",
               "| operation | bytes per rank | measured ms | modelled ms | error |", "|---|---|---|---|---|"]
        for x in res["rows"]:
            if x["op"] == "pingpong":
                continue
            md.append(f"| {x['op']} | {x['bytes']:,} | {1e3 * x['measured_s']:.3f} | "
                      f"{'-' if x['predicted_s'] < 0 else format(1e3 * x['predicted_s'], '.3f')} | {fmt_pct(x['error'])} |")
        md.append("")
    made = plot(args.dir, results, other)
    md += [f"![{m}]({m})" for m in made]
    with open(os.path.join(args.dir, "model_report.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(args.dir, "model_report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


def fmt_pct(v):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:+.0f}%"


if __name__ == "__main__":
    main()
