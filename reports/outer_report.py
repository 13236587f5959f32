"""The outer-optimizer study's tables (scripts/studies/outer_study.sh; docs/convergence.md, "Local SGD,
DiLoCo and A2SGD at equal bytes").

Reads DIR/<model>_p<ranks>_<optimizer>/<config>.jsonl, where <config> is a convergence_study.sh
name ending in -lr<X> (the screened rate) and, past seed 1, -s<N>. Per group (a cell):
- dense: the tuned rate's runs at every seed; its curve is the seeds' mean at each evaluation;
- the target is the model's rule applied to that mean curve's final value (mlp: - 0.01; lstm:
  x 1.1), and a method reaches it when the mean curve of its seeds does (interpolated as in
  convergence_report.py);
- every other configuration (its name without rate and seed) is shown at its best screened rate:
  the fewest steps to seed 1's dense target at seed 1, then the best final value;
- the spread: each seed's own steps to the target and final value (min - max).

Usage: outer_report.py DIR                 markdown tables of every cell to stdout
       outer_report.py --best GROUP BASE...  the best screened configuration of each BASE (one a line)
"""
import argparse
import math
import os
import re

from .convergence_report import MODELS
from .registry import generator, source_line
from .runs import load_run
from .tables import table_head

NAME = re.compile(r"^(?P<base>.+?)-lr(?P<lr>[0-9.e]+)(?P<rest>(?:-[a-z][a-z0-9.]*?)*?)(?:-s(?P<seed>[0-9]+))?$")


def parse_name(config):
    """(base, rate, seed) of a configuration name; base keeps any part after the rate."""
    m = NAME.match(config)
    if not m:
        return None
    return m.group("base") + m.group("rest"), m.group("lr"), int(m.group("seed") or 1)


def load_group(directory):
    """{(base, rate): {seed: run}} of a cell, each run {evals, summary}."""
    runs = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".jsonl"):
            continue
        parsed = parse_name(name[:-len(".jsonl")])
        if parsed is None:
            continue
        evals, summary, _, diverged = load_run(os.path.join(directory, name))
        if summary is None and diverged is None:
            continue  # still running (or stopped before its end): not a result yet
        base, rate, seed = parsed
        runs.setdefault((base, rate), {})[seed] = dict(evals=evals, summary=summary, diverged=diverged is not None,
                                                       name=re.sub(r"-s[0-9]+$", "", name[:-len(".jsonl")]))
    return runs


def model_of(directory):
    return os.path.basename(os.path.normpath(directory)).split("_")[0]


def mean_curve(seeds, key):
    """The seeds' mean at every evaluation step they all have (finished runs only), or []."""
    runs = [r for r in seeds.values() if r["summary"] and r["evals"]]
    if not runs:
        return []
    steps = sorted(set.intersection(*({e["step"] for e in r["evals"]} for r in runs)))
    by_step = [{e["step"]: e[key] for e in r["evals"]} for r in runs]
    return [{"step": s, key: sum(b[s] for b in by_step) / len(by_step)} for s in steps]


def final(run, key):
    return run["evals"][-1][key] if run["evals"] else None


def score(run, key, target, m):
    """Sort key of a screened run: fewest steps to the target, then the best final value."""
    steps = m["reach"](run["evals"], key, target) if run["summary"] else None
    last = final(run, key) if run["summary"] else None
    if last is None or not math.isfinite(last):
        return (math.inf, math.inf)
    return (steps if steps is not None else math.inf, last if m["lower"] else -last)


def _is_dense(base):
    return base.split("-")[0] == "dense"


def dense_key(runs):
    keys = [k for k in runs if _is_dense(k[0])]
    if len(keys) != 1:
        raise SystemExit(f"outer_report.py: expected one tuned dense rate in the cell, found {len(keys)}")
    return keys[0]


def best_rates(runs, bases, m):
    """The best screened (base, rate) for each base, judged at seed 1 against seed 1's dense."""
    key = m["key"] + "_averaged"
    dense = runs[dense_key(runs)].get(1)
    if not dense or not dense["summary"]:
        raise SystemExit("outer_report.py: the cell has no finished dense run at seed 1")
    target = m["target"](final(dense, key))
    chosen = {}
    for base in bases:
        candidates = [(score(seeds[1], key, target, m), k) for k, seeds in runs.items() if k[0] == base and 1 in seeds]
        if candidates:
            chosen[base] = min(candidates)[1]
    return chosen


def cell_rows(directory):
    """The rows of a cell: dense first, then each configuration at its best rate."""
    m = MODELS[model_of(directory)]
    key = m["key"] + "_averaged"
    runs = load_group(directory)
    dk = dense_key(runs)
    dense_curve = mean_curve(runs[dk], key)
    if not dense_curve:
        return None
    target = m["target"](dense_curve[-1][key])
    dense_steps = m["reach"](dense_curve, key, target)
    dense_bytes = next(r["summary"]["bytes_per_step"] for r in runs[dk].values() if r["summary"])
    bases = sorted({k[0] for k in runs if not _is_dense(k[0])})
    rows = [dict(config=_config_name(runs[dk]), **_row(runs[dk], key, target, dense_steps, dense_bytes, m))]
    for base, best in sorted(best_rates(runs, bases, m).items()):
        rows.append(dict(config=_config_name(runs[best]), **_row(runs[best], key, target, dense_steps, dense_bytes, m)))
    return dict(target=target, dense_steps=dense_steps, rows=rows, rule=m["rule"], fmt=m["fmt"])


def _config_name(seeds):
    """The configuration's name as its runs are called (without the seed)."""
    return next(iter(seeds.values()))["name"]


def _row(seeds, key, target, dense_steps, dense_bytes, m):
    done = {s: r for s, r in seeds.items() if r["summary"]}
    curve = mean_curve(done, key)
    steps = m["reach"](curve, key, target) if curve else None
    per_seed = [m["reach"](r["evals"], key, target) for r in done.values()]
    finals = [final(r, key) for r in done.values()]
    # Everything the run sent (steps, averages, the final average), per step.
    sent = [r["summary"]["total_comm_bytes"] / r["summary"]["steps"] for r in done.values()]
    return dict(seeds=sorted(done), steps=steps, ratio=None if steps is None or not dense_steps else steps / dense_steps,
                per_seed=per_seed, final=curve[-1][key] if curve else None, finals=finals,
                bytes_share=(sum(sent) / len(sent)) / dense_bytes if sent and dense_bytes else None,
                diverged=sum(r["diverged"] for r in seeds.values()))


def _steps_text(row, dense_steps):
    if row["steps"] is None:
        return "not reached"
    reached = [s for s in row["per_seed"] if s is not None]
    spread = (f"; seeds {min(reached) / dense_steps:.2f}-{max(reached) / dense_steps:.2f}x" if reached and dense_steps
              else "")
    missed = len(row["per_seed"]) - len(reached)
    spread += f", {missed} seed{'s' if missed > 1 else ''} not reached" if missed else ""
    return f"{row['steps']:,.0f} ({row['ratio']:.2f}x{spread})"


def cell_markdown(title, cell):
    f = cell["fmt"]
    rule = cell["rule"].replace("dense's final", "dense's mean final")
    lines = [f"**{title}**: target {cell['target']:{f}} ({rule})", "",
             *table_head(["configuration (best rate)", "seeds", "steps to target (x dense; each seed)",
                          "final, mean (seeds' range)", "bytes (x dense)"])]
    for row in cell["rows"]:
        finals = [x for x in row["finals"] if x is not None]
        final_text = "-" if row["final"] is None else (
            f"{row['final']:{f}} ({min(finals):{f}}-{max(finals):{f}})" if len(finals) > 1 else f"{row['final']:{f}}")
        share = "-" if row["bytes_share"] is None else f"{100 * row['bytes_share']:.2f}%"
        seeds = ",".join(map(str, row["seeds"])) + (f" ({row['diverged']} diverged)" if row["diverged"] else "")
        lines.append(f"| {row['config']} | {seeds} | {_steps_text(row, cell['dense_steps'])} | {final_text} | {share} |")
    return "\n".join(lines)


def _cells(directory, model):
    """The cell folders of a model, in the tables' order."""
    for name in sorted(os.listdir(directory), key=_cell_order):
        if os.path.isdir(os.path.join(directory, name)) and name.count("_") == 2 and name.split("_")[0] == model:
            yield name


def report(directory, model="mlp"):
    out = []
    for name in _cells(directory, model):
        cell = cell_rows(os.path.join(directory, name))
        if cell:
            _, ranks, optimizer = name.split("_")
            out.append(cell_markdown(f"{model.upper()}, {ranks[1:]} ranks, {optimizer}", cell))
    return "\n\n".join(out)


def _ratio_text(row):
    if row is None:
        return "-"
    if row["ratio"] is None:
        return "not reached"
    reached = [x for x in row["per_seed"] if x is not None]
    return f"{row['ratio']:.2f}x" + (f" ({len(row['per_seed']) - len(reached)} of {len(row['per_seed'])} seeds not)"
                                    if len(reached) < len(row["per_seed"]) else "")


def verdict(directory):
    """One line per cell: A2SGD before the study, A2SGD's defaults now (the outer step), local SGD at
    the same bytes, local SGD with the outer step; steps to the target as multiples of dense's."""
    lines = [*table_head(["cell (MLP)", "A2SGD before (pure with SGD; every 100 otherwise)",
                          "A2SGD's defaults now (every 100, outer Nesterov)", "local SGD, the same bytes",
                          "local SGD + outer Nesterov (DiLoCo), the same bytes",
                          "A2SGD's defaults against the better local SGD"])]
    for name in _cells(directory, "mlp"):
        path = os.path.join(directory, name)
        cell = cell_rows(path)
        if not cell:
            continue
        by_base = {parse_name(r["config"])[0]: r for r in cell["rows"]}
        _, ranks, optimizer = name.split("_")
        before = by_base.get("a2sgd" if optimizer == "sgd" else "a2sgd-k100")
        now, local, diloco = by_base.get("a2sgd-k100-diloco"), by_base.get("local-k100"), by_base.get(
            "local-k100-diloco")
        best_local = min((r for r in (local, diloco) if r and r["steps"] is not None), key=lambda r: r["steps"],
                         default=None)
        if now and now["steps"] is not None and best_local:
            against = (f"A2SGD {best_local['steps'] / now['steps']:.2f}x faster" if now["steps"] <= best_local["steps"]
                       else f"local SGD {now['steps'] / best_local['steps']:.2f}x faster")
        elif now and now["steps"] is not None:
            against = "only A2SGD reaches the target"
        else:
            against = "A2SGD does not reach the target" + ("" if best_local else "; neither does local SGD")
        lines.append(f"| {ranks[1:]} ranks, {optimizer} | {_ratio_text(before)} | {_ratio_text(now)} | "
                     f"{_ratio_text(local)} | {_ratio_text(diloco)} | {against} |")
    return "\n".join(lines)


def verdict_lstm(directory):
    """One line per language-model cell: A2SGD's defaults, with the outer step, local SGD at the same
    period with and without it, and local SGD at the whole budget; steps to the target as multiples
    of dense's ("-": not run yet)."""
    lines = [*table_head(["cell (LSTM)", "A2SGD's defaults (every 200)", "A2SGD + outer Nesterov",
                          "local SGD every 200 (the same bytes)", "local SGD every 200 + outer Nesterov (DiLoCo)",
                          "local SGD every 100 (the 1% budget)"])]
    for name in _cells(directory, "lstm"):
        cell = cell_rows(os.path.join(directory, name))
        if not cell:
            continue
        _, ranks, optimizer = name.split("_")
        warm = "-lrw200" if optimizer == "adam" else ""
        by_base = {parse_name(r["config"])[0]: r for r in cell["rows"]}
        bases = ("a2sgd-layer-k200-hold", "a2sgd-layer-k200-hold-diloco", "local-k200", "local-k200-diloco",
                 "local-k100")
        row = []
        for b in bases:
            r = by_base.get(b + warm)
            text = _ratio_text(r)
            if r is not None and r["ratio"] is None and r["final"] is not None:
                text += f" (final {r['final']:{cell['fmt']}})"
            row.append(text)
        lines.append(f"| {ranks[1:]} ranks, {optimizer} | " + " | ".join(row) + " |")
    return "\n".join(lines)


NETWORK_CONFIGS = {
    "mlp": (("dense", "dense"), ("a2sgd-k100-diloco", "A2SGD's defaults"), ("local-k100", "local SGD"),
            ("local-k100-diloco", "local SGD + outer Nesterov")),
    "lstm": (("dense", "dense"), ("a2sgd-layer-k200-hold", "A2SGD's defaults"), ("local-k200", "local SGD")),
}
NETWORK_OPTIMIZERS = {"mlp": ("sgd", "momentum", "adam"), "lstm": ("sgd", "adam")}


def network_table(directory, rate, model="mlp"):
    """A model's cells' time to the target over P emulated nodes at `rate` (outer_network.sh): each
    configuration's steps to the target (the mean of its seeds, at its best rate) times its step
    timed over the network (DIR/network-<rate>-p<P>/<config>_<optimizer>.jsonl)."""
    configs = NETWORK_CONFIGS[model]
    a2sgd, locals_ = configs[1][0], [base for base, _ in configs[2:]]
    lines = table_head(["nodes, optimizer", *(f"{label}: ms per step, time to target" for _, label in configs),
                        "A2SGD's time : the faster local SGD's"])
    found = False
    for name in sorted(os.listdir(directory), key=lambda n: (len(n), n)):
        m = re.fullmatch(rf"network-{re.escape(rate)}-p([0-9]+)", name)
        if not m:
            continue
        p = int(m.group(1))
        for optimizer in NETWORK_OPTIMIZERS[model]:
            cell_dir = os.path.join(directory, f"{model}_p{p}_{optimizer}")
            if not os.path.isdir(cell_dir):
                continue
            cell = cell_rows(cell_dir)
            if not cell:
                continue
            # A learning-rate warm-up (-lrw<K>) changes no work and no byte of a step.
            by_base = {re.sub(r"-lrw[0-9]+$", "", parse_name(r["config"])[0]): r for r in cell["rows"]}
            by_base["dense"] = cell["rows"][0]
            times, cells, steps = {}, [], {}
            for base, _ in configs:
                path = os.path.join(directory, name, f"{base}_{optimizer}.jsonl")
                row = by_base.get(base)
                if not os.path.exists(path) or row is None:
                    cells.append("-")
                    continue
                _, summary, _, _ = load_run(path)
                step = summary["step_time_s"] if summary else None
                if step is None:
                    cells.append("-")
                    continue
                found = True
                steps[base] = step
                if row["steps"] is None:
                    cells.append(f"{1e3 * step:.2f} ms, not reached")
                    continue
                times[base] = row["steps"] * step
                ratio = f" ({times[base] / times['dense']:.2f}x dense)" if "dense" in times and base != "dense" else ""
                cells.append(f"{1e3 * step:.2f} ms, {times[base]:.2f} s{ratio}")
            local = [times[b] for b in locals_ if b in times]
            if a2sgd in times and local:
                verdict = f"{times[a2sgd] / min(local):.2f}"
            elif local:
                verdict = "A2SGD does not reach the target"
            elif a2sgd in times:
                verdict = "local SGD does not reach the target"
                _NETWORK_ONLY_A2SGD.setdefault((directory, rate, model), []).append((p, optimizer))
            else:
                verdict = "-"
            lines.append(f"| {p}, {optimizer} | " + " | ".join(cells) + f" | {verdict} |")
            if a2sgd in times and local:
                _NETWORK_RATIOS.setdefault((directory, rate, model), []).append(
                    (p, optimizer, times[a2sgd] / min(local), times[a2sgd] / times["dense"],
                     steps[a2sgd] / steps[locals_[0]]))
    return "\n".join(lines) if found else ""


_NETWORK_RATIOS = {}
_NETWORK_ONLY_A2SGD = {}  # the cells where A2SGD reaches the target and local SGD does not


def network_ratios(directory, rate, model="mlp"):
    """[(nodes, optimizer, A2SGD's time : the faster local SGD's, A2SGD's time : dense's, A2SGD's step : local
    SGD's)] of network_table, for the cells where both reach the target."""
    _NETWORK_RATIOS.pop((directory, rate, model), None)
    _NETWORK_ONLY_A2SGD.pop((directory, rate, model), None)
    network_table(directory, rate, model)
    return _NETWORK_RATIOS.get((directory, rate, model), [])


def network_only_a2sgd(directory, rate, model="mlp"):
    """[(nodes, optimizer)] of network_table's cells where only A2SGD reaches the target."""
    network_ratios(directory, rate, model)
    return _NETWORK_ONLY_A2SGD.get((directory, rate, model), [])


def _cell_order(name):
    parts = name.split("_")
    if len(parts) != 3:
        return (name, 0, 0)
    return (parts[0], int(parts[1][1:]) if parts[1][1:].isdigit() else 0,
            ["sgd", "momentum", "adam"].index(parts[2]) if parts[2] in ("sgd", "momentum", "adam") else 9)


# ---- the docs' blocks of this study (python3 -m reports docs) ----
OUTER = "docs/results/outer"


@generator("outer-study-mlp", OUTER)
def outer_study_mlp(root):
    return _outer_study(root, "mlp", "`python3 -m reports outer`; runs: `scripts/studies/outer_study.sh`")


def _outer_study(root, model, command):
    """A model's cells of the outer-optimizer study, one table each (report)."""
    text = report(os.path.join(root, OUTER), model)
    if not text:
        raise SystemExit(f"outer_report.py: no finished {model} cell in {OUTER}")
    return text.split("\n") + ["", source_line(OUTER, command)]


@generator("outer-verdict-mlp", OUTER)
def outer_verdict_mlp(root):
    return verdict(os.path.join(root, OUTER)).split("\n") + [
        "", source_line(OUTER, "`python3 -m reports outer --verdict`: steps to tuned dense's mean final test accuracy "
                               "- 1 point, as multiples of dense's, each configuration at its best rate, mean of "
                               "3 seeds")]



@generator("outer-study-lstm", OUTER)
def outer_study_lstm(root):
    return _outer_study(root, "lstm", "`python3 -m reports outer --model lstm`; runs: `scripts/studies/outer_study.sh "
                                      "--model lstm`; only finished runs")


@generator("outer-verdict-lstm", OUTER)
def outer_verdict_lstm(root):
    return verdict_lstm(os.path.join(root, OUTER)).split("\n") + [
        "", source_line(OUTER, "`python3 -m reports outer --verdict --model lstm`: steps to tuned dense's final "
                               "validation perplexity x 1.1, as multiples of dense's, seed 1; -: not run yet")]


@generator("outer-network-mlp", OUTER)
def outer_network_mlp(root):
    text = network_table(os.path.join(root, OUTER), "100mbit")
    if not text:
        raise SystemExit(f"docs_blocks.py: no timed run in {OUTER}/network-100mbit-p<P>/")
    return text.split("\n") + ["", source_line(OUTER, "`python3 -m reports outer --network 100mbit`: the study's "
                                                     "steps to the target, mean of 3 seeds, x the step timed over "
                                                     "P emulated nodes at 100 Mbit/s; runs: `scripts/studies/outer_network.sh`")]


@generator("outer-network-lstm", OUTER)
def outer_network_lstm(root):
    text = network_table(os.path.join(root, OUTER), "250mbit", "lstm")
    if not text:
        raise SystemExit(f"docs_blocks.py: no timed run in {OUTER}/network-250mbit-p<P>/")
    return text.split("\n") + ["", source_line(OUTER, "`python3 -m reports outer --model lstm --network 250mbit`: the "
                                                     "study's steps to the target, seed 1, x the step timed over P "
                                                     "emulated nodes at 250 Mbit/s; runs: `scripts/studies/"
                                                     "outer_network.sh --model lstm`")]


# ---- the README's verdict: where A2SGD pays and where it does not, each figure from its study ----


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directory")
    ap.add_argument("bases", nargs="*")
    ap.add_argument("--best", action="store_true", help="print the best screened configuration of each base")
    ap.add_argument("--verdict", action="store_true", help="print the one-line-per-cell verdict table")
    ap.add_argument("--model", default="mlp", choices=("mlp", "lstm"), help="the model whose cells to report")
    ap.add_argument("--network", metavar="RATE", help="print the model's cells' time to the target over the emulated "
                                                      "network at RATE (scripts/studies/outer_network.sh's runs)")
    a = ap.parse_args()
    if a.best:
        runs = load_group(a.directory)
        chosen = best_rates(runs, a.bases, MODELS[model_of(a.directory)])
        missing = [b for b in a.bases if b not in chosen]
        if missing:
            raise SystemExit(f"outer_report.py: no screened run at seed 1 of {', '.join(missing)} in {a.directory}")
        for base in a.bases:
            print(f"{base}-lr{chosen[base][1]}")
        return
    if a.network:
        print(network_table(a.directory, a.network, a.model))
    elif a.verdict:
        print(verdict(a.directory) if a.model == "mlp" else verdict_lstm(a.directory))
    else:
        print(report(a.directory, a.model))


if __name__ == "__main__":
    main()
