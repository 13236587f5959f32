"""The summaries across studies: docs/results.md's opening table (results-headline) and the README's
verdict (readme-verdict). Each figure in them is one a study's own block has in full (the
convergence, network, paper and outer-optimizer reports compute it); this module picks them and
links the block."""
import os
import re

from . import convergence_report, outer_report, pytorch_report
from .convergence_report import CONV, conv_groups
from .methods_report import MLP_METHODS
from .network_report import NETWORK_BLOCKS, net_report as _net_report
from .outer_report import OUTER
from .registry import generator
from .runs import load_run, read_config, summary as run_summary
from .tables import table_head
from .targets import steps_to_target

# ---- docs/results.md's opening table: its figures, each from the block that has it in full ----
# group, row label, the section of docs/convergence.md the row links
README_CONV = (("lstm_p2_sgd", "LSTM on Penn Treebank, 2 ranks, SGD: steps to tuned dense's final validation "
                "perplexity x 1.1 ({target})", "against-tuned-dense-the-runs-in-the-results-tree"),
               ("lstm_p4_sgd", "the same at 4 ranks (target {target})", "lstm-4-ranks-sgd-against-tuned-dense"),
               ("lstm_p8_sgd", "the same at 8 ranks (target {target}; 8 ranks oversubscribing 2 cores)",
                "lstm-8-ranks-sgd-against-tuned-dense"),
               ("lstm_p16_sgd", "the same at 16 ranks (target {target}; 16 ranks oversubscribing 2 cores)",
                "lstm-16-ranks-sgd-against-tuned-dense"),
               ("lstm_p2_adam", "2 ranks with Adam: steps to tuned dense's final x 1.1 ({target})",
                "lstm-2-ranks-adam-against-tuned-dense"),
               ("lstm_p4_adam", "the same at 4 ranks (target {target})", "lstm-4-ranks-adam-against-tuned-dense"),
               ("lstm_p8_adam", "the same at 8 ranks (target {target}; 8 ranks oversubscribing 2 cores)",
                "lstm-8-ranks-adam-against-tuned-dense"),
               ("lstm_p16_adam", "the same at 16 ranks (target {target}; 16 ranks oversubscribing 2 cores)",
                "lstm-16-ranks-adam-against-tuned-dense"))


def _config_lr(root, group, config):
    path = os.path.join(root, CONV, group, config, "config.ini")
    lr = read_config(path).get("lr")
    if lr is None:
        raise SystemExit(f"docs_blocks.py: {path} names no lr")
    return float(lr)


def _epochs(root, group, config):
    return load_run(os.path.join(root, CONV, group, config + ".jsonl"))[0][-1]["epoch"]


def _lr(value):
    return f"{value:g}"


def _readme_conv_rows(root):
    groups = conv_groups(root)
    rows = []
    for group, label, anchor in README_CONV:
        if group not in groups:
            raise SystemExit(f"docs_blocks.py: {CONV}/{group} holds no finished dense run")
        _, ranks, optimizer, target, runs = groups[group]
        ref = next(r for r in runs.values() if r["reference"])
        # The defaults as they are (convergence_report.LSTM_DEFAULTS); a group not yet rerun since the
        # warm-up became Adam's default shows its run of the defaults before, and says so.
        name, before = convergence_report.lstm_default_run(runs, optimizer)
        if name is None:
            raise SystemExit(f"docs_blocks.py: {CONV}/{group}: no run of A2SGD's defaults "
                             f"({convergence_report.LSTM_DEFAULTS[optimizer]})")
        a = runs[name]
        lr_note = f"; lr {_lr(_config_lr(root, group, name))}" if group in ("lstm_p2_sgd", "lstm_p2_adam") else ""
        what = "the defaults as they were before the warm-up" if before else "the defaults"
        reach = (("not reached" + (f" with {what}" if before else "")) if a["steps_to_target"] is None else
                 f"{a['steps_to_target']:,.0f} with {what} ({a['steps_vs_dense']:.2f}x{lr_note})")
        a_cell = (f"{reach}, final {a['final_averaged']:.1f} after {_epochs(root, group, a['config'])} epochs, at "
                  f"{100 * a['traffic_vs_dense']:.2f}% of dense's bytes")
        # A reference tuned to a constant rate (convergence_study.sh's -const) says so: the
        # defaults' plateau schedule is not what it ran.
        const = " held constant" if "-const" in ref["config"] else ""
        warm = re.search(r"-lrw(\d+)", ref["config"])
        if warm:  # the same for a warm-up (-lrw<W>)
            const += f", warmed up over {int(warm.group(1)):,} steps"
        d_cell = (f"{ref['steps_to_target']:,.0f} at its tuned rate {_lr(_config_lr(root, group, ref['config']))}{const}, "
                  f"final {ref['final_averaged']:.1f} after {_epochs(root, group, ref['config'])} epochs")
        rows.append((label.format(target=f"{target:.1f}"), a_cell, d_cell, anchor, group, a, ref))
    return rows


def _secs(v):
    """Three significant figures (1,346 s, 26.7 s, 1.14 s)."""
    return f"{v:,.0f} s" if v >= 100 else f"{v:.1f} s" if v >= 10 else f"{v:.2f} s"


@generator("results-headline", CONV)
def results_headline(root):
    """docs/results.md's opening table : bytes per step, the language model's steps to tuned dense's
    target at 2 to 16 ranks (docs/results/convergence), the paper experiment's time to the
    target across 2 and 4 emulated nodes (docs/results/paper, paper-p4), the MLP across emulated
    nodes and on one node (docs/results/mlp-methods-p2, -p4)."""
    conv = _readme_conv_rows(root)
    _, _, _, _, p2_group, p2_a2sgd, p2_dense = conv[0]
    lines = [*table_head(["", "A2SGD", "dense all-reduce", "details"]),
             f"| bytes per step and rank | 16 (pure), 144 (layer-wise); the language model's defaults, with an "
             f"average every 200 steps: {p2_a2sgd['bytes_per_step']:,.0f} over a {_epochs(root, p2_group, p2_dense['config'])}"
             f"-epoch run ({100 * p2_a2sgd['traffic_vs_dense']:.2f}%) | 4n: {p2_dense['bytes_per_step']:,.0f} for the LSTM "
             "| [docs/methods.md](docs/methods.md), [docs/convergence.md](docs/convergence.md) |"]
    for label, a_cell, d_cell, anchor, _, _, _ in conv:
        lines.append(f"| {label} | {a_cell} | {d_cell} | [docs/convergence.md](docs/convergence.md#{anchor}) |")
    # The paper experiment timed over 2 and 4 emulated nodes (network.md's blocks network-lstm-p2/-p4).
    n2 = _net_report(root, *NETWORK_BLOCKS["network-lstm-p2"])
    n4 = _net_report(root, *NETWORK_BLOCKS["network-lstm-p4"])

    def t(report, method):
        v = report["runs"][method].get("measured_s")
        return None if v is None else _secs(v)

    def reached(report, method, name):
        v = t(report, method)
        return f"{name} {v}" if v else f"{name} does not reach it"
    s2, a2 = n2["sgd"], n2["adam"]
    lines.append("| the LSTM across 2 emulated nodes on 250 Mbit/s links, every method at its tuned rate: time to "
                 f"tuned dense's validation perplexity x 1.1 | SGD {t(s2, 'a2sgd')} ({reached(s2, 'topk', 'Top-K')}, "
                 f"{reached(s2, 'qsgd', 'QSGD')}); Adam {t(a2, 'a2sgd')} ({reached(a2, 'qsgd', 'QSGD')}; "
                 f"{reached(a2, 'topk', 'Top-K')}) | {t(s2, 'dense')} and {t(a2, 'dense')}: "
                 f"{s2['ratios']['a2sgd:dense']['measured_s']:.1f}x and {a2['ratios']['a2sgd:dense']['measured_s']:.1f}x "
                 "slower | [docs/network.md](docs/network.md#time-to-the-target-at-2-nodes-250-mbits-with-the-defaults) |")
    s4, a4 = n4["sgd"], n4["adam"]
    if a4["runs"]["a2sgd"].get("measured_s") is not None:
        adam4 = f"Adam {t(a4, 'a2sgd')}"
    else:
        # Past the experiment's steps: the continued run (paper-p4/longer) x the step timed over the network.
        evals = load_run(os.path.join(root, "docs/results/paper-p4/longer/a2sgd_adam.jsonl"))[0]
        steps = steps_to_target(evals, "valid_perplexity_averaged", a4["target"])
        run = load_run(os.path.join(root, "docs/results/paper-p4/a2sgd_adam.jsonl"))[0]
        adam4 = (f"Adam: not within the {run[-1]['step']} steps; continued, "
                 + ("not reached" if steps is None else f"{_secs(steps * a4['runs']['a2sgd']['step_s'])} at "
                    f"{steps / a4['runs']['dense']['steps_to_target']:.2f}x dense's steps"))
    lines.append("| the same across 4 emulated nodes (ring collectives), every method at its tuned rate of the 4-rank "
                 f"sweep | SGD {t(s4, 'a2sgd')} ({reached(s4, 'topk', 'Top-K')}, {reached(s4, 'qsgd', 'QSGD')}); {adam4} "
                 f"({reached(a4, 'qsgd', 'QSGD')}; {reached(a4, 'topk', 'Top-K')}) | SGD {t(s4, 'dense')}: "
                 f"{s4['ratios']['a2sgd:dense']['measured_s']:.1f}x slower; Adam {t(a4, 'dense')} "
                 "| [docs/network.md](docs/network.md#time-to-the-target-at-4-nodes-250-mbits-with-the-defaults) |")
    # 8 nodes: dense's and A2SGD's steps from the 8-rank convergence study, the compressed baselines'
    # from their full runs at the 8-rank sweep's rates where there are some (P8_FULL_RUNS).
    n8 = _net_report(root, *NETWORK_BLOCKS["network-lstm-p8"])
    s8, a8 = n8["sgd"], n8["adam"]

    def step(report, method):
        return f"{1e3 * report['runs'][method]['step_s']:,.0f} ms"

    def baselines8(report):
        timed, untimed = [], []
        for method, name in (("topk", "Top-K"), ("qsgd", "QSGD"), ("powersgd", "PowerSGD")):
            if report["runs"][method]["full_run"]:
                timed.append(reached(report, method, name))
            else:
                untimed.append(f"{name} step {step(report, method)}")
        return ", ".join(timed + ([f"{', '.join(untimed)}: no full run yet"] if untimed else []))
    ratio8 = s8["ratios"]["a2sgd:dense"]["measured_s"]
    adam8 = reached(a8, "a2sgd", "A2SGD").replace("A2SGD ", "")
    lines.append("| the same across 8 emulated nodes (ring collectives): dense's and A2SGD's steps from the 8-rank "
                 f"convergence study, the baselines' at the 8-rank sweep's rates | SGD {t(s8, 'a2sgd')} "
                 f"({baselines8(s8)}); Adam {adam8} ({baselines8(a8)}). Step {step(s8, 'a2sgd')} | SGD {t(s8, 'dense')}"
                 + (f": {ratio8:.1f}x slower" if ratio8 else "") + f"; Adam {t(a8, 'dense')}; step {step(s8, 'dense')} "
                 "| [docs/network.md](docs/network.md#time-per-step-at-8-nodes-250-mbits-and-the-time-to-the-target-where-the-data-allows-it) |")
    # The MLP across emulated nodes (network.md's network-mlp-p<P>-<rate> blocks), at a2sgd-train's defaults.
    m100 = _net_report(root, *NETWORK_BLOCKS["network-mlp-p2-100mbit"])["default"]
    m1g = _net_report(root, *NETWORK_BLOCKS["network-mlp-p2-1gbit"])["default"]
    m4 = _net_report(root, *NETWORK_BLOCKS["network-mlp-p4-100mbit"])["default"]
    if m4["runs"]["a2sgd"].get("measured_s") is not None:
        at4 = f"at 4 nodes {t(m4, 'a2sgd')}"
    else:
        final = run_summary(os.path.join(root, "docs/results/mlp-methods-p4/a2sgd/metrics.jsonl"))
        at4 = f"at 4 nodes not reached ({100 * (m4['target'] - final['test_accuracy_averaged']):.1f} points short)"
    lines.append("| the MLP across 2 emulated nodes on 100 Mbit/s links, each method at a2sgd-train's defaults (not "
                 f"tuned): time to dense's test accuracy - 1 point | {t(m100, 'a2sgd')} ({reached(m100, 'topk', 'Top-K')}, "
                 f"{reached(m100, 'qsgd', 'QSGD')}); at 1 Gbit/s {t(m1g, 'a2sgd')} (dense {t(m1g, 'dense')}); {at4} "
                 f"| {t(m100, 'dense')} | [docs/network.md](docs/network.md#the-mlp-over-the-network) |")
    # The MLP on one node (benchmarks.md's block mlp-methods-p2).
    a, d = (run_summary(os.path.join(root, MLP_METHODS, method, "metrics.jsonl")) for method in ("a2sgd", "dense"))
    lines.append("| the MLP on Fashion-MNIST, 2 ranks of one node, each method at its defaults: test accuracy of the "
                 f"averaged model, ms per step | {a['test_accuracy_averaged']:.4f}, {1e3 * a['step_time_s']:.3f} "
                 f"| {d['test_accuracy_averaged']:.4f}, {1e3 * d['step_time_s']:.3f} "
                 "| [docs/benchmarks.md](docs/benchmarks.md#every-method-on-the-same-mlp) |")
    # The table stands in docs/results.md: its links are relative to docs/.
    lines = [line.replace("](docs/", "](") for line in lines]
    return lines + ["", "_Generated by `python3 -m reports docs` from `docs/results/convergence/`, `docs/results/paper/`, "
                    "`docs/results/paper-p4/` and `docs/results/mlp-methods-p2/`, `-p4/` (the blocks of "
                    "docs/convergence.md, docs/network.md and docs/benchmarks.md that the details column links)._"]


# ---- the README's verdict ----
NET_P2 = "docs/network.md#time-to-the-target-at-2-nodes-250-mbits-with-the-defaults"
NET_P4 = "docs/network.md#time-to-the-target-at-4-nodes-250-mbits-with-the-defaults"
NET_P8 = "docs/network.md#time-per-step-at-8-nodes-250-mbits-and-the-time-to-the-target-where-the-data-allows-it"
OUTER_LINK = "docs/convergence.md#local-sgd-diloco-and-a2sgd-at-equal-bytes"
CONV_LINK = "docs/convergence.md#against-tuned-dense-the-runs-in-the-results-tree"


def _outer_cells(root):
    """{(ranks, optimizer): {base: row}} of the MLP cells of the outer-optimizer study."""
    cells = {}
    for name in os.listdir(os.path.join(root, OUTER)):
        parts = name.split("_")
        if len(parts) != 3 or parts[0] != "mlp":
            continue
        cell = outer_report.cell_rows(os.path.join(root, OUTER, name))
        if cell:
            cells[(int(parts[1][1:]), parts[2])] = {outer_report.parse_name(r["config"])[0]: r for r in cell["rows"]}
    return cells


def _x(row):
    return "not reached" if row is None or row["ratio"] is None else f"{row['ratio']:.2f}x"


def _lstm_network_clause(root):
    """The language model's side of the comparison with local SGD in time (outer_network.sh --model lstm)."""
    net = outer_report.network_ratios(os.path.join(root, OUTER), "250mbit", "lstm")
    if not net:
        return ""
    ratios = [n[2] for n in net]
    nodes = sorted({n[0] for n in net})
    only = outer_report.network_only_a2sgd(os.path.join(root, OUTER), "250mbit", "lstm")
    only_text = "".join(f"; at {p} ranks with {'Adam' if o == 'adam' else o} only A2SGD reaches it" for p, o in only)
    return (f" On the language model, whose step takes 0.3-0.7 s here, A2SGD's time to its target is "
            f"{min(ratios):.2f}-{max(ratios):.2f}x local SGD's over {' and '.join(map(str, nodes))} nodes at 250 "
            f"Mbit/s where both reach it{only_text}.")


def _torch_network_line(root, conv):
    """The verdict against PyTorch DDP over the emulated network (pytorch_report.network_times), or
    None before benchmarks/torch/ddp_network.sh's runs are committed."""
    if not os.path.exists(os.path.join(root, pytorch_report.TORCH_NETWORK, "meta.json")):
        return None
    _, times = pytorch_report.network_times(root)
    nodes = [n for n in sorted(times) if {"ddp", "train-a2sgd", "powersgd", "postlocal"} <= set(times[n])
             and f"lstm_p{n}_sgd" in conv]
    if not nodes:
        return None

    def rel(e):  # time per step, averages included, against DDP's, per cluster size
        return {n: times[n][e][3] / times[n]["ddp"][3] for n in nodes}

    def listed(values, fmt, sep=" and "):
        return sep.join(format(values[n], fmt) + "x" for n in nodes)
    a2sgd, powersgd, postlocal = rel("train-a2sgd"), rel("powersgd"), rel("postlocal")
    steps = {n: conv[f"lstm_p{n}_sgd"][5]["steps_vs_dense"] for n in nodes}
    sooner = {n: 1 / (a2sgd[n] * steps[n]) for n in nodes}
    return (f"- **Pays: against PyTorch DDP on slow links.** Over {' and '.join(map(str, nodes))} emulated nodes at "
            f"250 Mbit/s a2sgd-train's A2SGD step takes {listed(a2sgd, '.2f')} the time of PyTorch DDP's on the same "
            f"language model, DDP's all-reduce overlapped with the backward pass; with {listed(steps, '.2f')} dense's "
            f"steps (SGD) A2SGD reaches the target {listed(sooner, '.1f')} sooner, if DDP needs dense's steps. Torch's "
            f"PowerSGD hook ({listed(powersgd, '.2f', ', ')}) and post-local SGD ({listed(postlocal, '.2f', ', ')}) are "
            f"about as fast per step. _torch 1.13 over gloo; periodic averages amortised over their 200 steps; steps: "
            f"convergence study ([pytorch.md](docs/pytorch.md#over-the-network-ddp-torchs-hooks-and-a2sgd-train-on-the-"
            f"same-links))._")


@generator("readme-verdict", OUTER)
def readme_verdict(root):
    """The README's verdict in at most 10 lines: every figure computed here from the blocks it
    summarises (network.md's network-lstm-p2/-p4/-p8, convergence.md's groups, the outer study), and
    tagged with its experiment and target."""
    n = {p: _net_report(root, *NETWORK_BLOCKS[f"network-lstm-p{p}"]) for p in (2, 4, 8)}

    def faster(p, opt, other):
        return n[p][opt]["ratios"][f"a2sgd:{other}"]["measured_s"]
    groups = conv_groups(root)
    conv = {r[4]: r for r in _readme_conv_rows(root)}
    outer = _outer_cells(root)
    s16, a16 = outer[(16, "sgd")], outer[(16, "adam")]
    m4, m8, m16 = outer[(4, "momentum")], outer[(8, "momentum")], outer[(16, "momentum")]

    def local_ahead(cell):
        best = min((cell[b]["steps"] for b in ("local-k100", "local-k100-diloco") if cell[b]["steps"] is not None),
                   default=None)
        return cell["a2sgd-k100-diloco"]["steps"] / best
    lstm16s, lstm16a, lstm2s = conv["lstm_p16_sgd"][5], conv["lstm_p16_adam"][5], conv["lstm_p2_sgd"]
    target16a = groups["lstm_p16_adam"][3]
    dense2 = run_summary(os.path.join(root, CONV, "lstm_p2_sgd", lstm2s[6]["config"] + ".jsonl"))
    comm_share = dense2["comm_s_per_step"] / dense2["step_time_s"] if dense2.get("step_time_s") else None
    share = f"{100 * comm_share:.0f}% of the LSTM's step at 2 ranks" if comm_share else "a small part of the step"
    s_local16 = min(s16[b]["steps"] for b in ("local-k100", "local-k100-diloco") if s16[b]["steps"] is not None)
    lines = [
        f"- **Pays: slow links.** Over 2 emulated nodes on 250 Mbit/s links A2SGD reaches the target "
        f"{faster(2, 'sgd', 'dense'):.1f}x (SGD) and {faster(2, 'adam', 'dense'):.1f}x (Adam) sooner than dense's "
        f"all-reduce, {faster(4, 'sgd', 'dense'):.1f}x over 4 nodes and {faster(8, 'sgd', 'dense'):.1f}x over 8 (SGD). "
        f"_Paper experiment, LSTM on PTB, every method at its tuned rate; target: validation perplexity "
        f"{n[2]['sgd']['target']:.1f} with SGD at 2 nodes ({n[2]['sgd']['target_rule']}); dense's all-reduce not overlapped with the "
        f"backward pass: [network.md]({NET_P2})._",
        f"- **Pays: many ranks with plain SGD.** At 16 ranks A2SGD's defaults need {_x(s16['a2sgd-k100-diloco'])} tuned "
        f"dense's steps on the MLP at {100 * s16['a2sgd-k100-diloco']['bytes_share']:.2f}% of its bytes, "
        f"where local SGD at the same bytes needs {s_local16 / s16['a2sgd-k100-diloco']['steps']:.2f}x A2SGD's, and "
        f"{lstm16s['steps_vs_dense']:.2f}x on the LSTM at {100 * lstm16s['traffic_vs_dense']:.2f}%. _MLP: outer-optimizer "
        f"study, 3 seeds, target dense's mean final accuracy - 1 point ([convergence.md]({OUTER_LINK})); LSTM: "
        f"convergence study, target dense's final perplexity x 1.1 ([convergence.md]({CONV_LINK}))._",
        f"- **Does not pay: one node.** Dense's all-reduce is {share}, while A2SGD's defaults need "
        f"{lstm2s[5]['steps_vs_dense']:.2f}x its steps (SGD): the gain is bytes, not time. _Convergence study, target "
        f"{groups['lstm_p2_sgd'][3]:.1f} ([convergence.md]({CONV_LINK}))._",
        f"- **Does not pay: against Top-K with SGD.** Top-K reaches the target sooner over 2, 4 and 8 nodes (A2SGD's time : Top-K's "
        f"{1 / faster(2, 'sgd', 'topk'):.2f}, {1 / faster(4, 'sgd', 'topk'):.2f}, {1 / faster(8, 'sgd', 'topk'):.2f}). "
        f"_Paper experiment, as above ([network.md]({NET_P4}), [8 nodes]({NET_P8}))._",
        f"- **Does not pay: Adam at 16 ranks, momentum.** The LSTM does not reach the target (final {lstm16a['final_averaged']:.1f} against "
        f"{target16a:.1f}); the MLP needs {_x(a16['a2sgd-k100-diloco'])} dense's steps. **Momentum:** local SGD "
        f"with DiLoCo's outer step is {local_ahead(m4):.2f}x (4 ranks) and {local_ahead(m8):.2f}x (8) faster than "
        f"A2SGD at the same bytes; at 16 ranks A2SGD "
        + ("does not reach the target" if m16["a2sgd-k100-diloco"]["ratio"] is None else f"needs {_x(m16['a2sgd-k100-diloco'])}")
        + ". _Studies and targets as above._",
    ]
    torch_line = _torch_network_line(root, conv)
    if torch_line:
        lines.insert(1, torch_line)
    net = outer_report.network_ratios(os.path.join(root, OUTER), "100mbit")
    if net:
        nodes = sorted({n[0] for n in net})
        against_local = [n[2] for n in net]
        step_ratio = [n[4] for n in net]
        lines.append(
            f"- **Does not pay: against local SGD in time on a short step.** Over {' and '.join(map(str, nodes))} "
            f"emulated nodes at 100 Mbit/s local SGD at the same bytes reaches the MLP's target "
            f"{min(against_local):.1f}-{max(against_local):.1f}x sooner than A2SGD in every cell, SGD included: "
            f"A2SGD's 16-byte all-reduce each step is latency-bound and makes its step {min(step_ratio):.1f}-"
            f"{max(step_ratio):.1f}x local SGD's, whose steps between averages cost their compute alone (both reach "
            f"it {1 / max(n[3] for n in net):.0f}x or more sooner than dense)." + _lstm_network_clause(root)
            + " _Outer-optimizer study's steps x the step timed over the network "
            "([network.md](docs/network.md#the-outer-optimizer-study-over-the-network))._")
    return lines
    return lines
