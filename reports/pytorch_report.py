"""The PyTorch side's committed results as docs blocks (docs/pytorch.md, docs/benchmarks.md): the
example's hooks on one MLP (examples/torch/ddp_hooks.py), local SGD against torch's post-local SGD
(examples/torch/local_sgd.py), the hooks' compute (benchmarks/torch/hook_compute.py) and
a2sgd-train's dense step against PyTorch DDP's (benchmarks/torch/compare_pytorch_ddp.sh). The
runs are the examples' and benchmarks' own JSON; this module only tabulates them."""
import glob
import json
import os
import statistics

from .registry import generator, source_line
from .tables import markdown_table, table_head

TORCH = "docs/results/pytorch"
TORCH_LABELS = {"allreduce": "DDP's all-reduce (no hook)", "fp16": "torch fp16_compress_hook",
                "powersgd": "torch PowerSGD hook, rank 1", "a2sgd": "a2sgd.torch a2sgd_hook",
                "topk": "a2sgd.torch topk_hook (ratio 0.001)", "qsgd": "a2sgd.torch qsgd_hook (256 levels)",
                "efsign": "a2sgd.torch efsign_hook"}


@generator("pytorch-example", TORCH)
def pytorch_example(root):
    with open(os.path.join(root, TORCH, "example.json")) as f:
        runs = json.load(f)
    base = next(r for r in runs if r["exchange"] == "allreduce")
    lines = [*table_head(["exchange", "test accuracy", "bytes per step and rank", "x all-reduce", "ms per step",
                          "x all-reduce"])]
    for r in runs:
        lines.append(f"| {TORCH_LABELS.get(r['exchange'], r['exchange'])} | {r['test_accuracy']:.4f} "
                     f"| {r['bytes_per_step']:,.0f} | {r['bytes_per_step'] / base['bytes_per_step']:.2g} "
                     f"| {r['ms_per_step']:.2f} | {r['ms_per_step'] / base['ms_per_step']:.2f} |")
    r = runs[0]
    return lines + ["", source_line(TORCH, f"`examples/torch/ddp_hooks.py`: {r['ranks']} ranks, {r['steps']} steps, "
                                           f"SGD lr {r['lr']:g}, seed {r['seed']}, {r['parameters']:,} parameters")]


TORCH_LOCAL = "docs/results/pytorch/local-sgd"
TORCH_LOCAL_LABELS = {"torch-postlocal": "torch PostLocalSGDOptimizer + PeriodicModelAverager",
                      "a2sgd-local": "a2sgd.torch PeriodicAverager (plain average)",
                      "a2sgd-diloco": "a2sgd.torch PeriodicAverager, outer Nesterov (0.7, 0.9)",
                      "a2sgd-hook": "a2sgd_hook + PeriodicAverager (plain)",
                      "a2sgd-hook-diloco": "a2sgd_hook + PeriodicAverager, outer Nesterov"}


@generator("pytorch-local-sgd", TORCH_LOCAL)
def pytorch_local_sgd(root):
    tables = {}
    for name in sorted(os.listdir(os.path.join(root, TORCH_LOCAL))):
        if name.startswith("local_sgd_m") and name.endswith(".json"):
            with open(os.path.join(root, TORCH_LOCAL, name)) as f:
                runs = json.load(f)
            tables[runs[0]["momentum"]] = runs
    if not tables:
        raise SystemExit(f"pytorch_report.py: no local_sgd_m*.json in {TORCH_LOCAL}")
    momenta = sorted(tables, reverse=True)
    lines = table_head(["run", *(f"test accuracy, momentum {m:g} (lr {tables[m][0]['lr']:g})" for m in momenta),
                        "bytes per step and rank"])
    for i, r in enumerate(tables[momenta[0]]):
        accs = " | ".join(f"{tables[m][i]['test_accuracy']:.4f}" for m in momenta)
        lines.append(f"| {TORCH_LOCAL_LABELS.get(r['run'], r['run'])} | {accs} | {r['bytes_per_step']:,.0f} |")
    r = tables[momenta[0]][0]
    same = all(t[0]["checksum"] == t[1]["checksum"] for t in tables.values()
               if [x["run"] for x in t[:2]] == ["torch-postlocal", "a2sgd-local"])
    lines += ["", ("torch's and a2sgd's plain averager deploy the same model at every momentum (equal parameter sums)"
                   if same else "torch's and a2sgd's plain averager deploy different models") + "."]
    return lines + ["", source_line(TORCH_LOCAL, f"`examples/torch/local_sgd.py`: {r['ranks']} ranks, {r['steps']} steps, "
                                                 f"{r['warmup']} all-reduced steps, an average every {r['period']}, "
                                                 f"seed {r['seed']}")]


@generator("pytorch-hook-compute", TORCH)
def pytorch_hook_compute(root):
    with open(os.path.join(root, TORCH, "hook_compute.json")) as f:
        r = json.load(f)
    med, q = r["median_ms"], r["ratios"]
    lines = markdown_table(["pass", "median ms"], [[name, f"{ms:.2f}"] for name, ms in med.items()])
    lines += ["", f"A2SGD's encode at {100 * q['encode_of_read_ceiling']:.0f}% of the read ceiling (the fastest of the "
              f"`read:` passes), its decode at {100 * q['decode_of_rmw_ceiling']:.0f}% of the read-modify-write "
              f"ceiling (the fastest `rmw:` pass); torch's fp16 hook's compute takes "
              f"{q['fp16_compute_over_a2sgd_kernels']:.2f}x the time of A2SGD's two passes; whole hooks on one "
              f"rank: fp16 {q['fp16_hook_over_a2sgd_hook']:.2f}x, PowerSGD {q['powersgd_hook_over_a2sgd_hook']:.2f}x "
              "A2SGD's.", "",
              source_line(TORCH, f"`benchmarks/torch/hook_compute.py --repeats {r['repeats']}`: "
                                 f"{r['bucket_mib']:g} MiB bucket, {r['threads']} thread, torch {r['torch']}")]
    return lines


@generator("pytorch-ddp-mlp", TORCH)
def pytorch_ddp_mlp(root):
    """One row per benchmarks/torch/compare_pytorch_ddp.sh result (OUT_JSON=<TORCH>/ddp_mlp*.json): the
    medians of a2sgd-train's dense step and PyTorch DDP's on the same MLP, batch and ranks."""
    paths = sorted(glob.glob(os.path.join(root, TORCH, "ddp_mlp*.json")))
    if not paths:
        raise SystemExit(f"pytorch_report.py: {TORCH} has no ddp_mlp*.json (benchmarks/torch/compare_pytorch_ddp.sh with OUT_JSON)")
    lines = [*table_head(["OpenBLAS kernels", "`a2sgd-train --compressor dense`, ms per step",
                          "PyTorch DDP (gloo), ms per step", "ratio", "rounds (a2sgd / torch, ms)", "file"])]
    for path in paths:
        with open(path) as f:
            r = json.load(f)
        rounds = ", ".join(f"{1e3 * a:.2f}/{1e3 * t:.2f}" for a, t in zip(r["a2sgd_step_s"], r["torch_step_s"]))
        lines.append(f"| {r['openblas_core']} | {1e3 * r['a2sgd_median_s']:.3f} | {1e3 * r['torch_median_s']:.3f} "
                     f"| {r['ratio']:.3f} | {rounds} | `{os.path.basename(path)}` |")
    return lines + ["", source_line(TORCH, f"`OUT_JSON=... benchmarks/torch/compare_pytorch_ddp.sh`: MLP 784-256-256-10, batch "
                                           f"{r['batch_per_rank']} per rank, {r['ranks']} ranks, {r['steps']} timed "
                                           f"steps after {r['warmup']}, one thread per rank, medians of "
                                           f"{len(r['a2sgd_step_s'])} alternating rounds; torch {r['torch']}, "
                                           f"{r['cpu']}")]


TORCH_NETWORK = "docs/results/pytorch/network"
TORCH_NETWORK_LABELS = {
    "ddp": "PyTorch DDP, its own all-reduce (overlapped)",
    "powersgd": "PyTorch DDP, torch PowerSGD hook (rank 2, one bucket)",
    "postlocal": "PyTorch DDP, torch post-local SGD (PeriodicModelAverager)",
    "a2sgd": "PyTorch DDP, a2sgd.torch a2sgd_hook + PeriodicAverager",
    "topk": "PyTorch DDP, a2sgd.torch topk_hook (ratio 0.001)",
    "qsgd": "PyTorch DDP, a2sgd.torch qsgd_hook (256 levels)",
    "efsign": "PyTorch DDP, a2sgd.torch efsign_hook",
    "train-dense": "a2sgd-train, dense (defaults: clipping, so after the backward pass)",
    "train-a2sgd": "a2sgd-train, A2SGD (defaults)",
}


TORCH_NETWORK_HOOKS = "docs/results/pytorch/network-hooks"


def _network_runs(root, results=TORCH_NETWORK):
    """{nodes: {exchange: [run, ...]}} from a benchmarks/torch/ddp_network.sh folder."""
    folder = os.path.join(root, results)
    with open(os.path.join(folder, "meta.json")) as f:
        meta = json.load(f)
    runs = {}
    for n in meta["nodes"]:
        for e in meta["exchanges"].split(","):
            paths = sorted(glob.glob(os.path.join(folder, f"p{n}", f"{e}-r*.json")))
            if len(paths) != meta["repeats"]:
                raise SystemExit(f"pytorch_report.py: {results}/p{n}: {len(paths)} runs of {e}, "
                                 f"meta.json says {meta['repeats']}")
            loaded = []
            for path in paths:
                with open(path) as f:
                    loaded.append(json.load(f))
            runs.setdefault(n, {})[e] = loaded
    return meta, runs


def network_times(root, results=TORCH_NETWORK):
    """{nodes: {exchange: (s per step, period, one average's s, s per step with averages, bytes per step,
    bytes per average)}}: medians over the runs of benchmarks/torch/ddp_network.sh. a2sgd-train's
    replica average is an all-reduce of the model, the bytes of a dense step: its time is taken as
    dense's communication per step in the same sitting."""
    meta, runs = _network_runs(root, results)
    med = statistics.median
    out = {}
    for n, by in runs.items():
        dense_comm = med([r["summary"]["comm_s_per_step"] for r in by["train-dense"]]) if "train-dense" in by else 0.0
        for e, rs in by.items():
            if e.startswith("train-"):
                step = med([r["summary"]["step_time_s"] for r in rs])
                period = 200 if e == "train-a2sgd" else 0
                average = dense_comm if period else 0.0
                sent = med([r["summary"]["bytes_per_step"] for r in rs])
                per_avg = med([r["summary"]["dense_bytes_per_step"] for r in rs]) if period else 0.0
            else:
                step = med([r["step_s"] for r in rs])
                period = rs[0].get("period", 0)
                average = med([r["average_s"] for r in rs]) if period else 0.0
                sent = med([r["tx_bytes_per_step"] for r in rs])
                per_avg = med([r["tx_bytes_per_average"] for r in rs]) if period else 0.0
            out.setdefault(n, {})[e] = (step, period, average, step + (average / period if period else 0.0), sent,
                                        per_avg)
    return meta, out


@generator("pytorch-network", TORCH_NETWORK)
def pytorch_network(root):
    return _network_block(root, TORCH_NETWORK)


@generator("pytorch-network-hooks", TORCH_NETWORK_HOOKS)
def pytorch_network_hooks(root):
    return _network_block(root, TORCH_NETWORK_HOOKS)


def _network_block(root, results):
    """Per cluster size: each configuration's median time per step over its runs (each run's own
    median step), with the replica average amortised over its period where the method averages, the
    bytes per step, and the time against DDP's overlapped all-reduce."""
    meta, times = network_times(root, results)
    lines = []
    for n, by in times.items():
        ddp = by["ddp"][3] if "ddp" in by else None
        lines += [f"**{n} nodes** at {meta['rate']}:", ""]
        lines += table_head(["run", "s per step", "one average, s (every K steps)", "s per step, averages included",
                             "bytes per step and rank", "MB per average", "time x DDP's"])
        for e, (step, period, average, total, sent, per_avg) in by.items():
            avg = f"{average:.2f} (K = {period})" if period else "-"
            avg_mb = f"{per_avg / 1e6:.3g}" if period else "-"
            wire = f"{sent / 1e6:.3g} MB" if sent >= 1e4 else f"{sent:,.0f} B"
            if e.startswith("train-"):
                wire += " (to MPI)"
            ratio = f"{total / ddp:.2f}" if ddp else "-"
            lines.append(f"| {TORCH_NETWORK_LABELS.get(e, e)} | {step:.3f} | {avg} | {total:.3f} | {wire} | {avg_mb} "
                         f"| {ratio} |")
        lines.append("")
    return lines + [source_line(results, f"`{meta['command']}`: the language model (a2sgd-train's 4,651,600 "
                                         f"parameters; torch's nn.LSTM keeps a second bias per layer: 4,653,200), "
                                               f"medians of {meta['repeats']} alternated runs of {meta['steps']} timed "
                                               f"steps each; PyTorch's bytes are what the node's link sent, "
                                               f"a2sgd-train's what it handed MPI, and its average's time dense's "
                                               f"communication per step; torch {meta['torch']}, {meta['cpu']}, "
                                               f"{meta['cores']} cores, commit {meta['commit']}")]
