"""The results tree's raw runs, read one way: a2sgd-train's metrics file (JSON lines, one record
per event) and its effective config.ini (KEY = VALUE lines). Every report reads runs through here."""
import json
import os


def records(path, event=None):
    """The records of a metrics file, in order; only those of EVENT where given."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rec = json.loads(line)
                if event is None or rec.get("event") == event:
                    out.append(rec)
    return out


def load_run(path):
    """(evals, summary, divergence warnings, diverged) of a metrics file: its eval records, its last
    summary record (None for an unfinished run), the count of divergence_warning records, and its
    diverged record (None where it did not diverge)."""
    evals, summary, warnings, diverged = [], None, 0, None
    for rec in records(path):
        ev = rec.get("event")
        if ev == "eval":
            evals.append(rec)
        elif ev == "summary":
            summary = rec
        elif ev == "divergence_warning":
            warnings += 1
        elif ev == "diverged":
            diverged = rec
    return evals, summary, warnings, diverged


def run(path):
    """load_run(path) as a dict: evals, summary, warnings, diverged."""
    evals, summary, warnings, diverged = load_run(path)
    return dict(evals=evals, summary=summary, warnings=warnings, diverged=diverged)


def summary(path, who="reports"):
    """The summary record of a finished run; SystemExit naming the file for an unfinished one."""
    s = load_run(path)[1]
    if s is None:
        raise SystemExit(f"{who}: {path} has no summary (an unfinished run)")
    return s


def warmup_steps(path, summary):
    """The rate's linear warm-up of a2sgd-train's metrics file PATH with its SUMMARY: the summary's
    lr_warmup_steps, or for a run written before the summary had it, W from the first train record,
    whose rate is base * step / W while step < W (the same base rate where there is no warm-up)."""
    if "lr_warmup_steps" in summary:
        return summary["lr_warmup_steps"]
    train = records(path, "train")
    if not train:
        return 0
    r = train[0]
    return 0 if r["lr"] >= summary["lr"] else round(summary["lr"] * r["step"] / r["lr"])


def read_config(path):
    """KEY = VALUE lines of an effective config.ini (comment lines, starting with #, left out)."""
    config = {}
    with open(path) as f:
        for line in f:
            key, sep, value = line.partition("=")
            if sep and not line.startswith("#"):
                config[key.strip()] = value.strip()
    return config


def jsonl_names(directory):
    """The metrics files of a folder, sorted, without their .jsonl."""
    return [n[:-len(".jsonl")] for n in sorted(os.listdir(directory)) if n.endswith(".jsonl")]
