"""Time to a target over an emulated network: full runs on one node x step times measured across nodes.

Reads the full training runs in FULL (FULL/<run>.jsonl or FULL/<run>/metrics.jsonl: steps to the
target; or, with --full-run RUN=PATH, the run at PATH, relative to FULL: a timed run's full run from
a study whose runs are named otherwise, such as scripts/studies/convergence_study.sh's) and the timed runs
across emulated nodes in NET (NET/<run>.jsonl, from scripts/studies/cluster/timing.sh, with the same
options and rank count: a full run whose world size differs from its timed run's is refused with
exit 1), and writes NET/report.md and NET/report.json (docs/network.md; with --report NAME,
NET/NAME.md and NET/NAME.json, so that a report against a stated --target sits next to the
default one):

- target: lstm, dense's final validation perplexity x 1.1 of the averaged model (per optimizer:
  runs are named <method>_<optimizer>); mlp, dense's final test accuracy - 0.01; or --target;
- steps to target: from the full run (paper_report.steps_to_target: log-perplexity interpolation
  between evaluations; accuracy linearly);
- measured: steps to target x the step time measured over the network (step_time_s of the timed
  run: compute, compression, communication and update of every step, evaluations excluded);
- modelled: steps to target x (the timed run's compute + compression + update + the alpha-beta
  communication time on the link fitted to the same network, modelled_comm_s_per_step);
- ratio A : B = time(B) / time(A): how many times faster run A reaches the target.
"""
import argparse
import os
import sys

from .convergence_report import LSTM_DEFAULTS
from .registry import generator, source_line
from .runs import load_run, summary as run_summary, warmup_steps
from .tables import fmt, table_head, write_report
from .targets import steps_to_accuracy, steps_to_target

PAPER_RATIOS = {"topk": 3.2, "qsgd": 23.2}


def find_full(full, name):
    for path in (os.path.join(full, name + ".jsonl"), os.path.join(full, name, "metrics.jsonl")):
        if os.path.exists(path):
            return path
    return None


def split_name(name):
    method, _, optimizer = name.rpartition("_")
    return (method, optimizer) if method else (name, "default")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("full", help="directory of the full runs on one node")
    ap.add_argument("net", help="directory of the runs timed across emulated nodes")
    ap.add_argument("--model", choices=("lstm", "mlp"), default=None, help="default: from the runs")
    ap.add_argument("--target", action="append", default=[],
                    help="X for every optimizer or OPTIMIZER=X (repeatable); default: from dense's final")
    ap.add_argument("--full-run", action="append", default=[], metavar="RUN=PATH",
                    help="the full run of timed run RUN is FULL/PATH (a .jsonl or a run folder with metrics.jsonl; "
                         "repeatable)")
    ap.add_argument("--report", default="report", metavar="NAME",
                    help="write NET/NAME.md and NET/NAME.json (default: report)")
    args = ap.parse_args()
    if not args.report or os.sep in args.report or args.report.startswith("."):
        sys.exit(f"network_report.py: error: --report {args.report!r}: a plain file name is expected")
    args.stated = {}
    for t in args.target:
        key, _, value = t.rpartition("=")
        try:
            args.stated[key or "*"] = float(value)
        except ValueError:
            sys.exit(f"network_report.py: error: --target {t}: not a number")
    args.full_runs = parse_full_runs(args.full_run)
    return args


def parse_full_runs(items):
    """{run: path relative to FULL} of --full-run RUN=PATH, or exit 1 naming a malformed one."""
    runs = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            sys.exit(f"network_report.py: error: --full-run {item!r}: RUN=PATH expected")
        if name in runs:
            sys.exit(f"network_report.py: error: --full-run {name}: given twice")
        runs[name] = path
    return runs


def load_groups(args):
    """{optimizer: {method: dict(net=summary of the timed run, full=the full run or None, name)}}."""
    names = sorted(n[:-6] for n in os.listdir(args.net) if n.endswith(".jsonl"))
    if not names:
        sys.exit(f"network_report.py: error: no timed runs (*.jsonl) in {args.net}")
    groups = {}
    for name in names:
        method, optimizer = split_name(name)
        _, net_summary, _, _ = load_run(os.path.join(args.net, name + ".jsonl"))
        if name in args.full_runs:
            # A stated full run that is not there is an error, not "no full run": the table would
            # silently lose the run's time to the target.
            path = os.path.join(args.full, args.full_runs[name])
            if os.path.isdir(path):
                path = os.path.join(path, "metrics.jsonl")
            if not os.path.isfile(path):
                sys.exit(f"network_report.py: error: --full-run {name}={args.full_runs[name]}: no such run ({path})")
        else:
            path = find_full(args.full, name)
        full = load_run(path) if path else None
        # Steps to a target depend on the rank count (each step averages that many batches), so a
        # full run of another world size would give the timed run a wrong number of steps.
        full_ranks = full[1].get("world_size") if full and full[1] else None
        net_ranks = net_summary.get("world_size") if net_summary else None
        if full_ranks is not None and net_ranks is not None and full_ranks != net_ranks:
            sys.exit(f"network_report.py: error: {name}: the full run {path} has {full_ranks} ranks, the timed "
                     f"run {net_ranks}; steps to the target come from a full run at the timed run's rank count")
        groups.setdefault(optimizer, {})[method] = dict(net=net_summary, full=full, name=name)
    return groups


def choose_target(args, optimizer, runs, model, key):
    """The target and the rule that gave it, or (None, None) without a stated one or a dense run."""
    target = args.stated.get(optimizer, args.stated.get("*"))
    if target is not None:
        return target, "stated"
    dense = runs.get("dense", {}).get("full")
    if dense and dense[0]:
        final, steps = dense[0][-1][key], dense[0][-1]["step"]
        # The steps say which dense run set it: the experiments' horizons differ (docs/results.md).
        return ((1.1 * final, f"dense's final after its {steps:,} steps x 1.1") if model == "lstm"
                else (final - 0.01, f"dense's final after its {steps:,} steps - 0.01"))
    return None, None


def method_row(r, reach, key, target):
    """One run's step times over the network, steps to the target and times to it."""
    s = r["net"]
    row = dict(run=r["name"])
    steps = reach(r["full"][0], key, target) if r["full"] else None
    row["steps_to_target"] = steps
    row["full_run"] = r["full"] is not None
    if s:
        other = s["compute_s_per_step"] + s["compress_s_per_step"] + s["optimizer_s_per_step"]
        row.update(step_s=s["step_time_s"], comm_s=s["comm_s_per_step"], other_s=other,
                   bytes_per_step=s["bytes_per_step"], ranks=s["world_size"],
                   modelled_comm_s=s.get("modelled_comm_s_per_step"))
        if row["modelled_comm_s"] is not None:
            row["modelled_step_s"] = other + row["modelled_comm_s"]
        if steps is not None:
            row["measured_s"] = steps * s["step_time_s"]
            if "modelled_step_s" in row:
                row["modelled_s"] = steps * row["modelled_step_s"]
    return row


def speedups_over_network(rows):
    """Every A2SGD run against dense, Top-K, QSGD and PowerSGD (where timed): how many times faster to
    the target."""
    ratios = {}
    for a in sorted(m for m in rows if m.startswith("a2sgd")):
        for b in ("dense", "topk", "qsgd", "powersgd"):
            if b not in rows:
                continue
            entry = {}
            for kind in ("measured_s", "modelled_s"):
                ta, tb = rows[a].get(kind), rows[b].get(kind)
                entry[kind] = tb / ta if ta and tb else None
            entry["no_full_run"] = [m for m in (a, b) if not rows[m]["full_run"]]
            entry["unreached"] = [m for m in (a, b) if rows[m].get("steps_to_target") is None
                                  and m not in entry["no_full_run"]]
            ratios[f"{a}:{b}"] = entry
    return ratios


def network_group_markdown(optimizer, model, target, rule, rows, ratios):
    unit = "validation perplexity" if model == "lstm" else "test accuracy"
    md = [f"## {optimizer}: target {unit} {target:.4g} ({rule})", "",
          *table_head(["run", "steps to target (full run)", "ms per step over the network (comm)",
                       "modelled ms per step (comm)", "bytes per step", "time to target, measured", "modelled"])]
    for method in sorted(rows, key=lambda m: (m != "dense", m)):
        r = rows[method]
        st = "no full run" if not r["full_run"] else fmt(r["steps_to_target"], ".0f") if r[
            "steps_to_target"] is not None else "not reached"
        md.append(f"| {r['run']} | {st} | {fmt(1e3 * r['step_s'] if 'step_s' in r else None, '.1f')} "
                  f"({fmt(1e3 * r['comm_s'] if 'comm_s' in r else None, '.1f')}) | "
                  f"{fmt(1e3 * r['modelled_step_s'] if 'modelled_step_s' in r else None, '.1f')} "
                  f"({fmt(1e3 * r['modelled_comm_s'] if r.get('modelled_comm_s') is not None else None, '.1f')}) | "
                  f"{fmt(r.get('bytes_per_step'), ',.0f')} | {fmt(r.get('measured_s'), '.0f')} s | "
                  f"{fmt(r.get('modelled_s'), '.0f')} s |")
    md += ["", *table_head(["ratio (times faster to the target)", "measured", "modelled", "the paper"])]
    for name, e in ratios.items():
        a, b = name.split(":")
        why = "; ".join(([f"no full run of {' and '.join(e['no_full_run'])}"] if e.get("no_full_run") else [])
                        + ([f"not reached by {' and '.join(e['unreached'])}"] if e["unreached"] else [])) or "-"
        md.append(f"| {a} : {b} | {why if e['measured_s'] is None else format(e['measured_s'], '.2f') + 'x'} | "
                  f"{why if e['modelled_s'] is None else format(e['modelled_s'], '.2f') + 'x'} | "
                  f"{str(PAPER_RATIOS[b]) + 'x' if b in PAPER_RATIOS else '-'} |")
    md.append("")
    return md


def build_report(full, net, model=None, stated=None, full_runs=None):
    """(Markdown lines, {optimizer: report}) of the full runs in FULL against the timed runs in NET;
    full_runs: {timed run: its full run's path relative to FULL} (--full-run)."""
    args = argparse.Namespace(full=full, net=net, model=model, stated=dict(stated or {}),
                              full_runs=dict(full_runs or {}))
    link_file = os.path.join(net, "link.txt")
    link = open(link_file).read().strip() if os.path.exists(link_file) else "?"
    groups = load_groups(args)
    md = [f"# Time to target over the emulated network ({os.path.basename(os.path.normpath(net))})", "",
          f"Link fitted by a2sgd-netbench: {link} (GBIT_PER_S:ALPHA_US[:half]).", ""]
    out = {}
    for optimizer, runs in sorted(groups.items()):
        model = args.model or ("lstm" if any(r["net"] and "lstm" in r["net"].get("model", "") for r in runs.values())
                               else "mlp")
        key = "valid_perplexity_averaged" if model == "lstm" else "test_accuracy_averaged"
        reach = steps_to_target if model == "lstm" else steps_to_accuracy
        target, rule = choose_target(args, optimizer, runs, model, key)
        if target is None:
            print(f"network_report.py: warning: {optimizer}: no full dense run and no --target; skipped",
                  file=sys.stderr)
            continue
        rows = {method: method_row(r, reach, key, target) for method, r in runs.items()}
        ratios = speedups_over_network(rows)
        out[optimizer] = dict(target=target, target_rule=rule, link=link, runs=rows, ratios=ratios)
        md += network_group_markdown(optimizer, model, target, rule, rows, ratios)
    return md, out


# ---- the docs' blocks of this study (python3 -m reports docs): docs/network.md, results.md ----
# block: (full runs on one node: steps to the target, the runs timed across emulated nodes)
NETWORK_BLOCKS = {"network-lstm-p2": ("docs/results/paper", "docs/results/paper/network-250mbit-p2"),
                  "network-lstm-p4": ("docs/results/paper-p4", "docs/results/paper-p4/network-250mbit-p4-ring")}
# At 8 nodes the steps to the target come from the 8-rank convergence study (tuned dense and A2SGD's
# defaults, docs/convergence.md), whose runs are named by configuration: py --full-run.
# With Adam every method's run has the model's default warm-up of the rate (200 steps), dense's too.
P8_FULL_RUNS = {"dense_sgd": "lstm_p8_sgd/dense-lr40.jsonl",
                "a2sgd_sgd": f"lstm_p8_sgd/{LSTM_DEFAULTS['sgd']}.jsonl",
                "dense_adam": "lstm_p8_adam/dense-lr0.002-lrw200.jsonl",
                "a2sgd_adam": f"lstm_p8_adam/{LSTM_DEFAULTS['adam']}.jsonl"}
# The compressed baselines' full runs (SGD and Adam): the paper experiment at 8 ranks, each at its best
# rate of the 8-rank sweep, for A2SGD's 9 epochs (1,485 steps), next to the timed runs in docs/results/paper-p8/.
P8_OPTIMIZERS = ("sgd", "adam")
P8_FULL_RUNS.update({f"{method}_{optimizer}": f"../paper-p8/{method}_{optimizer}.jsonl"
                     for optimizer in P8_OPTIMIZERS for method in ("topk", "qsgd", "powersgd")})
P8_NAMES = {"dense": "dense", "a2sgd": "A2SGD's defaults", "topk": "Top-K", "qsgd": "QSGD", "powersgd": "PowerSGD"}


def paper_p8_block(optimizer):
    """docs/results.md: the 8-rank full runs with one optimizer (P8_FULL_RUNS): steps to tuned dense's
    final x 1.1 (log-interpolated) against dense's, the final perplexity and the amortised bytes per step."""
    def generate(root):
        key = "valid_perplexity_averaged"
        # The target and the steps to it as the network block has them (py).
        report = net_report(root, *NETWORK_BLOCKS["network-lstm-p8"])[optimizer]
        target, dense_steps = report["target"], report["runs"]["dense"]["steps_to_target"]
        runs = {}
        for name, rel in P8_FULL_RUNS.items():
            method, run_optimizer = name.rsplit("_", 1)
            if run_optimizer == optimizer:
                path = os.path.join(root, "docs/results/convergence", rel)
                summary = run_summary(path)
                runs[method] = (load_run(path)[0], summary, warmup_steps(path, summary))
        lines = table_head(["run", f"steps to {target:.1f} (x dense)", "final (steps run)",
                            "bytes per step and rank, amortised (x dense)"])
        for method in sorted(runs, key=lambda m: list(P8_NAMES).index(m)):
            evals, summary, warm = runs[method]
            n = report["runs"][method]["steps_to_target"]
            reach = f"not by {evals[-1]['step']}" if n is None else f"{n:,.0f} ({n / dense_steps:.2f}x)"
            amortised = summary["total_comm_bytes"] / summary["steps"]
            rate = f"lr {summary['lr']:g}" + (f" warmed up over {warm} steps" if warm else "")
            lines.append(f"| {P8_NAMES[method]}, {rate} | {reach} | {evals[-1][key]:.1f} "
                         f"({summary['steps']:,}) | {amortised:,.0f} "
                         f"({100 * amortised / summary['dense_bytes_per_step']:.2f}%) |")
        return lines + ["", f"_Generated by `python3 -m reports docs` from `docs/results/convergence/lstm_p8_{optimizer}/` "
                        "(dense, A2SGD) and `docs/results/paper-p8/` (the baselines)._"]
    return generate


for _optimizer in P8_OPTIMIZERS:
    generator(f"paper-p8-{_optimizer}", "docs/results/paper-p8")(paper_p8_block(_optimizer))


NETWORK_BLOCKS["network-lstm-p8"] = ("docs/results/convergence", "docs/results/paper-p8/network-250mbit-p8-ring",
                                     P8_FULL_RUNS)
# The MLP (docs/network.md): scripts/studies/compare_methods.sh's full runs at P ranks, each method then timed
# across P emulated nodes at three link rates (A2SGD_COMPARE_NETWORK=RATE, into the full runs' folder).
for _p in (2, 4):
    for _rate in ("100mbit", "1gbit", "none"):
        NETWORK_BLOCKS[f"network-mlp-p{_p}-{_rate}"] = (f"docs/results/mlp-methods-p{_p}",
                                                       f"docs/results/mlp-methods-p{_p}/network-{_rate}-p{_p}")


def network_block(full, net, full_runs=None):
    def generate(root):
        md, _ = build_report(os.path.join(root, full), os.path.join(root, net), full_runs=full_runs)
        lines = []
        for line in md[2:]:  # the report's title names a folder; the block's source line does that
            lines.append(f"**{line[3:]}**" if line.startswith("## ") else line)
        while lines and not lines[-1]:
            lines.pop()
        mapping = "".join(f" --full-run {k}={v}" for k, v in (full_runs or {}).items())
        return lines + ["", source_line(net, f"`python3 -m reports network {full} {net}{mapping}`: steps to the target "
                                             "from the full runs x the step timed over the network")]
    return generate


for _name, (_full, _net, *_runs) in NETWORK_BLOCKS.items():
    generator(_name, _net)(network_block(_full, _net, *_runs))


def net_report(root, full, net, full_runs=None):
    """build_report's per-optimizer results of a full-runs folder and a timed folder under ROOT."""
    return build_report(os.path.join(root, full), os.path.join(root, net), full_runs=full_runs)[1]


def main():
    args = parse_args()
    unknown = sorted(set(args.full_runs) - {n[:-6] for n in os.listdir(args.net) if n.endswith(".jsonl")}) \
        if os.path.isdir(args.net) else []
    if unknown:
        sys.exit(f"network_report.py: error: --full-run names runs that {args.net} has not timed: {', '.join(unknown)}")
    md, out = build_report(args.full, args.net, args.model, args.stated, args.full_runs)
    write_report(args.net, args.report, md, out)


if __name__ == "__main__":
    main()
