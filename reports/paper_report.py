"""Time to a target validation perplexity for the runs of scripts/studies/paper_experiment.sh.

Reads DIR/<method>_<optimizer>.jsonl (a2sgd-train metrics) and writes DIR/report.md and
DIR/report.json: per optimizer, every run's final validation perplexity, bytes per step, measured
milliseconds per step (compute, compression, decode and update, communication), the steps and the
time each run needs to reach the target, measured at the run's own rank count and modelled for
p = 8, 32, 128 ranks at 10 and 100 Gb/s, and the ratios A2SGD : Top-K and A2SGD : QSGD.

Definitions (docs/results.md):
- the model scored is the averaged model (the one a2sgd-train's final checkpoint holds); rank 0's
  replica is listed next to it;
- target: dense's final validation perplexity x 1.1 for the same optimizer, or a stated --target;
- steps to target: linear interpolation of log perplexity between the last evaluation above the
  target and the first at or below it; "not reached" when no evaluation is at or below it;
- measured time: steps x the run's measured seconds per step (step_time_s, evaluations excluded);
- modelled time at p ranks and a link: steps x (compute + compression + decode/update + the
  alpha-beta communication time of the method's collectives at p, from the summary record), the
  decode/update time of allgather methods scaled by p / measured ranks (every rank decodes every
  rank's payload);
- ratio A2SGD : X = time(X) / time(A2SGD variant): how many times faster the A2SGD variant reaches
  the target; undefined when either never reaches it.
"""
import argparse
import os
import sys

from .registry import generator, source_line
from .runs import load_run, summary as run_summary, warmup_steps
from .tables import fmt, table_head, write_report
from .targets import steps_to_target

PROJECTIONS = [(p, g) for g in (10, 100) for p in (8, 32, 128)]


def load_runs(directory):
    """{optimizer: {method: run}} for every <method>_<optimizer>.jsonl in directory."""
    runs = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".jsonl") or "_" not in name:
            continue
        evals, summary, warnings, diverged = load_run(os.path.join(directory, name))
        method, optimizer = name[:-len(".jsonl")].rsplit("_", 1)
        runs.setdefault(optimizer, {})[method] = dict(evals=evals, summary=summary, warnings=warnings,
                                                      diverged=diverged)
    return runs


def modelled_step_seconds(summary, p, gbps):
    decode = summary["optimizer_s_per_step"]
    if summary.get("decode_scales_with_ranks"):
        decode *= p / summary["world_size"]
    return (summary["compute_s_per_step"] + summary["compress_s_per_step"] + decode +
            summary[f"modelled_comm_s_p{p}_{gbps}gbps"])


def method_rows(group, target):
    """Each run's final quality, steps to the target, step times and times to the target."""
    rows = {}
    for method in sorted(group):
        r = group[method]
        s, ev = r["summary"], r["evals"]
        row = dict(method=method, warnings=r["warnings"], diverged=r["diverged"] is not None)
        if ev:
            row.update(final_valid_averaged=ev[-1]["valid_perplexity_averaged"],
                       final_valid_replica=ev[-1]["valid_perplexity"],
                       replica_divergence=ev[-1]["replica_divergence"], last_eval_step=ev[-1]["step"])
        row["steps_to_target"] = steps_to_target(ev, "valid_perplexity_averaged", target)
        row["steps_to_target_replica"] = steps_to_target(ev, "valid_perplexity", target)
        if s:
            row.update(ranks=s["world_size"], bytes_per_step=s["bytes_per_step"],
                       step_ms=1e3 * s["step_time_s"], compute_ms=1e3 * s["compute_s_per_step"],
                       compress_ms=1e3 * s["compress_s_per_step"], decode_ms=1e3 * s["optimizer_s_per_step"],
                       comm_ms=1e3 * s["comm_s_per_step"])
            n = row["steps_to_target"]
            row["measured_s_to_target"] = None if n is None else n * s["step_time_s"]
            row["modelled_s_to_target"] = {
                f"p{p}_{g}gbps": (None if n is None else n * modelled_step_seconds(s, p, g)) for p, g in PROJECTIONS}
            row["modelled_step_ms"] = {f"p{p}_{g}gbps": 1e3 * modelled_step_seconds(s, p, g) for p, g in PROJECTIONS}
        rows[method] = row
    return rows


def speedups_to_target(rows):
    """Every A2SGD run against Top-K and QSGD, measured and modelled."""
    ratios = {}
    for a in sorted(m for m in rows if m.startswith("a2sgd")):
        for other in ("topk", "qsgd"):
            if other not in rows:
                continue
            ra, ro = rows[a], rows[other]
            entry = {"unreached": [m for m, rr in ((a, ra), (other, ro)) if rr.get("steps_to_target") is None]}
            if ra.get("measured_s_to_target") and ro.get("measured_s_to_target"):
                entry["measured"] = ro["measured_s_to_target"] / ra["measured_s_to_target"]
            else:
                entry["measured"] = None
            for key in ra.get("modelled_s_to_target", {}):
                ta, to = ra["modelled_s_to_target"][key], ro.get("modelled_s_to_target", {}).get(key)
                entry[key] = to / ta if ta and to else None
            ratios[f"{a}:{other}"] = entry
    return ratios


def paper_group_markdown(optimizer, target, why, rows, ratios):
    md = []
    md += [f"## {optimizer.upper()}: target validation perplexity {target:.1f} ({why})", ""]
    md += [*table_head(["run", "final valid ppl, averaged / replica 0", "replica divergence", "bytes per step",
                        "ms per step (compute + compress + decode + comm)", "steps to target, averaged / replica 0",
                        "measured time to target", "modelled, p = 32, 10 Gb/s", "p = 128, 10 Gb/s",
                        "p = 128, 100 Gb/s"])]
    for method, r in rows.items():
        note = " (diverged)" if r["diverged"] else (f" ({r['warnings']} divergence warnings)" if r["warnings"] else "")
        ms = (f"{r['step_ms']:.1f} ({r['compute_ms']:.1f} + {r['compress_ms']:.1f} + {r['decode_ms']:.1f} + "
              f"{r['comm_ms']:.1f})") if "step_ms" in r else "-"
        reach = lambda v: "not reached" if v is None else f"{v:.0f}"
        mod = r.get("modelled_s_to_target", {})
        md.append(
            f"| {method}{note} | {fmt(r.get('final_valid_averaged'), '.1f')} / {fmt(r.get('final_valid_replica'), '.1f')} "
            f"| {fmt(r.get('replica_divergence'), '.3f')} | {fmt(r.get('bytes_per_step'), ',.0f')} | {ms} "
            f"| {reach(r['steps_to_target'])} / {reach(r['steps_to_target_replica'])} "
            f"| {fmt(r.get('measured_s_to_target'), '.0f')} s | {fmt(mod.get('p32_10gbps'), '.0f')} s "
            f"| {fmt(mod.get('p128_10gbps'), '.0f')} s | {fmt(mod.get('p128_100gbps'), '.0f')} s |")
    md += ["", "Time-to-target ratios (how many times faster the A2SGD variant reaches the target; "
           "the paper reports 3.2x against Top-K and 23.2x against QSGD):", ""]
    keys = ["measured"] + [f"p{p}_{g}gbps" for p, g in PROJECTIONS]
    md += table_head(["ratio", "measured", *(k.replace("_", ", ").replace("gbps", " Gb/s") for k in keys[1:])])
    for name, entry in ratios.items():
        missing = "never reached by " + " and ".join(entry["unreached"]) if entry["unreached"] else "n/a"
        md.append(f"| {name.replace(':', ' : ')} | " +
                  " | ".join(missing if entry.get(k) is None else f"{entry[k]:.2f}x" for k in keys) + " |")
    md.append("")
    return md


# ---- the docs' blocks of this study (python3 -m reports docs): docs/results.md, 2 and 4 ranks ----
PAPER = "docs/results/paper"
# block prefix -> the experiment's folder at that rank count
PAPER_FOLDERS = {"paper": PAPER, "paper-p4": "docs/results/paper-p4"}
PAPER_LABELS = {"dense": "dense", "a2sgd": "A2SGD defaults", "a2sgd-pure": "A2SGD pure O(1)", "topk": "Top-K",
                "qsgd": "QSGD"}
OPTIMIZERS = {"sgd": "SGD", "adam": "Adam"}


def paper_groups(root, folder):
    runs = load_runs(os.path.join(root, folder))
    for optimizer in ("sgd", "adam"):
        group = runs.get(optimizer, {})
        if "dense" not in group or not group["dense"]["evals"]:
            raise SystemExit(f"paper_report.py: {folder} has no dense_{optimizer}.jsonl with evaluations")
        target = 1.1 * group["dense"]["evals"][-1]["valid_perplexity_averaged"]
        yield optimizer, group, target, method_rows(group, target)


def paper_perplexity(root, folder):
    lines, steps = [], None
    for optimizer, group, _, rows in paper_groups(root, folder):
        for method in PAPER_LABELS:
            if method in group:
                steps = steps or [e["step"] for e in group[method]["evals"]]
    head = ["run"] + [f"step {steps[0]}"] + [str(s) for s in steps[1:]] + [
        "final, rank 0's replica", "replica divergence, end", "divergence warnings"]
    lines += table_head(head)
    for optimizer, group, _, rows in paper_groups(root, folder):
        for method, label in PAPER_LABELS.items():
            if method not in group:
                continue
            ev = {e["step"]: e for e in group[method]["evals"]}
            cells = [f"{ev[s]['valid_perplexity_averaged']:.1f}" if s in ev else "" for s in steps]
            r = rows[method]
            lines.append(f"| {label}, {OPTIMIZERS[optimizer]} | " + " | ".join(cells) +
                         f" | {fmt(r.get('final_valid_replica'), '.1f')}"
                         f" | {fmt(r.get('replica_divergence'), '.3f')} | {r['warnings']} |")
    return lines + ["", source_line(folder, "validation perplexity of the averaged model at each evaluation")]


def paper_steps(root, folder):
    groups = list(paper_groups(root, folder))
    methods = [m for m in PAPER_LABELS if any(m in g for _, g, _, _ in groups)]
    lines = table_head(["", *(PAPER_LABELS[m] for m in methods)])
    dense_bytes = None
    for optimizer, group, target, rows in groups:
        dense_steps = rows["dense"]["steps_to_target"]
        cells = []
        for m in methods:
            n = rows.get(m, {}).get("steps_to_target")
            if m not in rows:
                cells.append("")
            elif n is None:
                cells.append("not reached")
            elif m == "dense":
                cells.append(f"{n:,.0f}")
            else:
                cells.append(f"{n:,.0f} ({n / dense_steps:.2f}x)")
        lines.append(f"| {OPTIMIZERS[optimizer]}: steps to {target:.1f} (x dense) | " + " | ".join(cells) + " |")
        dense_bytes = dense_bytes or rows["dense"].get("bytes_per_step")
    bytes_row = []
    _, _, _, rows = groups[0]
    for m in methods:
        b = rows.get(m, {}).get("bytes_per_step")
        if b is None:
            bytes_row.append("")
        elif m == "dense":
            bytes_row.append(f"{b:,.0f}")
        else:
            share = 100.0 * b / dense_bytes
            text = "< 0.01" if share < 0.01 else f"{share:.2f}" if share < 10 else f"{share:.0f}"
            bytes_row.append(f"{b:,.0f} ({text}%)")
    lines.append("| bytes per step and rank (x dense) | " + " | ".join(bytes_row) + " |")
    return lines + ["", source_line(folder, "target: dense's final x 1.1; steps interpolated on log perplexity")]


for _prefix, _folder in PAPER_FOLDERS.items():
    generator(f"{_prefix}-perplexity", _folder)(lambda root, folder=_folder: paper_perplexity(root, folder))
    generator(f"{_prefix}-steps", _folder)(lambda root, folder=_folder: paper_steps(root, folder))


# ---- A2SGD with Adam at 4 ranks: one exchange option changed at a time against its defaults ----
SCREENS = "docs/results/paper-p4/screens"
SCREEN_STEPS = (400, 800, 1200, 1400)
SCREEN_ADDED_DEFAULTS = {"a2sgd_state_at_average": "keep"}  # a2sgd-train --help


@generator("paper-p4-screens", SCREENS)
def paper_p4_screens(root):
    """Per screening run (SCREENS/<name>/a2sgd_adam.jsonl, scripts/studies/paper_experiment.sh --runs a2sgd_adam
    with one a2sgd-train option added): what differs from the run `defaults` (the summary's lr, its
    warm-up and a2sgd_* options), the averaged model's validation perplexity at fixed steps, the steps
    to the screens' Adam target (SCREENS/dense_adam.jsonl's final x 1.1: the 4-rank experiment's
    dense run of the screens' sittings, without the rate's warm-up) against dense's, the same
    against a dense run with the same change where the screen has one, and the traffic."""
    base = os.path.join(root, SCREENS)
    runs = {}
    for name in sorted(os.listdir(base)):
        path = os.path.join(base, name, "a2sgd_adam.jsonl")
        if os.path.isfile(path):
            evals, _, warnings, _ = load_run(path)
            summary = run_summary(path)
            runs[name] = (evals, {"lr_warmup_steps": warmup_steps(path, summary), **summary}, warnings)
    if "defaults" not in runs:
        raise SystemExit(f"paper_report.py: {SCREENS} has no run 'defaults' to compare the others with")
    dense = load_run(os.path.join(base, "dense_adam.jsonl"))[0]
    target = 1.1 * dense[-1]["valid_perplexity_averaged"]
    key = "valid_perplexity_averaged"
    dense_steps = steps_to_target(dense, key, target)
    # An option added to a2sgd-train after the defaults' run is missing from its summary: that run
    # had the option's default (SCREEN_ADDED_DEFAULTS), and a run that sets it shows as changed.
    ref = {**SCREEN_ADDED_DEFAULTS, **runs["defaults"][1]}
    options = sorted({k for _, s, _ in runs.values() for k in s if k.startswith("a2sgd_")}) + ["lr", "lr_warmup_steps"]
    lines = [f"Target: validation perplexity {target:.1f} (the 4-rank experiment's dense with Adam as it ran before "
             f"the rate's warm-up was the default, final x 1.1; dense reaches it at step {dense_steps:,.0f}).", "",
             *table_head(["run", "changed from the defaults", *(f"step {s}" for s in SCREEN_STEPS),
                          "steps to target (x dense)",
                          "the same change on dense: its target, its steps, A2SGD's (x)", "divergence warnings",
                          "bytes per step and rank (x dense)"])]
    for name in sorted(runs, key=lambda n: (n != "defaults", n)):
        evals, summary, warnings = runs[name]
        summary = {**SCREEN_ADDED_DEFAULTS, **summary}
        changed = [f"`--{k.replace('_', '-')} {summary.get(k)}`" for k in options if summary.get(k) != ref.get(k)]
        at = {e["step"]: e[key] for e in evals}
        cells = [f"{at[s]:.1f}" if s in at else "-" for s in SCREEN_STEPS]
        n = steps_to_target(evals, key, target)
        reach = f"not by {evals[-1]['step']}" if n is None else f"{n:,.0f} ({n / dense_steps:.2f}x)"
        # A change that is no exchange option (the rate's warm-up) may help dense as much: where the
        # screen also ran dense with it (SCREENS/<name>/dense_adam.jsonl, the experiment's 1200 steps),
        # A2SGD is measured against that dense run too.
        same = "-"
        dense_path = os.path.join(base, name, "dense_adam.jsonl")
        if os.path.isfile(dense_path):
            d_evals = load_run(dense_path)[0]
            d_target = 1.1 * d_evals[-1][key]
            d_steps = steps_to_target(d_evals, key, d_target)
            a_steps = steps_to_target(evals, key, d_target)
            same = (f"{d_target:.1f}, {d_steps:,.0f}, "
                    + (f"not by {evals[-1]['step']}" if a_steps is None else f"{a_steps:,.0f} ({a_steps / d_steps:.2f}x)"))
        share = 100.0 * summary["bytes_per_step"] / summary["dense_bytes_per_step"]
        lines.append(f"| {name} | {', '.join(changed) or '-'} | " + " | ".join(cells)
                     + f" | {reach} | {same} | {warnings} | {summary['bytes_per_step']:,.0f} ({share:.2f}%) |")
    return lines + ["", source_line(SCREENS, "`scripts/studies/paper_experiment.sh --ranks 4 --steps 1400 --eval-every 100 "
                                             "--runs a2sgd_adam --no-report -- --lr-warmup-steps 0 <option>`, one run "
                                             "per option, before the warm-up was the default; `lrwarmup200` with "
                                             "--lr-warmup-steps 200 instead")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="directory of the runs' .jsonl metrics")
    ap.add_argument("--target", action="append", default=[],
                    help="target validation perplexity: X for every optimizer, or OPTIMIZER=X (repeatable); "
                    "default: dense's final x 1.1")
    ap.add_argument("--name", default="report", help="output files DIR/NAME.md and DIR/NAME.json")
    args = ap.parse_args()
    targets = {}
    for t in args.target:
        key, _, value = t.rpartition("=")
        try:
            targets[key or "*"] = float(value)
        except ValueError:
            sys.exit(f"paper_report.py: error: --target {t}: not a number")

    runs = load_runs(args.dir)
    if not runs:
        sys.exit(f"paper_report.py: error: no <method>_<optimizer>.jsonl files in {args.dir}")

    md = ["# LSTM language model on Penn Treebank: time to target", ""]
    out = {}
    for optimizer in sorted(runs):
        group = runs[optimizer]
        dense = group.get("dense")
        stated = targets.get(optimizer, targets.get("*"))
        if stated is not None:
            target, why = stated, "stated"
        elif dense and dense["evals"]:
            target, why = 1.1 * dense["evals"][-1]["valid_perplexity_averaged"], "dense's final x 1.1"
        else:
            print(f"paper_report.py: warning: {optimizer}: no dense run and no --target; skipped", file=sys.stderr)
            continue
        rows = method_rows(group, target)
        ratios = speedups_to_target(rows)
        out[optimizer] = dict(target=target, target_rule=why, runs=rows, ratios=ratios)

        md += paper_group_markdown(optimizer, target, why, rows, ratios)

    write_report(args.dir, args.name, md, out)


if __name__ == "__main__":
    main()
