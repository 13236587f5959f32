"""docs/scaling.md's tables and plots: the measured convergence at 2 to 16 ranks, and the projection
of the language model's step to 1,024 ranks on two interconnects with a GPU's compute.

Measured: the convergence groups of docs/results/convergence (scripts/studies/convergence_study.sh): per
model, optimizer and rank count, tuned dense's steps to its target and A2SGD's (x dense), traffic.

Modelled: scripts/studies/scaling_projection.sh's runs (DIR/<method>.jsonl): the summary's
modelled_comm_s_p<P>_<G>gbps (a2sgd::NetworkModel at every projected rank count and link, the links'
latencies in the runs' config.ini) and kernel_bytes_compress/_apply (the method's kernels' memory
traffic). A step on a GPU is modelled as
    compute + (compress bytes + apply bytes) / HBM bandwidth + communication,
with compute the forward and backward FLOPs of the model (from the summary's "lstm-lm V-E-HxL")
at the GPU's FP32 peak: a lower bound, which favours the method that sends less (a faster GPU
leaves more of the step to the network), so every table also gives dense / A2SGD at ten times that
compute. The apply traffic of all-gather methods grows with p (every rank decodes every payload).
Measured over the emulated network (--timed N=DIR): the paper experiment's runs timed across N
emulated nodes (scripts/studies/paper_experiment.sh --network), each method's step, measured and modelled.
Usage: scaling_report.py PROJECTION_DIR [--convergence DIR] [--timed N=DIR ...] [--plots OUT]
"""
import argparse
import os
import re
import sys

from . import convergence_report
from .convergence_report import CONV
from .network_report import NETWORK_BLOCKS
from .plots import require
from .registry import figures, generator, source_line
from .runs import load_run, read_config, records
from .tables import table_head

# The GPU whose rates turn the model's work into time: NVIDIA's H200 SXM datasheet (the Hopper
# GH100 compute of the H100 SXM with HBM3e): FP32 67 TFLOP/s without tensor cores, 4.8 TB/s.
GPU = dict(name="NVIDIA H200 SXM", fp32_flops=67e12, hbm_bytes_per_s=4.8e12,
           source="NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200): FP32 67 TFLOP/s, "
                  "HBM3e 4.8 TB/s")
# What each projected link stands for; the rate and latency the model used are in the runs' config.ini.
LINKS = {25: "25 Gbit/s Ethernet, MPI over TCP", 200: "200 Gbit/s HDR InfiniBand"}
COMPUTE_SLOWDOWN = 10  # the sensitivity column: compute at a tenth of the GPU's peak
LABELS = {"dense": "dense", "a2sgd": "A2SGD (defaults)", "a2sgd-paper": "A2SGD (paper: 16 B, no averaging)",
          "topk": "Top-K", "qsgd": "QSGD", "powersgd": "PowerSGD"}
ORDER = ["dense", "a2sgd", "a2sgd-paper", "topk", "qsgd", "powersgd"]
SHOWN_RANKS = (2, 4, 8, 16, 64, 256, 1024)


def load(directory):
    """{method: (summary, {config key: value})} of a projection folder."""
    out = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".jsonl"):
            continue
        method = name[:-len(".jsonl")]
        summary = load_run(os.path.join(directory, name))[1]
        if summary is None:
            raise SystemExit(f"scaling_report.py: {directory}/{name} holds no summary (an unfinished run)")
        config = read_config(os.path.join(directory, method, "config.ini"))
        out[method] = (summary, config)
    if "dense" not in out:
        raise SystemExit(f"scaling_report.py: {directory} has no dense run, the reference of every ratio")
    return out


def links_of(config):
    """[(gbit, alpha_us)] from config.ini's project-links."""
    links = []
    for item in config["project-links"].split(","):
        parts = item.split(":")
        links.append((float(parts[0]), float(parts[1]) if len(parts) > 1 else 0.0))
    return links


def ranks_of(config):
    return [int(p) for p in config["project-ranks"].split(",")]


def lstm_flops(summary, bptt):
    """Forward and backward FLOPs of one step on one rank: per token, each LSTM layer's gates
    2 * 4H (I + H) and the decoder's 2 H V, forward; backward twice that (input and weight
    gradients); the embedding lookup, element-wise gates and softmax are left out (< 1%)."""
    m = re.fullmatch(r"lstm-lm (\d+)-(\d+)-(\d+)x(\d+)", summary["model"])
    if not m:
        raise SystemExit(f"scaling_report.py: the model '{summary['model']}' is not the language model")
    vocab, embed, hidden, layers = map(int, m.groups())
    per_token = sum(2 * 4 * hidden * ((embed if l == 0 else hidden) + hidden) for l in range(layers))
    per_token += 2 * hidden * vocab
    return 3 * per_token * int(summary["batch_size"]) * bptt


def projected_step_seconds(summary, p, gbit, compute_s):
    comm = summary[f"modelled_comm_s_p{p}_{round(gbit)}gbps"]
    apply_bytes = summary["kernel_bytes_apply"]
    if summary.get("decode_scales_with_ranks"):
        apply_bytes *= p / summary["world_size"]
    kernels = (summary["kernel_bytes_compress"] + apply_bytes) / GPU["hbm_bytes_per_s"]
    return compute_s + kernels + comm


def projection(directory):
    runs = load(directory)
    dense_summary, dense_config = runs["dense"]
    compute_s = lstm_flops(dense_summary, int(dense_config["bptt"])) / GPU["fp32_flops"]
    return runs, links_of(dense_config), ranks_of(dense_config), compute_s


def projection_table(directory, gbit):
    runs, links, ranks, compute_s = projection(directory)
    alpha = dict(links)[gbit]
    methods = [m for m in ORDER if m in runs] + sorted(m for m in runs if m not in ORDER)
    lines = [f"{LINKS.get(round(gbit), f'{gbit:g} Gbit/s')}: {gbit:g} Gbit/s, alpha {alpha:g} us; compute "
             f"{1e3 * compute_s:.3f} ms per step (modelled ms per step):", "",
             *table_head(["ranks", *(LABELS.get(m, m) for m in methods), "dense / A2SGD",
                          f"dense / A2SGD at {COMPUTE_SLOWDOWN}x compute"])]
    for p in ranks:
        if p not in SHOWN_RANKS:
            continue
        cells = [f"{1e3 * projected_step_seconds(runs[m][0], p, gbit, compute_s):.3f}" for m in methods]
        ratio = projected_step_seconds(runs["dense"][0], p, gbit, compute_s) / projected_step_seconds(runs["a2sgd"][0], p, gbit, compute_s)
        slow = COMPUTE_SLOWDOWN * compute_s
        ratio10 = projected_step_seconds(runs["dense"][0], p, gbit, slow) / projected_step_seconds(runs["a2sgd"][0], p, gbit, slow)
        lines.append(f"| {p:,} | " + " | ".join(cells) + f" | {ratio:.1f} | {ratio10:.1f} |")
    return lines


def allreduce_lines(directory):
    """What A2SGD's own all-reduce costs at the largest projected p on each link."""
    runs, links, ranks, _ = projection(directory)
    p = max(ranks)
    out = []
    for gbit, alpha in links:
        parts = []
        if "a2sgd-paper" in runs:
            parts.append(f"the paper's 16-byte all-reduce {1e6 * runs['a2sgd-paper'][0][f'modelled_comm_s_p{p}_{round(gbit)}gbps']:.1f} us")
        if "a2sgd" in runs:
            parts.append("the defaults' step (144 bytes plus 1/200 of a dense all-reduce) "
                         f"{1e6 * runs['a2sgd'][0][f'modelled_comm_s_p{p}_{round(gbit)}gbps']:.1f} us")
        parts.append(f"dense's all-reduce {1e3 * runs['dense'][0][f'modelled_comm_s_p{p}_{round(gbit)}gbps']:.2f} ms")
        out.append(f"- {LINKS.get(round(gbit), f'{gbit:g} Gbit/s')} (alpha {alpha:g} us), {p:,} ranks: " +
                   "; ".join(parts) + ".")
    return out


def time_to_target(directory, convergence):
    """Measured steps to the target x modelled step time, for every LSTM group holding tuned dense
    and a run of A2SGD's default exchange (layer-wise means, an average every 200 steps) that
    reached the target: the one that reached it first, whatever its rate or schedule (named)."""
    runs, links, ranks, compute_s = projection(directory)
    lines = [*table_head(["group", "link", "dense: steps x ms = s", "A2SGD's default exchange: steps x ms = s",
                          "A2SGD / dense, time (steps)"])]
    def order(group):  # the rank count as a number (p16 after p8), then the optimizer
        m = re.fullmatch(r"lstm_p(\d+)_(sgd|adam)", group)
        return (int(m.group(1)), m.group(2)) if m else (0, group)

    for group in sorted(os.listdir(convergence), key=order):
        m = re.fullmatch(r"lstm_p(\d+)_(sgd|adam)", group)
        if not m or int(m.group(1)) not in ranks:
            continue
        p = int(m.group(1))
        target, _, rows = convergence_report.group_rows(os.path.join(convergence, group), "lstm")
        if target is None:
            continue
        ref = next(r for r in rows.values() if r["reference"])
        a2 = [r for r in rows.values() if r["config"].startswith("a2sgd-layer-k200-hold") and
              r["steps_to_target"] is not None]
        if not a2 or ref["steps_to_target"] is None:
            continue
        a = min(a2, key=lambda r: r["steps_to_target"])
        for gbit, _ in links:
            td = projected_step_seconds(runs["dense"][0], p, gbit, compute_s)
            ta = projected_step_seconds(runs["a2sgd"][0], p, gbit, compute_s)
            sd, sa = ref["steps_to_target"], a["steps_to_target"]
            lines.append(f"| {p} ranks, {m.group(2)}: {ref['config']} vs {a['config']} | {gbit:g} Gbit/s | "
                         f"{sd:,.0f} x {1e3 * td:.3f} = {sd * td:.2f} | {sa:,.0f} x {1e3 * ta:.3f} = {sa * ta:.2f} | "
                         f"{sa * ta / (sd * td):.3f} ({sa / sd:.2f}x) |")
    return lines


def measured_rows(convergence):
    """Per (model, optimizer): {ranks: (dense config, dense steps, [(a2sgd config, steps or None,
    ratio or None, traffic share, final)])} from the convergence groups."""
    out = {}
    for group in sorted(os.listdir(convergence)):
        m = re.fullmatch(r"(lstm|mlp)_p(\d+)_(sgd|momentum|adam)", group)
        if not m:
            continue
        target, _, rows = convergence_report.group_rows(os.path.join(convergence, group), m.group(1))
        if target is None:
            continue
        ref = next(r for r in rows.values() if r["reference"])
        others = [(r["config"], r["steps_to_target"], r.get("steps_vs_dense"), r.get("traffic_vs_dense"),
                   r["final_averaged"]) for r in rows.values() if r["config"].startswith("a2sgd")]
        out.setdefault((m.group(1), m.group(3)), {})[int(m.group(2))] = (ref["config"], ref["steps_to_target"], target,
                                                                          others)
    return out


def measured_table(convergence):
    lines = [*table_head(["model, optimizer", "ranks", "tuned dense: steps to target (target)",
                          "A2SGD: steps to target (x dense), bytes (x dense)"])]
    for (model, opt), by_ranks in sorted(measured_rows(convergence).items()):
        fmt = convergence_report.MODELS[model]["fmt"]
        for p in sorted(by_ranks):
            dense, steps, target, others = by_ranks[p]
            cells = []
            for config, s, ratio, share, final in sorted(others, key=lambda o: (o[3] or 0, o[0])):
                reach = "not reached" if s is None else f"{s:,.0f} ({ratio:.2f}x)"
                cells.append(f"{config}: {reach}, {100 * share:.2f}%" if share else f"{config}: {reach}")
            lines.append(f"| {'LSTM' if model == 'lstm' else 'MLP'}, {opt} | {p} | {dense}: "
                         f"{'-' if steps is None else f'{steps:,.0f}'} ({format(target, fmt)}) | {'; '.join(cells) or 'not run yet'} |")
    return lines


# A2SGD's defaults on the language model (convergence_report.LSTM_DEFAULTS, and those of before the
# warm-up), with the model's plateau schedule or the rate held constant ("-const").
LSTM_DEFAULT_RUN = re.compile("(" + "|".join(re.escape(n) for n in (
    *convergence_report.LSTM_DEFAULTS.values(), *convergence_report.LSTM_DEFAULTS_BEFORE_WARMUP.values())) +
    ")(-const)?")


def drift_rows(convergence):
    """Per (optimizer, ranks): the language model's default A2SGD run whose rate went uncut longest
    (a schedule's cut shrinks every step, and with it the drift; a warm-up's rising rate is no cut)
    and, over the evaluations before any cut: their number, the last one's step, the replicas' mean and largest
    divergence, replica 0's and the averaged model's perplexity at the last one, and the run's steps
    to the group's target (x dense)."""
    out = {}
    for group in sorted(os.listdir(convergence)):
        m = re.fullmatch(r"lstm_p(\d+)_(sgd|adam)", group)
        if not m:
            continue
        folder = os.path.join(convergence, group)
        target, _, rows = convergence_report.group_rows(folder, "lstm")
        if target is None:
            continue
        best = None
        for config, row in sorted(rows.items()):
            if not LSTM_DEFAULT_RUN.fullmatch(config) or not row["finished"]:
                continue
            lr, peak, cut, evals = None, None, False, []
            for r in records(os.path.join(folder, config + ".jsonl")):
                if r.get("event") == "train":
                    lr = r["lr"]
                    cut = cut or (peak is not None and lr < peak)
                    peak = lr if peak is None else max(peak, lr)
                elif r.get("event") == "eval" and lr is not None and not cut:
                    evals.append(r)
            if evals and (best is None or len(evals) > len(best[1])):
                best = (row, evals)
        if best is None:
            continue
        row, evals = best
        divergence = [e["replica_divergence"] for e in evals]
        out[(m.group(2), int(m.group(1)))] = dict(
            config=row["config"], evals=len(evals), last_step=evals[-1]["step"],
            mean_divergence=sum(divergence) / len(divergence), max_divergence=max(divergence),
            replica=evals[-1]["valid_perplexity"], averaged=evals[-1]["valid_perplexity_averaged"],
            steps_to_target=row["steps_to_target"], steps_vs_dense=row.get("steps_vs_dense"))
    return out


def drift_table(convergence):
    lines = [*table_head(["optimizer", "ranks", "A2SGD run", "evaluations before any rate cut (last step)",
                          "replica divergence over them: mean, largest",
                          "valid. perplexity at the last: replica 0, averaged", "steps to target (x dense)"])]
    for (opt, p), d in sorted(drift_rows(convergence).items(), key=lambda kv: (kv[0][0] != "sgd", kv[0][1])):
        reach = "not reached" if d["steps_to_target"] is None else (
            f"{d['steps_to_target']:,.0f} ({d['steps_vs_dense']:.2f}x)")
        lines.append(f"| {opt} | {p} | {d['config']} | {d['evals']} ({d['last_step']:,}) | "
                     f"{d['mean_divergence']:.2f}, {d['max_divergence']:.2f} | {d['replica']:.1f}, "
                     f"{d['averaged']:.1f} | {reach} |")
    return lines


def plot(projection_dir, convergence, out):
    plt = require("scaling_report.py")
    os.makedirs(out, exist_ok=True)
    runs, links, ranks, compute_s = projection(projection_dir)
    for gbit, alpha in links:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for m in [m for m in ORDER if m in runs]:
            ax.plot(ranks, [1e3 * projected_step_seconds(runs[m][0], p, gbit, compute_s) for p in ranks], marker="o",
                    label=LABELS.get(m, m))
        ax.axhline(1e3 * compute_s, color="grey", linestyle=":", label="compute alone")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("ranks (one GPU each)")
        ax.set_ylabel("modelled ms per step")
        ax.set_title(f"LSTM on PTB, {LINKS.get(round(gbit), '')} ({gbit:g} Gbit/s, alpha {alpha:g} us), "
                     f"{GPU['name']}", fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"projection_{round(gbit)}gbps.png"), dpi=110)
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (model, opt), by_ranks in sorted(measured_rows(convergence).items()):
        # Per group the A2SGD run with the smallest ratio among those that reached the target.
        pts = []
        for p in sorted(by_ranks):
            others = [o for o in by_ranks[p][3] if o[1] is not None and o[2]]
            if others:
                best = min(others, key=lambda o: o[2])
                pts.append((p, best[2]))
        if pts:
            ax.plot(*zip(*pts), marker="o", label=f"{model.upper()}, {opt}")
    ax.axhline(1.5, color="grey", linestyle=":", label="1.5x goal")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("ranks")
    ax.set_ylabel("A2SGD's steps to target / tuned dense's")
    ax.set_title("the best A2SGD run of each group that reached the target (none did where a point is "
                 "missing)", fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "steps_vs_ranks.png"), dpi=110)
    plt.close(fig)


def network_rows(timed):
    """{(method, optimizer): {nodes: step record}} of the paper experiment's runs timed across
    emulated nodes; timed: {nodes: folder of <method>_<optimizer>.jsonl (scripts/studies/paper_experiment.sh
    --network)}. A record: measured step, its communication and compute (seconds per step and rank),
    and the step with the alpha-beta model's communication on the link fitted in the same sitting."""
    out = {}
    for nodes, folder in sorted(timed.items()):
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".jsonl") or "_" not in name:
                continue
            method, _, optimizer = name[:-6].rpartition("_")
            method = {"a2sgd-pure": "a2sgd-paper"}.get(method, method)  # paper_experiment.sh's name
            summary = load_run(os.path.join(folder, name))[1]
            if summary is None:
                raise ValueError(f"{os.path.join(folder, name)}: no summary record (the timed run did not finish)")
            if summary.get("world_size") != nodes:
                raise ValueError(f"{os.path.join(folder, name)}: {summary.get('world_size')} ranks, "
                                 f"filed under {nodes} nodes")
            other = summary["compute_s_per_step"] + summary["compress_s_per_step"] + summary["optimizer_s_per_step"]
            modelled = summary.get("modelled_comm_s_per_step")
            out.setdefault((method, optimizer), {})[nodes] = dict(
                step_s=summary["step_time_s"], comm_s=summary["comm_s_per_step"],
                compute_s=summary["compute_s_per_step"],
                modelled_step_s=None if modelled is None else other + modelled)
    return out


def network_table(timed, optimizer):
    """Per method: ms per step measured (its communication) / modelled at each node count, then the
    compute per step and rank, which grows with the node count because the nodes share 2 cores."""
    rows = network_rows(timed)
    nodes = sorted(timed)
    lines = table_head(["method", *(f"{n} nodes: measured (comm) / modelled ms" for n in nodes)])
    for method in [m for m in ORDER if (m, optimizer) in rows]:
        cells = []
        for n in nodes:
            r = rows[(method, optimizer)].get(n)
            if r is None:
                cells.append("not timed")
                continue
            model = "-" if r["modelled_step_s"] is None else f"{1e3 * r['modelled_step_s']:,.0f}"
            cells.append(f"{1e3 * r['step_s']:,.0f} ({1e3 * r['comm_s']:,.0f}) / {model}")
        lines.append(f"| {LABELS.get(method, method)} | " + " | ".join(cells) + " |")
    dense = rows.get(("dense", optimizer), {})
    a2sgd = rows.get(("a2sgd", optimizer), {})
    lines.append("| dense's compute per step and rank (ms) | " + " | ".join(
        f"{1e3 * dense[n]['compute_s']:,.0f}" if n in dense else "-" for n in nodes) + " |")
    lines.append("| dense / A2SGD, measured step | " + " | ".join(
        f"{dense[n]['step_s'] / a2sgd[n]['step_s']:.2f}x" if n in dense and n in a2sgd else "-" for n in nodes) + " |")
    return lines


def plot_network(timed, out):
    """network_steps.png: each method's measured (solid) and modelled (dashed) step against the node
    count, one panel per optimizer."""
    plt = require("scaling_report.py")
    rows = network_rows(timed)
    optimizers = sorted({o for _, o in rows})
    fig, axes = plt.subplots(1, len(optimizers), figsize=(6 * len(optimizers), 4.5), squeeze=False)
    for ax, optimizer in zip(axes[0], optimizers):
        for i, method in enumerate(m for m in ORDER if (m, optimizer) in rows):
            by_nodes = rows[(method, optimizer)]
            ns = sorted(by_nodes)
            color = f"C{i}"
            ax.plot(ns, [1e3 * by_nodes[n]["step_s"] for n in ns], marker="o", color=color,
                    label=LABELS.get(method, method))
            modelled = [(n, by_nodes[n]["modelled_step_s"]) for n in ns if by_nodes[n]["modelled_step_s"] is not None]
            if modelled:
                ax.plot([n for n, _ in modelled], [1e3 * v for _, v in modelled], linestyle="--", color=color,
                        alpha=0.6)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(timed))
        ax.set_xticklabels([str(n) for n in sorted(timed)])
        ax.set_yscale("log")
        ax.set_xlabel("emulated nodes (one rank each; the nodes share 2 cores)")
        ax.set_ylabel("ms per step")
        ax.set_title(f"LSTM on PTB, {optimizer}, 250 Mbit/s links: measured (solid), modelled (dashed)", fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    fig.savefig(os.path.join(out, "network_steps.png"), dpi=110)
    plt.close(fig)


# ---- the docs' blocks of this study (python3 -m reports docs): docs/scaling.md ----
PROJECTION = "docs/results/scaling/projection"
PROJECTION_COMMAND = "`scripts/studies/scaling_projection.sh`, then `python3 -m reports scaling`'s model"


@generator("scaling-measured", CONV)
def scaling_measured(root):
    return measured_table(os.path.join(root, CONV)) + [
        "", source_line(CONV, "`python3 -m reports convergence`'s groups, per rank count")]


@generator("scaling-drift", CONV)
def scaling_drift(root):
    return drift_table(os.path.join(root, CONV)) + [
        "", source_line(CONV, "`python3 -m reports scaling`'s drift table: per group the default run whose rate "
                              "stayed uncut longest")]


def _projection_block(gbit):
    def generate(root):
        return projection_table(os.path.join(root, PROJECTION), gbit) + [
            "", source_line(PROJECTION, PROJECTION_COMMAND)]
    return generate


for _gbit in (25, 200):
    generator(f"scaling-projection-{_gbit}", PROJECTION)(_projection_block(_gbit))


@generator("scaling-allreduce", PROJECTION)
def scaling_allreduce(root):
    return allreduce_lines(os.path.join(root, PROJECTION)) + [
        "", source_line(PROJECTION, PROJECTION_COMMAND)]


@generator("scaling-time-to-target", PROJECTION)
def scaling_time_to_target(root):
    return time_to_target(os.path.join(root, PROJECTION), os.path.join(root, CONV)) + [
        "", source_line(PROJECTION, PROJECTION_COMMAND + " with the steps of docs/results/convergence/")]


# The paper experiment's runs timed across 2, 4 and 8 emulated nodes at 250 Mbit/s (network.md's
# network-lstm-p2/-p4/-p8 blocks), per node count.
NETWORK_TIMED = {2: NETWORK_BLOCKS["network-lstm-p2"][1], 4: NETWORK_BLOCKS["network-lstm-p4"][1],
                 8: NETWORK_BLOCKS["network-lstm-p8"][1]}


def _scaling_network(optimizer):
    def generate(root):
        timed = {n: os.path.join(root, d) for n, d in NETWORK_TIMED.items()}
        folders = ", ".join(f"`{d}/`" for d in NETWORK_TIMED.values())
        return network_table(timed, optimizer) + [
            "", f"_Generated by `python3 -m reports docs` from {folders} (`scripts/studies/paper_experiment.sh --network "
                "250mbit --ranks P`; `python3 -m reports scaling`'s network table)._"]
    return generate


for _optimizer in ("sgd", "adam"):
    generator(f"scaling-network-{_optimizer}", NETWORK_TIMED[8])(_scaling_network(_optimizer))


def _draw(root, out):
    plot(os.path.join(root, PROJECTION), os.path.join(root, CONV), out)
    plot_network({n: os.path.join(root, d) for n, d in NETWORK_TIMED.items()}, out)


figures("docs/results/scaling", "scaling_report.plot, scaling_report.plot_network", _draw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("projection", help="scripts/studies/scaling_projection.sh's --out folder")
    ap.add_argument("--convergence", default="docs/results/convergence", help="the convergence groups")
    ap.add_argument("--plots", metavar="OUT", help="draw the PNGs into OUT (matplotlib)")
    ap.add_argument("--timed", action="append", default=[], metavar="N=DIR",
                    help="the paper experiment's runs timed across N emulated nodes (paper_experiment.sh --network; "
                         "repeatable): the measured step per node count")
    a = ap.parse_args()
    timed = {}
    for item in a.timed:
        n, sep, folder = item.partition("=")
        if not sep or not n.isdigit() or int(n) < 1 or not os.path.isdir(folder):
            ap.error(f"--timed {item!r}: N=DIR with a node count and an existing folder expected")
        timed[int(n)] = folder
    runs, links, _, _ = projection(a.projection)
    print("\n".join(measured_table(a.convergence)))
    print()
    print("\n".join(drift_table(a.convergence)))
    for gbit, _ in links:
        print()
        print("\n".join(projection_table(a.projection, gbit)))
    print()
    print("\n".join(allreduce_lines(a.projection)))
    print()
    print("\n".join(time_to_target(a.projection, a.convergence)))
    for optimizer in sorted({o for _, o in network_rows(timed)}) if timed else ():
        print(f"\n{optimizer}:")
        print("\n".join(network_table(timed, optimizer)))
    if a.plots:
        plot(a.projection, a.convergence, a.plots)
        if timed:
            plot_network(timed, a.plots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
