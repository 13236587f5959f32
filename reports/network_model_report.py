"""The alpha-beta model against the emulated network: tables and plots of scripts/studies/network_study.sh.

Reads DIR/netbench_p<N>_<rate>[_links<K>][_put][_ring].csv (a2sgd-netbench --csv; _put: Open MPI's
RDMA-put protocol, a2sgd-cluster run --tcp-protocol put; _ring: all-reduce and all-gather forced to the
ring, a2sgd-cluster run --collectives ring), next to each its .losses (a2sgd-cluster losses after the
run) and its _allreduce-alg<A>.csv (network_study.sh --allreduce-algorithms), and writes
DIR/model_report.md, DIR/model_report.json and, with matplotlib, DIR/comm_vs_rate_p<N>[_ring].png (one
connection, protocol send). Per file: the link fitted to the ping-pong (alpha, bandwidth, duplex from
the simultaneous exchange); every all-reduce, all-gather and method row's measured median time
against NetworkModel's prediction on that link, and the relative error (predicted / measured - 1);
the largest error for messages of 64 kB and more (the model's target: within 25%) and, separately,
for the latency-bound smaller ones. Then a summary (one row per file: docs/network.md's table) and,
per node count, the collective algorithms side by side (Open MPI's choice, the ring, each forced
all-reduce algorithm). reports/docs_blocks.py draws docs/network.md's blocks from the same functions.

With --timing DIR (runs of a2sgd-train across the same network, scripts/studies/cluster/timing.sh: their
compute, compression and update times per step), the plots show time per step (those plus each
method's measured communication) instead of communication alone.
"""
import argparse
import csv
import glob
import math
import os
import re
import statistics

from .plots import pyplot
from .registry import figures, generator, source_line
from .runs import records
from .tables import table_head, write_report

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
        for rec in records(path, "summary"):
            out.setdefault(method, rec["compute_s_per_step"] + rec["compress_s_per_step"] + rec["optimizer_s_per_step"])
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
    plt = pyplot()
    if plt is None:
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


TAG = re.compile(r"p(\d+)_(.+?)(?:_links(\d+))?(_put)?(_ring)?")
ALGORITHM_FILE = re.compile(r"netbench_(.+)_allreduce-alg(\d)\.csv")
# coll_tuned_allreduce_algorithm's numbers (Open MPI 4.1's coll/tuned)
ALLREDUCE_ALGORITHMS = {1: "basic linear", 2: "reduce then broadcast", 3: "recursive doubling", 4: "ring",
                        5: "segmented ring", 6: "Rabenseifner"}


def load_losses(path):
    """a2sgd-cluster losses' lines (node up_dropped down_dropped retrans_segs rto_timeouts), summed
    over the nodes: {dropped, retransmitted, timeouts}, or None without the file."""
    if not os.path.exists(path):
        return None
    total = dict(dropped=0, retransmitted=0, timeouts=0)
    for line in open(path):
        f = line.split()
        if len(f) != 5 or not all(x.isdigit() for x in f):
            raise SystemExit(f"network_model_report.py: error: {path}: not a2sgd-cluster losses output: {line!r}")
        total["dropped"] += int(f[1]) + int(f[2])
        total["retransmitted"] += int(f[3])
        total["timeouts"] += int(f[4])
    return total


def load_results(directory):
    """One entry per netbench_<tag>.csv of scripts/studies/network_study.sh: the link fit, every row against
    the model, the largest errors, the loss counters and the forced all-reduce algorithms' times."""
    files = sorted(f for f in glob.glob(os.path.join(directory, "netbench_p*.csv"))
                   if not ALGORITHM_FILE.fullmatch(os.path.basename(f)))
    if not files:
        raise SystemExit(f"network_model_report.py: error: no netbench_p*.csv in {directory}")
    results = []
    for path in files:
        tag = os.path.basename(path)[len("netbench_"):-4]
        m = TAG.fullmatch(tag)
        if not m:
            raise SystemExit(f"network_model_report.py: error: {path}: not a network_study.sh file name")
        rows = load(path)
        if not rows:
            continue
        nodes, label, links = int(m.group(1)), m.group(2), int(m.group(3) or 1)
        first = rows[0]
        gbps = first["bytes_per_s"] * 8 / 1e9
        res = dict(tag=tag, nodes=nodes, rate=label, links=links, protocol="put" if m.group(4) else "send",
                   collectives="ring" if m.group(5) else "openmpi", gbps=rate_gbps(label, gbps),
                   alpha_us=first["alpha_s"] * 1e6, fitted_gbps=gbps, bytes_per_s=first["bytes_per_s"],
                   full_duplex=first["full_duplex"], rows=[], methods={},
                   losses=load_losses(os.path.join(directory, f"netbench_{tag}.losses")), allreduce_algorithms={})
        for r in rows:
            entry = dict(op=r["op"], bytes=r["bytes"], measured_s=r["median_s"], predicted_s=r["predicted_s"],
                         error=error(r), repeats=r["repeats"])
            res["rows"].append(entry)
            if r["op"].startswith("method:"):
                res["methods"][r["op"][7:]] = entry
        coll = [x for x in res["rows"] if x["op"] in ("allreduce", "allgather", "sendrecv") and x["error"] is not None]
        big = [abs(x["error"]) for x in coll if x["bytes"] >= LARGE]
        small = [abs(x["error"]) for x in coll if x["bytes"] < LARGE]
        meth_big = [abs(x["error"]) for x in res["methods"].values() if x["error"] is not None and x["bytes"] >= LARGE]
        res.update(max_error_large=max(big) if big else None, max_error_small=max(small) if small else None,
                   max_error_methods_large=max(meth_big) if meth_big else None)
        for alg_path in sorted(glob.glob(os.path.join(directory, f"netbench_{tag}_allreduce-alg*.csv"))):
            number = int(ALGORITHM_FILE.fullmatch(os.path.basename(alg_path)).group(2))
            res["allreduce_algorithms"][number] = {r["bytes"]: r["median_s"] for r in load(alg_path)
                                                   if r["op"] == "allreduce"}
        results.append(res)
    return results


RATE_ORDER = {"100mbit": 0, "1gbit": 1, "none": 2}


def ordered(results):
    """nodes, then link rate (slow to unshaped), then send/Open MPI's, send/ring, put."""
    return sorted(results, key=lambda r: (r["nodes"], RATE_ORDER.get(r["rate"], 3), r["links"],
                                          r["protocol"] == "put", r["collectives"] == "ring"))


def row(res, op, size):
    return next((x for x in res["rows"] if x["op"] == op and x["bytes"] == size), None)


def pair(x, digits):
    if x is None or x["predicted_s"] < 0:
        return "-"
    return f"{1e3 * x['measured_s']:,.{digits}f} / {1e3 * x['predicted_s']:,.{digits}f}"


def summary_table(results):
    """Markdown lines: one row per node count, rate, protocol and collectives (one TCP connection):
    the fit, the largest error, five measured / modelled times and the loss counters."""
    lines = [*table_head(["nodes", "rate", "protocol, collectives", "alpha (us)", "fitted Gbit/s",
                          "largest \\|error\\|, exchange and collectives >= 64 kB", "all-reduce 8 MB",
                          "all-reduce 64 MB", "all-gather 8 MB", "dense (18.6 MB all-reduce)",
                          "QSGD (5.8 MB all-gather)", "A2SGD (16 B all-reduce)",
                          "tbf drops, TCP retransmissions, timeouts"])]
    for r in ordered(x for x in results if x["links"] == 1):
        losses = r["losses"]
        lost = "-" if losses is None else f"{losses['dropped']:,}, {losses['retransmitted']:,}, {losses['timeouts']:,}"
        m = r["methods"]
        lines.append(
            f"| {r['nodes']} | {r['rate']} | {r['protocol']}, {'ring' if r['collectives'] == 'ring' else 'Open MPI' + chr(39) + 's'} "
            f"| {r['alpha_us']:.1f} | {r['fitted_gbps']:.3g} | {fmt_abs(r['max_error_large'])} "
            f"| {pair(row(r, 'allreduce', 8 << 20), 0)} | {pair(row(r, 'allreduce', 64 << 20), 0)} "
            f"| {pair(row(r, 'allgather', 8 << 20), 0)} | {pair(m.get('dense'), 1)} | {pair(m.get('qsgd'), 1)} "
            f"| {pair(m.get('a2sgd'), 2)} | {lost} |")
    return lines


COLLECTIVE_SIZES = [("allreduce", 2 << 20, "all-reduce 2 MB"), ("allreduce", 8 << 20, "all-reduce 8 MB"),
                    ("allgather", 512 << 10, "all-gather 512 kB"), ("allgather", 2 << 20, "all-gather 2 MB"),
                    ("allgather", 8 << 20, "all-gather 8 MB")]


def collectives_tables(results, nodes):
    """Markdown lines at NODES nodes: per shaped rate with both an Open MPI's-choice and a ring run
    (send protocol, one connection), the model and both measurements of the sizes where the
    algorithms differ; then every forced all-reduce algorithm's time, where measured."""
    def find(rate, collectives):
        return next((r for r in results if r["nodes"] == nodes and r["rate"] == rate and r["links"] == 1 and
                     r["protocol"] == "send" and r["collectives"] == collectives), None)
    lines = []
    rates = sorted({r["rate"] for r in results if r["nodes"] == nodes and r["rate"] != "none"},
                   key=lambda x: RATE_ORDER.get(x, 3))
    for rate in rates:
        ours, ring = find(rate, "openmpi"), find(rate, "ring")
        if not ours or not ring:
            continue
        for label, res, key in (("model (ring, on the fitted link)", ring, "predicted_s"),
                                ("Open MPI's choice", ours, "measured_s"), ("ring forced", ring, "measured_s")):
            cells = []
            for op, size, _ in COLLECTIVE_SIZES:
                x = row(res, op, size)
                cells.append("-" if x is None else f"{1e3 * x[key]:,.1f}")
            lines.append(f"| {rate} | {label} | " + " | ".join(cells) + " |")
    if lines:
        lines = table_head(["rate", "ms, median", *(label for _, _, label in COLLECTIVE_SIZES)]) + lines
    forced = [r for r in ordered(results) if r["nodes"] == nodes and r["allreduce_algorithms"]]
    if forced:
        numbers = sorted({a for r in forced for a in r["allreduce_algorithms"]})
        lines += ["" if lines else None, *table_head(
            ["rate", "all-reduce, ms, median of 5", *(f"{ALLREDUCE_ALGORITHMS[a]} ({a})" for a in numbers),
             "Open MPI's choice (the study's run)"])]
        for r in forced:
            for size in sorted({b for t in r["allreduce_algorithms"].values() for b in t}):
                cells = [r["allreduce_algorithms"][a].get(size) for a in numbers]
                ours = row(r, "allreduce", size)
                lines.append(f"| {r['rate']} | {size >> 20} MB | " +
                             " | ".join("-" if c is None else f"{1e3 * c:,.1f}" for c in cells) +
                             f" | {'-' if ours is None else format(1e3 * ours['measured_s'], ',.1f')} |")
    return [line for line in lines if line is not None]


# ---- the docs' blocks of this study (python3 -m reports docs): docs/network.md ----
NETMODEL = "docs/results/network"
NETMODEL_COMMAND = ("`scripts/studies/network_study.sh` with the variants of docs/network.md, "
                    "then `python3 -m reports network-model`")


@generator("network-model", NETMODEL)
def network_model(root):
    """One row per node count, rate, protocol and collectives: the fitted link, the model's largest
    error, measured / modelled milliseconds of five operations, the loss counters."""
    results = load_results(os.path.join(root, NETMODEL))
    return summary_table(results) + ["", source_line(NETMODEL, NETMODEL_COMMAND)]


@generator("network-collectives", NETMODEL)
def network_collectives(root):
    """Per node count (4, then 2): the model, Open MPI's choice and the forced ring where both ran;
    each all-reduce algorithm forced in turn."""
    results = load_results(os.path.join(root, NETMODEL))
    lines = []
    for nodes in (4, 2):
        tables = collectives_tables(results, nodes)
        if tables:
            lines += [f"**{nodes} nodes**", ""] + tables + [""]
    return lines + [source_line(NETMODEL, NETMODEL_COMMAND)]


LINKS_CHECK = "docs/results/network/links-check"


@generator("network-links-check", LINKS_CHECK)
def network_links_check(root):
    """Per TCP connection count and method (scripts/studies/cluster/links_check.sh's runs.csv): the runs,
    how many finished, stopped at the collective timeout (exit 76) or failed otherwise, and the
    finished runs' median wall time."""
    path = os.path.join(root, LINKS_CHECK, "runs.csv")
    groups = {}
    for r in csv.DictReader(open(path)):
        groups.setdefault((int(r["links"]), r["method"]), []).append((int(r["exit"]), float(r["seconds"])))
    lines = [*table_head(["TCP connections per pair", "method", "runs", "finished",
                          "stopped at the collective timeout (exit 76)", "failed otherwise",
                          "median seconds, finished runs"])]
    for (links, method), runs in sorted(groups.items()):
        done = [s for rc, s in runs if rc == 0]
        median = f"{statistics.median(done):.1f}" if done else "-"
        lines.append(f"| {links} | {method} | {len(runs)} | {len(done)} | {sum(rc == 76 for rc, _ in runs)} "
                     f"| {sum(rc not in (0, 76) for rc, _ in runs)} | {median} |")
    return lines + ["", source_line(LINKS_CHECK, "`scripts/studies/cluster/links_check.sh`")]


figures(NETMODEL, "network_model_report.plot",
        lambda root, out: plot(out, load_results(os.path.join(root, NETMODEL)), {}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--timing", help="a directory of timed training runs (compute and update times per step)")
    args = ap.parse_args()
    other = other_seconds(args.timing) if args.timing else {}
    results = load_results(args.dir)
    md = ["# The alpha-beta model against the emulated network", ""]
    for res in results:
        algorithms = "ring collectives" if res["collectives"] == "ring" else "Open MPI's collectives"
        md += [f"## {res['nodes']} nodes, {res['rate']}, {res['links']} TCP connection(s) per pair, protocol "
               f"{res['protocol']}, {algorithms}", "",
               f"Fitted to the ping-pong: alpha {res['alpha_us']:.1f} us, bandwidth {res['fitted_gbps']:.3f} Gbit/s "
               f"({res['bytes_per_s'] / 1e6:.1f} MB/s), {'full' if res['full_duplex'] else 'half'} duplex "
               f"(simultaneous exchange against the ping-pong). Largest model error: "
               f"{fmt_pct(res['max_error_large'])} for collectives of 64 kB and more, "
               f"{fmt_pct(res['max_error_small'])} below; {fmt_pct(res['max_error_methods_large'])} for the "
               f"methods' steps of 64 kB and more.", "",
               *table_head(["operation", "bytes per rank", "measured ms", "modelled ms", "error"])]
        for x in res["rows"]:
            if x["op"] == "pingpong":
                continue
            md.append(f"| {x['op']} | {x['bytes']:,} | {1e3 * x['measured_s']:.3f} | "
                      f"{'-' if x['predicted_s'] < 0 else format(1e3 * x['predicted_s'], '.3f')} | {fmt_pct(x['error'])} |")
        md.append("")
    md += ["## Summary", ""] + summary_table(results) + [""]
    for nodes in sorted({r["nodes"] for r in results}):
        tables = collectives_tables(results, nodes)
        if tables:
            md += [f"## Collective algorithms, {nodes} nodes", ""] + tables + [""]
    made = plot(args.dir, results, other)
    md += [f"![{m}]({m})" for m in made]
    write_report(args.dir, "model_report", md, results)


def fmt_abs(v):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * abs(v):.0f}%"


def fmt_pct(v):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:+.0f}%"


if __name__ == "__main__":
    main()
