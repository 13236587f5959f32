"""Tables and Pareto plots of the A2SGD convergence study (scripts/studies/convergence_study.sh).

Reads DIR/<model>_p<ranks>_<optimizer>/<config>.jsonl (a2sgd-train metrics) and writes
DIR/report.md, DIR/report.json and, with matplotlib, DIR/pareto_<group>.png: per group (model,
rank count, optimizer), every configuration's steps to the target, its final quality (averaged
model and rank 0's replica), the replica divergence at the end, and the amortised bytes per step
and rank: by default everything the run sent over its steps (exchange steps, warm-up, periodic
averaging and the final average: total_comm_bytes / steps); with --bytes steps the training steps'
traffic only (comm_bytes / steps: the final average left out), which compares runs of an
a2sgd-train that did not yet count the final average like for like with newer ones. A group that
mixes both kinds of metrics under the default is flagged in the report and on stderr.

Definitions (docs/convergence.md):
- the model scored is the averaged model, the one a user deploys;
- lstm target: dense's final validation perplexity x 1.1 in the same group; mlp target: dense's
  final test accuracy - 0.01; where the group holds dense at several rates (dense, dense-lr40, ...:
  the tuned baseline), dense is the one with the best final score, the others are rows like any;
- steps to target: the first crossing, interpolated between evaluations (log perplexity, or
  accuracy); "not reached" when no evaluation reaches it;
- "within 1.5x": steps to target at most 1.5 x dense's own steps to the same target.
"""
import argparse
import math
import os
import re
import sys

from .plots import pyplot
from .registry import generator, source_line
from .runs import load_run
from .targets import steps_to_accuracy, steps_to_target
from .tables import table_head, write_report


# A2SGD's defaults on the language model (a2sgd-train's, docs/algorithm.md) as convergence_study.sh
# names them: layer-wise means, an average every 200 steps, zero-gradient entries held, lr 30 with
# SGD, and with Adam lr 0.003 warmed up over the first 200 steps. LSTM_DEFAULTS_BEFORE_WARMUP: the
# Adam defaults of the runs made before the warm-up became the default.
LSTM_DEFAULTS = {"sgd": "a2sgd-layer-k200-hold-lr30", "adam": "a2sgd-layer-k200-hold-lr0.003-lrw200"}
LSTM_DEFAULTS_BEFORE_WARMUP = {"adam": "a2sgd-layer-k200-hold-lr0.003"}


def lstm_default_run(configs, optimizer):
    """The run of A2SGD's defaults among CONFIGS (names) of a language-model group with OPTIMIZER, and
    whether it is one from before the warm-up became the default; (None, False) where none is."""
    if LSTM_DEFAULTS[optimizer] in configs:
        return LSTM_DEFAULTS[optimizer], False
    before = LSTM_DEFAULTS_BEFORE_WARMUP.get(optimizer)
    return (before, True) if before in configs else (None, False)


# Per model: the metric scored, whether lower is better, and how the target derives from dense's final.
MODELS = {
    "lstm": dict(key="valid_perplexity", lower=True, target=lambda d: 1.1 * d, rule="dense's final x 1.1",
                 reach=steps_to_target, fmt=".1f", label="validation perplexity"),
    "mlp": dict(key="test_accuracy", lower=False, target=lambda d: d - 0.01, rule="dense's final - 0.01",
                reach=steps_to_accuracy, fmt=".4f", label="test accuracy"),
}


def group_rows(directory, model, dense_reference=None, bytes_basis="run"):
    m = MODELS[model]
    runs = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".jsonl"):
            evals, summary, warnings, diverged = load_run(os.path.join(directory, name))
            runs[name[:-len(".jsonl")]] = dict(evals=evals, summary=summary, warnings=warnings, diverged=diverged)
    dense_runs = [c for c in runs if c == "dense" or c.startswith("dense-")]
    if not dense_runs and dense_reference and runs:
        # A longer dense run with the same settings: its trajectory up to this group's horizon is the
        # one a dense run of this length would have taken (same seeds, same data order, and a
        # schedule that depends only on the evaluations before).
        horizon = max(r["evals"][-1]["step"] for r in runs.values() if r["evals"])
        evals, summary, warnings, diverged = load_run(dense_reference)
        evals = [e for e in evals if e["step"] <= horizon]
        if summary and evals and evals[-1]["step"] == horizon:
            # Its per-step traffic holds for the prefix; its whole-run total does not.
            summary = dict(summary, steps=horizon, total_comm_bytes=None)
            runs["dense"] = dict(evals=evals, summary=summary, warnings=warnings, diverged=None)
            dense_runs = ["dense"]
    finals = {c: runs[c]["evals"][-1][m["key"] + "_averaged"] for c in dense_runs
              if runs[c]["evals"] and runs[c]["summary"] and math.isfinite(runs[c]["evals"][-1][m["key"] + "_averaged"])}
    if not finals:
        return None, None, {}
    reference = (min if m["lower"] else max)(finals, key=finals.get)
    dense = runs[reference]
    dense_final = dense["evals"][-1][m["key"] + "_averaged"]
    target = m["target"](dense_final)
    dense_bytes = dense["summary"]["bytes_per_step"] if dense["summary"] else None
    rows = {}
    for config, r in runs.items():
        ev, s = r["evals"], r["summary"]
        row = dict(config=config, warnings=r["warnings"], diverged=r["diverged"] is not None, finished=s is not None,
                   reference=config == reference)
        if ev:
            row.update(final_averaged=ev[-1][m["key"] + "_averaged"], final_replica=ev[-1][m["key"]],
                       best_averaged=(min if m["lower"] else max)(e[m["key"] + "_averaged"] for e in ev),
                       replica_divergence=ev[-1]["replica_divergence"],
                       max_divergence=max(e["replica_divergence"] for e in ev), last_step=ev[-1]["step"])
        row["steps_to_target"] = m["reach"](ev, m["key"] + "_averaged", target)
        row["steps_to_target_replica"] = m["reach"](ev, m["key"], target)
        if s:
            # What the run sent over its steps: exchange steps, warm-up, periodic averaging and the
            # final average (total_comm_bytes; older metrics have only the steps' bytes_per_step).
            # Not the plan's figure (planned_bytes_per_step), which leaves the warm-up out.
            total = s.get("total_comm_bytes")
            whole_run = bytes_basis == "run" and total is not None and bool(s.get("steps"))
            per_step = total / s["steps"] if whole_run else s["bytes_per_step"]
            row.update(steps=s["steps"], bytes_per_step=per_step, step_ms=1e3 * s["step_time_s"],
                       ranks=s["world_size"], final_average_counted=whole_run)
            if dense_bytes:
                row["traffic_vs_dense"] = per_step / dense_bytes
        rows[config] = row
    dense_steps = rows[reference]["steps_to_target"]
    for row in rows.values():
        n = row["steps_to_target"]
        row["steps_vs_dense"] = None if n is None or not dense_steps else n / dense_steps
    return target, dense_final, rows


def plot(path, title, rows, xlabel_note):
    plt = pyplot()
    if plt is None:
        print("convergence_report.py: matplotlib missing; no plot", file=sys.stderr)
        return False
    reached = [r for r in rows.values() if r.get("bytes_per_step") and r["steps_to_target"] is not None]
    missed = [r for r in rows.values() if r.get("bytes_per_step") and r["steps_to_target"] is None]
    fig, ax = plt.subplots(figsize=(8, 5))
    top = max([r["steps_to_target"] for r in reached] + [r.get("steps", 0) for r in missed] + [1])
    for r in reached:
        ax.scatter(r["bytes_per_step"], r["steps_to_target"], color="tab:blue")
        ax.annotate(r["config"], (r["bytes_per_step"], r["steps_to_target"]), fontsize=7, xytext=(3, 3),
                    textcoords="offset points")
    for r in missed:
        ax.scatter(r["bytes_per_step"], 1.08 * top, marker="x", color="tab:red")
        ax.annotate(r["config"], (r["bytes_per_step"], 1.08 * top), fontsize=7, rotation=30, xytext=(3, 3),
                    textcoords="offset points")
    # The Pareto front: no other configuration reaches the target in fewer steps with fewer bytes.
    front, best = [], math.inf
    for r in sorted(reached, key=lambda r: (r["bytes_per_step"], r["steps_to_target"])):
        if r["steps_to_target"] < best:
            front.append(r)
            best = r["steps_to_target"]
    if front:
        ax.step([r["bytes_per_step"] for r in front], [r["steps_to_target"] for r in front], where="post",
                color="tab:blue", alpha=0.4)
    ax.set_xscale("log")
    ax.set_xlabel("bytes per step and rank, amortised " + xlabel_note)
    ax.set_ylabel("steps to target (x: not reached)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ---- the docs' blocks of this study (python3 -m reports docs): docs/convergence.md, results.md ----
CONV = "docs/results/convergence"
GROUP = re.compile(r"^(lstm|mlp)_p(\d+)_(sgd|momentum|adam)$")
CONV_OPTIMIZERS = {"sgd": "SGD", "momentum": "momentum", "adam": "Adam"}


def conv_groups(root):
    """{group: (model, ranks, optimizer, target, rows)} for every group with a finished dense run."""
    out = {}
    base = os.path.join(root, CONV)
    def order(g):  # model, then rank count as a number, then optimizer
        m = GROUP.match(g)
        return (m.group(1), int(m.group(2)), ["sgd", "momentum", "adam"].index(m.group(3))) if m else ("", 0, 0)
    for g in sorted(os.listdir(base), key=order):
        m = GROUP.match(g)
        if not m or not os.path.isdir(os.path.join(base, g)):
            continue
        target, _, rows = group_rows(os.path.join(base, g), m.group(1))
        if target is not None:
            out[g] = (m.group(1), int(m.group(2)), m.group(3), target, rows)
    return out


def conv_cell(row, fmt):
    reach = "not reached" if row["steps_to_target"] is None else f"{row['steps_to_target']:,.0f}"
    if row["steps_to_target"] is not None and not row["reference"] and row["steps_vs_dense"]:
        reach += f" ({row['steps_vs_dense']:.2f}x)"
    return reach, format(row["final_averaged"], fmt)


def conv_block(group):
    def generate(root):
        groups = conv_groups(root)
        if group not in groups:
            raise SystemExit(f"convergence_report.py: {CONV}/{group} holds no finished dense run")
        model, _, _, target, rows = groups[group]
        m = MODELS[model]
        ref = next(r for r in rows.values() if r["reference"])
        lines = [f"Target: {m['label']} {format(target, m['fmt'])} ({m['rule']}, the best dense run: "
                 f"{ref['config']}).", "",
                 *table_head(["run", "steps to target (x dense)", "final, averaged model",
                              "replica divergence at the end", "bytes per step and rank (x dense)", "steps run"])]
        for r in sorted(rows.values(), key=lambda r: (not r["reference"], r.get("bytes_per_step") or 0, r["config"])):
            reach, final = conv_cell(r, m["fmt"])
            note = "" if r["finished"] else " (unfinished)"
            traffic = "-" if r.get("bytes_per_step") is None else (
                f"{r['bytes_per_step']:,.0f} ({100 * r['traffic_vs_dense']:.2f}%)" if not r["reference"]
                and r.get("traffic_vs_dense") else f"{r['bytes_per_step']:,.0f}")
            lines.append(f"| {r['config']}{note} | {reach} | {final} | {r.get('replica_divergence', 0):.3f} "
                         f"| {traffic} | {r.get('steps', r.get('last_step', '-'))} |")
        return lines + ["", source_line(f"{CONV}/{group}", "`python3 -m reports convergence`'s group table")]
    return generate


for _model, _optimizers in (("lstm", ("sgd", "adam")), ("mlp", ("sgd", "momentum", "adam"))):
    for _ranks in (2, 4, 8, 16, 32):
        for _optimizer in _optimizers:
            _group = f"{_model}_p{_ranks}_{_optimizer}"
            generator("convergence-" + _group.replace("_", "-"), f"{CONV}/{_group}")(conv_block(_group))


@generator("convergence-summary", CONV)
def convergence_summary(root):
    """docs/results.md's rows: per group, tuned dense and the A2SGD runs at the group's least traffic (the
    defaults; docs/convergence.md has the variants), steps to the target and traffic."""
    return _summary(root, ("lstm", "mlp"), "`python3 -m reports convergence`; docs/convergence.md has each group")


@generator("convergence-summary-lstm", CONV)
def convergence_summary_lstm(root):
    """docs/convergence.md's opening table: results.md's rows of the language model alone."""
    return _summary(root, ("lstm",), "`python3 -m reports convergence`; each group's table below")


def _summary(root, models, command):
    lines = [*table_head(["model, ranks, optimizer: target", "tuned dense: steps to target, final",
                          "A2SGD: steps to target (x dense), final, bytes (x dense)"])]
    for g, (model, ranks, optimizer, target, rows) in conv_groups(root).items():
        if model not in models:
            continue
        m = MODELS[model]
        ref = next(r for r in rows.values() if r["reference"])
        reach, final = conv_cell(ref, m["fmt"])
        others = []
        # The least traffic of the group's A2SGD runs: the defaults (other rows are the variants
        # tried, which docs/convergence.md's group table lists).
        least = min((r["bytes_per_step"] for r in rows.values()
                     if not r["config"].startswith("dense") and r.get("bytes_per_step")), default=None)
        for r in sorted(rows.values(), key=lambda r: r["config"]):
            if r["config"].startswith("dense"):
                continue
            if least and r.get("bytes_per_step") and r["bytes_per_step"] > 1.01 * least:
                continue
            a_reach, a_final = conv_cell(r, m["fmt"])
            share = "" if not r.get("traffic_vs_dense") else f", {100 * r['traffic_vs_dense']:.2f}% of dense's bytes"
            others.append(f"{r['config']}: {a_reach}, {a_final}{share}" + ("" if r["finished"] else " (unfinished)"))
        label = "LSTM on PTB" if model == "lstm" else "MLP on Fashion-MNIST"
        lines.append(f"| {label}, {ranks} ranks, {CONV_OPTIMIZERS[optimizer]}: {format(target, m['fmt'])} "
                     f"({m['rule']}) | {ref['config']}: {reach}, {final} | {'; '.join(others) or 'not run yet'} |")
    return lines + ["", source_line(CONV, command)]


# ---- the moment schemes on the MLP (docs/algorithm.md; the same study's runs, docs/results/moments) ----
MOMENTS = "docs/results/moments"


@generator("moments-mlp-p4", MOMENTS)
def moments_mlp_p4(root):
    """Per optimizer group: every run's final test accuracy (averaged model), its distance to the
    group's dense run in points, and the replica divergence at the end."""
    lines = [*table_head(["optimizer", "run", "test accuracy, averaged model", "against dense (points)",
                          "replica divergence"])]
    for optimizer in ("momentum", "adam"):
        group = os.path.join(root, MOMENTS, f"mlp_p4_{optimizer}")
        _, dense_final, rows = group_rows(group, "mlp")
        for r in sorted(rows.values(), key=lambda r: (not r["reference"], r["config"])):
            if r.get("diverged"):
                lines.append(f"| {CONV_OPTIMIZERS[optimizer]} | {r['config']} | diverged | - | - |")
                continue
            gap = "" if r["reference"] else f"{100 * (r['final_averaged'] - dense_final):+.2f}"
            lines.append(f"| {CONV_OPTIMIZERS[optimizer]} | {r['config']} | {r['final_averaged']:.4f} | {gap} "
                         f"| {r.get('replica_divergence', 0):.2f} |")
    return lines + ["", source_line(MOMENTS, "`scripts/studies/convergence_study.sh --model mlp --ranks 4`, 3 epochs")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the study's --out directory")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--bytes", choices=("run", "steps"), default="run",
                    help="bytes per step: everything the run sent, the final average included (run, default), "
                         "or the training steps' traffic only (steps)")
    ap.add_argument("--dense", action="append", default=[], metavar="GROUP=RUN.jsonl",
                    help="a group without its own dense run takes a longer dense run's evaluations up to the "
                         "group's horizon (e.g. lstm_p2_sgd=results/convergence/lstm_p2_sgd/dense.jsonl)")
    args = ap.parse_args()
    references = {}
    for d in args.dense:
        group, sep, path = d.partition("=")
        if not sep or not os.path.isfile(path):
            sys.exit(f"convergence_report.py: error: --dense {d}: expected GROUP=an existing metrics file")
        references[group] = path
    if not os.path.isdir(args.dir):
        sys.exit(f"convergence_report.py: error: {args.dir} is not a directory")
    md = ["# A2SGD convergence study", ""]
    out = {}
    groups = sorted(g for g in os.listdir(args.dir) if os.path.isdir(os.path.join(args.dir, g)))
    for group in groups:
        model = group.split("_", 1)[0]
        if model not in MODELS:
            continue
        m = MODELS[model]
        target, dense_final, rows = group_rows(os.path.join(args.dir, group), model, references.get(group),
                                               args.bytes)
        if target is None:
            print(f"convergence_report.py: warning: {group}: no finished dense run; skipped", file=sys.stderr)
            continue
        out[group] = dict(target=target, target_rule=m["rule"], dense_final=dense_final, runs=rows)
        dense = next(r for r in rows.values() if r["reference"])
        md += [f"## {group}: target {m['label']} {format(target, m['fmt'])} ({m['rule']}, {dense['config']}); "
               f"{dense['config']} reaches it at step {dense['steps_to_target']:.0f}" if dense["steps_to_target"]
               else f"## {group}", ""]
        md += [*table_head(["configuration", "steps to target, averaged (x dense) / replica 0",
                            "final, averaged / replica 0", "best averaged", "replica divergence, end / max",
                            "bytes per step (x dense)", "steps run"])]
        order = sorted(rows.values(), key=lambda r: (not r["reference"], r.get("bytes_per_step") or 0, r["config"]))
        for r in order:
            note = " (diverged)" if r["diverged"] else ("" if r["finished"] else " (unfinished)")
            reach = "not reached" if r["steps_to_target"] is None else (
                f"{r['steps_to_target']:.0f} ({r['steps_vs_dense']:.2f}x)" if r["steps_vs_dense"] else
                f"{r['steps_to_target']:.0f}")
            rep = "-" if r["steps_to_target_replica"] is None else f"{r['steps_to_target_replica']:.0f}"
            f = lambda k: "-" if r.get(k) is None else format(r[k], m["fmt"])
            traffic = "-" if r.get("bytes_per_step") is None else (
                f"{r['bytes_per_step']:,.0f} ({r['traffic_vs_dense']:.2%})" if r.get("traffic_vs_dense") else
                f"{r['bytes_per_step']:,.0f}")
            div = "-" if r.get("replica_divergence") is None else f"{r['replica_divergence']:.3f} / {r['max_divergence']:.3f}"
            md.append(f"| {r['config']}{note} | {reach} / {rep} | {f('final_averaged')} / {f('final_replica')} | "
                      f"{f('best_averaged')} | {div} | {traffic} | {r.get('steps', r.get('last_step', '-'))} |")
        md.append("")
        # Dense sends no final average, so only the compressed runs tell which accounting they had.
        counted = {r["config"]: r["final_average_counted"] for r in rows.values()
                   if not r["config"].startswith("dense") and "final_average_counted" in r}
        older = sorted(c for c, whole in counted.items() if not whole)
        if args.bytes == "run" and older and len(older) < len(counted):
            text = (f"{group}: the bytes per step of {', '.join(older)} leave out the final average (their metrics "
                    "do not report it) while the others' include it; --bytes steps compares them like for like")
            print(f"convergence_report.py: warning: {text}", file=sys.stderr)
            md += [f"Note: {text}.", ""]
        if not args.no_plots:
            png = f"pareto_{group}.png"
            if plot(os.path.join(args.dir, png), f"{group}: steps to {m['label']} {format(target, m['fmt'])}", rows,
                    "(log)"):
                md += [f"![{group}]({png})", ""]
    if not out:
        sys.exit(f"convergence_report.py: error: no group with a finished dense run in {args.dir}")
    write_report(args.dir, "report", md, out)


if __name__ == "__main__":
    main()
