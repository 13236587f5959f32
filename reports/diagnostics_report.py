"""The per-tensor diagnostics of the pure exchange (a2sgd-train --diagnostics-every, 2 ranks;
docs/results/diagnostics/): the docs' table of docs/convergence.md, "why pure A2SGD drifts"."""
import os

from .registry import generator, source_line
from .runs import records
from .tables import table_head

DIAGNOSTICS = "docs/results/diagnostics"
DIAG_TENSORS = (("embedding.weight", "embedding"), ("lstm0.weight_ih", "layer 1 input"), ("decoder.weight", "decoder"))


@generator("diagnostics-lstm-p2", DIAGNOSTICS)
def diagnostics_lstm_p2(root):
    """Per zero-gradient rule (move, hold), at the first and the last diagnostics step: the
    embedding's fraction of exactly-zero gradient entries and the share of its update norm that
    falls on them, and per tensor the update's norm against the averaged gradient's."""
    lines = table_head(["zero-gradient rule", "step", "embedding: zero-gradient entries", "embedding: update on them",
                        "update / averaged gradient: " + ", ".join(label for _, label in DIAG_TENSORS)])
    for rule in ("move", "hold"):
        path = os.path.join(root, DIAGNOSTICS, f"lstm_p2_{rule}.jsonl")
        diagnostics = records(path, "diagnostics")
        if not diagnostics:
            raise SystemExit(f"diagnostics_report.py: {path} holds no diagnostics records")
        for r in (diagnostics[0], diagnostics[-1]):
            ratios = ", ".join(f"{r[t + '.update_ratio']:,.2f}" for t, _ in DIAG_TENSORS)
            lines.append(f"| {rule} | {r['step']} | {100 * r['embedding.weight.zero_fraction']:.0f}% "
                         f"| {100 * r['embedding.weight.zero_update_share']:.0f}% | {ratios} |")
    return lines + ["", source_line(DIAGNOSTICS, "`a2sgd-train --diagnostics-every 20`, 2 ranks, 200 steps")]
