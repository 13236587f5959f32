"""Tables of a learning-rate sweep (scripts/studies/lr_sweep.sh) and the best rate of every method.

Reads DIR/<model>_p<ranks>_<optimizer>/<method>_lr<rate>/metrics.jsonl and writes DIR/report.md
and DIR/best.json. A cell is one model, rank count and optimizer; in it every method's runs are
scored by the averaged model (the one a user deploys) at the last evaluation: validation
perplexity for the language model (lower is better), test accuracy for the MLP (higher is better).
A run that diverged (a `diverged` record or a non-finite score) or did not finish counts as tried
and scores worst. A method's best rate is flagged `edge` when it is the smallest or largest rate
tried for it (a diverged rate beyond it counts as tried): the sweep has not shown that the best rate
lies inside the grid, so extend it.

best.json: {"<model>_p<ranks>_<optimizer>": {"<method>": {"lr": best rate, "score": its score,
"edge": bool, "tried": {rate: score or null}}}}.
"""
import argparse
import json
import math
import os
import re

from .plots import require
from .registry import figures, generator, source_line
from .runs import load_run
from .tables import table_head

CELL = re.compile(r"^(lstm|mlp)_p(\d+)_(sgd|momentum|adam)$")
RUN = re.compile(r"^(.+)_lr([0-9.e-]+)$")
SCORES = {"lstm": ("valid_perplexity_averaged", True, "validation perplexity of the averaged model", ".1f"),
          "mlp": ("test_accuracy_averaged", False, "test accuracy of the averaged model", ".4f")}


def score_run(path, model):
    """(score or None, status) of one run: status is ok, diverged or unfinished."""
    key, _, _, _ = SCORES[model]
    evals, summary, _, diverged = load_run(path)
    if diverged is not None:
        return None, "diverged"
    if summary is None:
        return None, "unfinished"
    value = summary.get(key, evals[-1].get(key) if evals else None)
    if value is None or not math.isfinite(value):
        return None, "diverged"
    return float(value), "ok"


def read_sweep(directory):
    """{cell: {method: {rate: (score, status)}}} with rates as floats."""
    cells = {}
    for cell in sorted(os.listdir(directory)):
        m = CELL.match(cell)
        if not m or not os.path.isdir(os.path.join(directory, cell)):
            continue
        model = m.group(1)
        for run in sorted(os.listdir(os.path.join(directory, cell))):
            r = RUN.match(run)
            metrics = os.path.join(directory, cell, run, "metrics.jsonl")
            if not r or not os.path.isfile(metrics):
                continue
            cells.setdefault(cell, {}).setdefault(r.group(1), {})[float(r.group(2))] = score_run(metrics, model)
    return cells


def best_rate(tried, lower):
    """(rate, score, edge) of the best finished run; None when none finished."""
    ok = {rate: s for rate, (s, status) in tried.items() if status == "ok"}
    if not ok:
        return None
    rate = min(ok, key=lambda k: ok[k]) if lower else max(ok, key=lambda k: ok[k])
    rates = sorted(tried)
    i = rates.index(rate)
    # The best is inside the grid when a rate was tried on both sides of it.
    edge = i == 0 or i == len(rates) - 1
    return rate, ok[rate], edge


def fmt_rate(rate):
    return f"{rate:g}"


def cell_table(cell, methods):
    """The Markdown lines of one cell: a row per method, a column per rate; and its best rates."""
    model = CELL.match(cell).group(1)
    _, lower, label, form = SCORES[model]
    rates = sorted({rate for tried in methods.values() for rate in tried})
    lines = [f"{label}; {'lower' if lower else 'higher'} is better.", "",
             *table_head(["method", *(f"lr {fmt_rate(r)}" for r in rates), "best"])]
    for method, tried in methods.items():
        b = best_rate(tried, lower)
        row = []
        for r in rates:
            if r not in tried:
                row.append("")
                continue
            s, status = tried[r]
            text = format(s, form) if status == "ok" else ("div" if status == "diverged" else "unf")
            row.append(f"**{text}**" if b and r == b[0] else text)
        tail = f"{fmt_rate(b[0])}{' (edge)' if b[2] else ''}" if b else "none finished"
        lines.append(f"| {method} | " + " | ".join(row) + f" | {tail} |")
    return lines


def best_rates(cells):
    """best.json's content (see the module's help)."""
    best = {}
    for cell, methods in cells.items():
        lower = SCORES[CELL.match(cell).group(1)][1]
        best[cell] = {}
        for method, tried in methods.items():
            b = best_rate(tried, lower)
            if b:
                best[cell][method] = dict(lr=b[0], score=b[1], edge=b[2],
                                          tried={fmt_rate(r): (s if st == "ok" else None)
                                                 for r, (s, st) in sorted(tried.items())})
    return best


def report(directory):
    cells = read_sweep(directory)
    if not cells:
        raise SystemExit(f"lr_sweep_report.py: no sweep runs under {directory} "
                         "(<model>_p<ranks>_<optimizer>/<method>_lr<rate>/metrics.jsonl)")
    lines = ["# Learning-rate sweep", "",
             "Generated by `reports/lr_sweep_report.py` from the runs in this folder "
             "(`scripts/studies/lr_sweep.sh`, docs/tuning.md). Each entry: the score of the averaged "
             "model at the run's last evaluation; **bold** the method's best rate; `div`: diverged; "
             "`unf`: did not finish; `edge`: the best rate is at the end of the grid.", ""]
    for cell, methods in cells.items():
        lines += [f"## {cell}", ""] + cell_table(cell, methods) + [""]
    best = best_rates(cells)
    with open(os.path.join(directory, "report.md"), "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(directory, "best.json"), "w") as f:
        json.dump(best, f, indent=1, sort_keys=True)
        f.write("\n")
    print("\n".join(lines))
    return best


def plot(directory, out=None):
    """DIR/<cell>.png (or OUT/<cell>.png): each method's final score against the learning rate (log
    axis), diverged rates marked at the top (or bottom) of the axis. Needs matplotlib."""
    plt = require("lr_sweep_report.py")
    import matplotlib.ticker
    paths = []
    for cell, methods in read_sweep(directory).items():
        model = CELL.match(cell).group(1)
        _, lower, label, _ = SCORES[model]
        fig, ax = plt.subplots(figsize=(6, 4))
        finite = [s for tried in methods.values() for s, st in tried.values() if st == "ok"]
        edge = (max(finite) if lower else min(finite)) if finite else 1.0
        for method, tried in sorted(methods.items()):
            rates = sorted(tried)
            ok = [(r, tried[r][0]) for r in rates if tried[r][1] == "ok"]
            line, = ax.plot([r for r, _ in ok], [s for _, s in ok], marker="o", label=method)
            bad = [r for r in rates if tried[r][1] == "diverged"]  # unfinished runs are left out
            if bad:
                ax.plot(bad, [edge] * len(bad), marker="x", linestyle="none", color=line.get_color())
        ax.set_xscale("log")
        if lower:
            ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
            axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(sorted({r for t in methods.values() for r in t}))
        ax.set_xlabel("learning rate")
        ax.set_ylabel(label.replace(" of the averaged model", ", averaged model"))
        diverged = any(st == "diverged" for t in methods.values() for _, st in t.values())
        ax.set_title(cell.replace("_", ", ") + (" (x: diverged)" if diverged else ""))
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out or directory, f"{cell}.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


# ---- the docs' blocks of this study (python3 -m reports docs) ----
SWEEP = "docs/results/lr-sweep"


def sweep_block(cell_name):
    def generate(root):
        cells = read_sweep(os.path.join(root, SWEEP))
        if cell_name not in cells:
            raise SystemExit(f"lr_sweep_report.py: {SWEEP}/{cell_name} holds no finished run")
        lines = cell_table(cell_name, cells[cell_name])
        return lines + ["", source_line(f"{SWEEP}/{cell_name}", "`python3 -m reports lr-sweep`'s table")]
    return generate


@generator("sweep-best", SWEEP)
def sweep_best(root):
    """Every cell's best rate per method, next to dense's best in the same cell."""
    cells = read_sweep(os.path.join(root, SWEEP))
    best = best_rates(cells)
    lines = [*table_head(["model, ranks, optimizer", "method", "best rate", "its score", "dense at its best rate",
                          "rates tried"])]
    def order(cell):  # model, then the rank count as a number (p16 after p8), then the optimizer
        m = CELL.match(cell)
        return m.group(1), int(m.group(2)), m.group(3)

    for cell in sorted(best, key=order):
        model = CELL.match(cell).group(1)
        form = SCORES[model][3]
        dense = best[cell].get("dense")
        for method in sorted(best[cell], key=lambda m: (m != "dense", m != "a2sgd", m)):
            b = best[cell][method]
            edge = " (edge of the grid)" if b["edge"] else ""
            ref = f"{format(dense['score'], form)} at {dense['lr']:g}" if dense else "not swept"
            lines.append(f"| {cell.replace('_', ', ')} | {method} | {b['lr']:g}{edge} | {format(b['score'], form)} "
                         f"| {ref} | {', '.join(b['tried'])} |")
    return lines + ["", source_line(SWEEP, "the best rate of every method in every cell")]


# One block per cell a sweep can fill (a cell folder whose block no document shows fails the check).
for _model, _optimizers in (("lstm", ("sgd", "adam")), ("mlp", ("sgd", "momentum", "adam"))):
    for _ranks in (2, 4, 8, 16, 32):
        for _optimizer in _optimizers:
            _cell = f"{_model}_p{_ranks}_{_optimizer}"
            generator("sweep-" + _cell.replace("_", "-"), f"{SWEEP}/{_cell}")(sweep_block(_cell))


figures(SWEEP, "lr_sweep_report.plot", lambda root, out: plot(os.path.join(root, SWEEP), out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("directory", help="the sweep's --out folder")
    ap.add_argument("--plots", action="store_true", help="also DIR/<cell>.png (matplotlib)")
    args = ap.parse_args()
    report(args.directory)
    if args.plots:
        for path in plot(args.directory):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
