"""Every exchange method on the MLP at a2sgd-train's defaults (scripts/studies/compare_methods.sh's
runs, docs/results/mlp-methods-p<P>/): the docs' table of docs/benchmarks.md. Their timings over the
emulated network are network_report's."""
import os

from .registry import generator, source_line
from .runs import read_config, summary as run_summary
from .tables import table_head

MLP_METHODS = "docs/results/mlp-methods-p2"


@generator("mlp-methods-p2", MLP_METHODS)
def mlp_methods_p2(root):
    """Per method (scripts/studies/compare_methods.sh's runs: <method>/metrics.jsonl and config.ini): its
    optimizer, rate and method options, test accuracy, time per step and its parts, bytes."""
    base = os.path.join(root, MLP_METHODS)
    runs = {}
    for method in sorted(os.listdir(base)):
        path = os.path.join(base, method, "metrics.jsonl")
        if os.path.isfile(path):
            runs[method] = (run_summary(path), read_config(os.path.join(base, method, "config.ini")))
    if "dense" not in runs:
        raise SystemExit(f"methods_report.py: {MLP_METHODS} has no dense run")
    dense_bytes = runs["dense"][0]["bytes_per_step"]
    lines = [*table_head(["method", "optimizer, lr, options", "test accuracy, rank 0 / averaged", "ms per step",
                          "compress ms", "comm ms", "bytes per step and rank", "vs dense"])]
    for method in sorted(runs, key=lambda m: (m != "dense", m)):
        r, config = runs[method]
        # The method's own options; of A2SGD's, the three that set its traffic and its drift.
        keys = (("a2sgd-granularity", "a2sgd-zero-gradient", "a2sgd-average-every") if method == "a2sgd"
                else sorted(k for k in config if k.startswith(method + "-")))
        options = [f"`--{k} {config[k]}`" for k in keys if k in config]
        setting = ", ".join([f"{r['optimizer']} {r['lr']:g}"] + options)
        lines.append(f"| {method} | {setting} | {r['test_accuracy']:.4f} / {r['test_accuracy_averaged']:.4f} "
                     f"| {1e3 * r['step_time_s']:.3f} | {1e3 * r['compress_s_per_step']:.3f} "
                     f"| {1e3 * r['comm_s_per_step']:.3f} | {r['bytes_per_step']:,.0f} "
                     f"| {dense_bytes / r['bytes_per_step']:,.0f}x |")
    return lines + ["", source_line(MLP_METHODS, "`scripts/studies/compare_methods.sh`, 2 ranks, 3 epochs, every method's "
                                                 "summary")]
