"""The generated blocks of README.md and docs/*.md: tables recomputed from the committed runs.

A block sits between two markers in the Markdown:

    <!-- generated: NAME -->
    ... (what the generator NAME writes from its data folder) ...
    <!-- end generated: NAME -->

Every generator below reads only committed data under docs/results/ (its data folder is named in
the block's first line), so anyone with a clone recomputes every published table.

    docs_blocks.py ROOT --write          rewrite every block in place (after new runs landed)
    docs_blocks.py ROOT --check OUTDIR   regenerate every document into OUTDIR (the build tree) and
                                         fail, naming each block, where a committed block differs
    docs_blocks.py ROOT --list           every block and figure of the docs: its data folder and the code behind it
    docs_blocks.py ROOT --check OUTDIR --plots
                                         also redraw the plots of the data folders below into
                                         OUTDIR/<folder>/ (matplotlib; not compared pixel for
                                         pixel) and fail where a document shows a plot of such a
                                         folder that its data does not redraw

A marker naming no generator, a block opened and not closed, or a generator whose data folder is
committed but whose block stands in no document is an error too (exit 1); --check prints a unified diff of every differing block.
"""
import argparse
import difflib
import os
import re
import sys

# Every study module registers its blocks (registry.py) when imported; the figures' drawers below
# name theirs.
from . import (convergence_report, diagnostics_report, lr_sweep_report, methods_report,  # noqa: F401
               network_model_report, network_report, outer_report, paper_report, plot_bench, plot_metrics,
               pytorch_report, scaling_report, summary_report)
from .registry import FIGURES, GENERATORS, generator, source_line
from .tables import markdown_table

BEGIN = re.compile(r"^<!-- generated: ([a-z0-9-]+) -->$")
END = re.compile(r"^<!-- end generated: ([a-z0-9-]+) -->$")


# ---- plots: every data folder's drawer, registered by its study module (registry.figures) ----
PLOTS = FIGURES
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)]+\.png)\)")


def check_plots(root, outdir):
    """Redraws every data folder's plots into outdir; returns the errors (plots shown by a document
    that the data does not redraw)."""
    errors = []
    for folder, (_, draw) in PLOTS.items():
        out = os.path.join(outdir, folder)
        os.makedirs(out, exist_ok=True)
        try:
            draw(root, out)
        except Exception as e:  # a plot that cannot be drawn from the committed data
            errors.append(f"the plots of {folder}/ cannot be redrawn: {e}")
    for path in documents(root):
        for target in IMAGE.findall(open(path).read()):
            shown = os.path.normpath(os.path.join(os.path.dirname(os.path.relpath(path, root)), target))
            folder = next((f for f in PLOTS if shown.startswith(f + os.sep)), None)
            if folder and not os.path.exists(os.path.join(outdir, shown)):
                errors.append(f"{os.path.relpath(path, root)} shows {shown}, which {folder}/'s data does not redraw")
    return errors


# ---- the blocks in the documents ----
def documents(root):
    docs = [os.path.join(root, "README.md")]
    docs += sorted(os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    return docs + [os.path.join(root, RESULTS, "README.md")]


# ---- docs/results/README.md: every results folder, its driver, its report and what it feeds ----
RESULTS = "docs/results"
# folder under docs/results -> (the driver that fills it, the report that reads it: python3 -m reports ...)
FOLDERS = {
    "bench": ("`benchmarks/kernel_bench.sh`", "`docs` (plot_bench.bench_kernels: medians of the runs)"),
    "convergence": ("`scripts/studies/convergence_study.sh`", "`convergence`"),
    "diagnostics": ("`a2sgd-train --diagnostics-every` (docs/results.md's command)", "`docs` (diagnostics_report)"),
    "lr-sweep": ("`scripts/studies/lr_sweep.sh`", "`lr-sweep`"),
    "mlp-methods-p2": ("`scripts/studies/compare_methods.sh`", "`docs` (methods_report); `network` (its network-*/ timings)"),
    "mlp-methods-p4": ("`scripts/studies/compare_methods.sh`", "`network` (its network-*/ timings)"),
    "moments": ("`scripts/studies/convergence_study.sh --model mlp`", "`convergence` (its moments block)"),
    "network": ("`scripts/studies/network_study.sh`; links-check/: `scripts/studies/cluster/links_check.sh`",
                "`network-model`"),
    "outer": ("`scripts/studies/outer_study.sh`; network-*/: `scripts/studies/outer_network.sh`", "`outer`"),
    "paper": ("`scripts/studies/paper_experiment.sh`", "`paper`, `metrics-plots`, `network`"),
    "paper-p4": ("`scripts/studies/paper_experiment.sh --ranks 4`", "`paper`, `metrics-plots`, `network`"),
    "paper-p8": ("`scripts/studies/paper_experiment.sh` (timings over 8 emulated nodes)", "`network`"),
    "pytorch": ("`examples/torch/*.py`, `benchmarks/torch/hook_compute.py`, `benchmarks/torch/compare_pytorch_ddp.sh`, "
                "`benchmarks/torch/ddp_network.sh` (network/)",
                "`docs` (pytorch_report)"),
    "scaling": ("`scripts/studies/scaling_projection.sh`", "`scaling`"),
}


@generator("results-map", RESULTS)
def results_map(root):
    """Per folder of docs/results: its driver, its report, and the blocks and figures of the docs
    computed from it (read from the documents' markers and images)."""
    folders = sorted(d for d in os.listdir(os.path.join(root, RESULTS)) if os.path.isdir(os.path.join(root, RESULTS, d)))
    missing = [d for d in folders if d not in FOLDERS]
    if missing:
        raise SystemExit(f"docs_blocks.py: docs/results/{missing[0]}/ has no driver and report in FOLDERS")
    used = {d: {} for d in folders}  # folder -> {document: [what it feeds there]}
    for path in documents(root)[:-1]:
        rel = os.path.relpath(path, root)
        for part in split_blocks(path)[0]:
            if part[0] == "block" and part[1] in GENERATORS:
                data = GENERATORS[part[1]][1]
                top = os.path.relpath(data, RESULTS).split(os.sep)[0] if data.startswith(RESULTS + "/") else None
                if top in used:
                    used[top].setdefault(rel, []).append(f"`{part[1]}`")
        figures = set()
        for target in IMAGE.findall(open(path).read()):
            shown = os.path.normpath(os.path.join(os.path.dirname(rel), target))
            if shown.startswith(RESULTS + "/"):
                figures.add(os.path.relpath(shown, RESULTS).split(os.sep)[0])
        for top in sorted(figures & set(used)):
            used[top].setdefault(rel, []).append("figures")
    rows = []
    for d in folders:
        driver, report = FOLDERS[d]
        fed = "; ".join(f"[{doc}](../../{doc}): {', '.join(what)}" for doc, what in used[d].items())
        rows.append([f"[`{d}/`]({d}/)", driver, report, fed or "-"])
    lines = markdown_table(["folder", "driver", "report (`python3 -m reports ...`)", "blocks and figures it feeds"], rows)
    return lines + ["", source_line(RESULTS, "the folders, `FOLDERS` in reports/docs_blocks.py, and the documents' "
                                             "markers and images")]


def split_blocks(path):
    """[(text or (name, old lines))]: the document cut into plain lines and blocks."""
    parts, current, name, errors = [], [], None, []
    for number, line in enumerate(open(path).read().split("\n"), 1):
        b, e = BEGIN.match(line), END.match(line)
        if b:
            if name:
                errors.append(f"{path}:{number}: block '{name}' is not closed before block '{b.group(1)}' opens")
            parts.append(("text", current + [line]))
            current, name = [], b.group(1)
        elif e:
            if e.group(1) != name:
                errors.append(f"{path}:{number}: 'end generated: {e.group(1)}' closes no open block of that name")
                continue
            parts.append(("block", name, current))
            current, name = [line], None
        else:
            current.append(line)
    if name:
        errors.append(f"{path}: block '{name}' is not closed")
    parts.append(("text", current))
    return parts, errors


def render(root, path, cache):
    """(new text, [(name, old lines, new lines)], errors) of one document."""
    parts, errors = split_blocks(path)
    out, blocks = [], []
    for part in parts:
        if part[0] == "text":
            out += part[1]
            continue
        _, name, old = part
        if name not in GENERATORS:
            errors.append(f"{path}: block '{name}' names no generator (docs_blocks.py --list)")
            out += old
            continue
        if name not in cache:
            cache[name] = GENERATORS[name][0](root)
        new = cache[name]
        blocks.append((name, old, new))
        out += new
    return "\n".join(out), blocks, errors


def _where(f):
    """module.function of a generator, as --list names it."""
    if f is None:
        return "-"
    return f"{'docs_blocks' if f.__module__ == '__main__' else f.__module__}.{f.__name__}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", help="the source tree")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the blocks in place")
    mode.add_argument("--check", metavar="OUTDIR", help="regenerate into OUTDIR and compare")
    mode.add_argument("--list", action="store_true", help="list the blocks")
    ap.add_argument("--plots", action="store_true", help="with --check: also redraw the plots into OUTDIR")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    cache, errors, differing, seen = {}, [], [], set()
    for path in documents(root):
        rel = os.path.relpath(path, root)
        if a.list:
            parts, errs = split_blocks(path)
            errors += errs
            for p in parts:
                if p[0] == "block":
                    seen.add(p[1])
                    f, data = GENERATORS.get(p[1], (None, "(no generator)"))
                    print(f"{rel}: block {p[1]} <- {data} by {_where(f)}")
            for target in IMAGE.findall(open(path).read()):
                shown = os.path.normpath(os.path.join(os.path.dirname(rel), target))
                folder = next((f for f in PLOTS if shown.startswith(f + os.sep)), None)
                print(f"{rel}: figure {shown} <- {PLOTS[folder][0] if folder else '(committed, not redrawn)'}")
            continue
        text, blocks, errs = render(root, path, cache)
        errors += errs
        for name, old, new in blocks:
            seen.add(name)
            if old != new:
                differing.append(f"{rel}: block '{name}' ({GENERATORS[name][1]})")
                if a.check:
                    sys.stdout.writelines(difflib.unified_diff([s + "\n" for s in old], [s + "\n" for s in new],
                                                               f"{rel} (committed)", f"{rel} (regenerated)"))
        if a.write and any(old != new for _, old, new in blocks):
            with open(path, "w") as fh:
                fh.write(text)
        if a.check:
            target = os.path.join(a.check, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w") as fh:
                fh.write(text)
    unused = sorted(n for n in set(GENERATORS) - seen if os.path.isdir(os.path.join(root, GENERATORS[n][1])))
    if unused and not a.list:
        errors.append("generators whose block stands in no document: " + ", ".join(unused))
    if a.check and a.plots:
        errors += check_plots(root, a.check)
        print(f"plots of {', '.join(sorted(PLOTS))} redrawn into {a.check}")
    for e in errors:
        print("error: " + e)
    if a.check:
        for d in differing:
            print(f"differs from the committed data: {d}")
        print(f"{len(seen)} generated blocks checked, {len(differing)} differ")
        return 1 if differing or errors else 0
    if a.write:
        for d in differing:
            print(f"rewritten: {d}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
