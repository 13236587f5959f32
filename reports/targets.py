"""Steps to a target: the one crossing rule every study uses (docs/convergence.md): the first
evaluation at or past the target, interpolated between it and the evaluation before; a
non-finite score before the crossing means never."""
import math


def crossing(evals, key, target, lower=True, log=None):
    """The (fractional) step at which the score KEY of the eval records first reaches TARGET
    (<= for lower-is-better scores, >= otherwise), interpolated between the two evaluations around
    it: on the log of the score (perplexities: log=True, the default where lower) or linearly
    (accuracies). The first evaluation's step where it already reaches it; None where it never does
    or the score stops being finite first."""
    log = lower if log is None else log
    reached = (lambda v: v <= target) if lower else (lambda v: v >= target)
    scale = math.log if log else (lambda v: v)
    prev = None
    for e in evals:
        v = e.get(key)
        if v is None or not math.isfinite(v):
            return None
        if reached(v):
            if prev is None or reached(prev[1]):
                return float(e["step"])
            s0, v0 = prev
            return s0 + (scale(v0) - scale(target)) / (scale(v0) - scale(v)) * (e["step"] - s0)
        prev = (e["step"], v)
    return None


def steps_to_target(evals, key, target):
    """Perplexity-like scores (lower is better), interpolated on their log."""
    return crossing(evals, key, target, lower=True, log=True)


def steps_to_accuracy(evals, key, target):
    """Accuracy-like scores (higher is better), interpolated linearly."""
    return crossing(evals, key, target, lower=False, log=False)
