"""A2SGD as a PyTorch DDP communication hook, on the a2sgd library's kernels (docs/pytorch.md).

    from a2sgd.torch import A2SGDState, a2sgd_hook
    model = torch.nn.parallel.DistributedDataParallel(model)
    state = A2SGDState(process_group=None, granularity="layer", zero_gradient="hold")
    model.register_comm_hook(state, a2sgd_hook)

Per bucket (DDP's flat gradient buffer), the hook folds the error-compensated gradient a = g + e
into two local means per segment (the whole bucket, or with granularity="layer" each parameter's
gradient) with the library's fused kernel, all-reduces only those scalars (2 doubles per segment,
4 with averaging="weighted") through torch.distributed.all_reduce on the state's process group, and
writes the reconstructed update back into the bucket's memory; the residual e lives in the state.
The options are a2sgd-train's `--a2sgd-*` options, with its names and defaults.
"""

from typing import Optional

import torch
import torch.distributed as dist
from torch.distributed.algorithms.model_averaging import averagers, utils as averaging_utils

from . import _a2sgd

__all__ = ["A2SGDState", "a2sgd_hook", "TopKState", "topk_hook", "QSGDState", "qsgd_hook", "EFSignState",
           "efsign_hook", "available_methods", "default_averaging", "default_average_period", "PeriodicAverager"]

def _registry_defaults():
    """Every hook method's option defaults as a2sgd-train's registry declares them (the one place they
    are defined): {method: {option_name: default text}}, option names spelled as Python arguments."""
    return {method: {name.replace("-", "_"): default for name, default, _ in _a2sgd.method_options(method)}
            for method in ("a2sgd", "topk", "qsgd", "efsign")}


_DEFAULTS = _registry_defaults()


def _check_options(method, **values):
    """Raises ValueError, naming the option, for a value a2sgd-train would refuse (the registry's
    ranges and choices)."""
    text = {name.replace("_", "-"): (("on" if value else "off") if isinstance(value, bool) else str(value))
            for name, value in values.items()}
    try:
        _a2sgd.check_method_options(method, text)
    except ValueError as e:
        raise ValueError(f"a2sgd: {e}") from None


def available_methods() -> dict:
    """The exchange methods a2sgd.torch offers as DDP communication hooks.

    Returns:
        {name: (state class, hook)}, under the names a2sgd-train's --compressor takes.

    Example::

        >>> state_class, hook = available_methods()["topk"]
        >>> ddp_model.register_comm_hook(state_class(module=net), hook)
    """
    return {"a2sgd": (A2SGDState, a2sgd_hook), "topk": (TopKState, topk_hook), "qsgd": (QSGDState, qsgd_hook),
            "efsign": (EFSignState, efsign_hook)}


def _in_bucket(bucket, call):
    """call(), with the tensor checks of the library (which name the argument) naming the bucket too."""
    try:
        return call()
    except (TypeError, ValueError) as e:
        raise type(e)(f"{e} (bucket {bucket.index()}'s gradient buffer)") from None


def _check_state(state, cls, hook):
    if not isinstance(state, cls):
        raise TypeError(f"{hook}: the state is a {type(state).__name__}, not an a2sgd.torch.{cls.__name__}")


class _BucketState:
    """What every hook's state keeps: the process group, the step count, the bytes handed to the
    collectives, and per DDP bucket an error-feedback residual (for the methods that have one).

    DDP lays its buckets out anew after the first iteration (in the order gradients became ready):
    the state keeps each bucket's residual with the parameters it covers and moves every
    parameter's residual to its new place when the layout changes (once, not every step).
    state_dict() / load_state_dict() carry the residuals per parameter (named through `module`)
    and the step count, so that a resumed run continues bit for bit.
    """

    _method = None

    def __init__(self, process_group: Optional[dist.ProcessGroup] = None, module: Optional[torch.nn.Module] = None):
        if module is not None and not isinstance(module, torch.nn.Module):
            raise TypeError(f"a2sgd: module is a {type(module).__name__}, not a torch.nn.Module")
        self.process_group = process_group
        self.module = getattr(module, "module", module)  # DDP's wrapped module: names without "module."
        self.iteration = 0             # steps completed (counted at the last bucket)
        self.residuals = {}            # bucket index -> float32 tensor of the bucket's size
        self._layouts = {}             # bucket index -> the parameters it covers, in buffer order
        self._pending = {}             # parameter name -> residual loaded, not yet placed
        self._codecs = {}              # bucket index -> (size, the method's codec and payload buffers)
        self.bytes_handed = 0          # bytes handed to the collectives by this rank, all steps
        self.bytes_last_step = 0       # ... in the last step

    def _world_size(self):
        return dist.get_world_size(self.process_group)

    def __getstate__(self):
        """A picklable copy without the process group (as torch's PowerSGDState does): a process
        group cannot cross processes; the unpickled state runs on the default group."""
        state = dict(self.__dict__)
        state["process_group"] = None
        state["_codecs"] = {}  # the library's codecs own device buffers; made again on first use
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def _names(self):
        if self.module is None:
            raise ValueError(f"a2sgd: {type(self).__name__}(module=model) is needed to save or load the residuals "
                             "by parameter")
        return {id(p): name for name, p in self.module.named_parameters()}

    def _count(self, bucket, nbytes):
        if bucket.index() == 0:
            self.bytes_last_step = 0
        self.bytes_last_step += nbytes
        self.bytes_handed += nbytes
        if bucket.is_last():
            self.iteration += 1

    def _codec(self, bucket, key, make):
        """The bucket's codec and buffers, made once per bucket layout `key` (DDP's rebuilt buckets
        differ) by make(). Kokkos, where it does not run yet, starts on the bucket's device first,
        since the codec's own buffers are allocated there."""
        entry = self._codecs.get(bucket.index())
        if entry is None or entry[0] != key:
            device = bucket.buffer().device
            _a2sgd.initialize(device.index if device.type != "cpu" and device.index is not None else -1)
            entry = (key, make())
            self._codecs[bucket.index()] = entry
        return entry[1]

    def _residual(self, bucket, buffer):
        """The bucket's residual in its current layout; re-laid out (once) when DDP rebuilt the bucket."""
        index = bucket.index()
        params = list(bucket.parameters())
        layout = tuple((id(p), p.numel()) for p in params)
        r = self.residuals.get(index)
        if r is not None and self._layouts.get(index) == layout:
            return r
        # Every parameter's residual so far, from whichever bucket held it, or from a loaded state.
        known = {}
        for i, old in self.residuals.items():
            offset = 0
            for key, numel in self._layouts[i]:
                known[(key, numel)] = old[offset:offset + numel]
                offset += numel
        names = self._names() if self._pending else {}
        new = torch.zeros_like(buffer, memory_format=torch.contiguous_format)
        offset = 0
        for p in params:
            piece = known.get((id(p), p.numel()))
            if piece is None and names.get(id(p)) in self._pending:
                piece = self._pending.pop(names[id(p)]).reshape(-1)
                if piece.numel() != p.numel():
                    raise ValueError(f"a2sgd: the saved residual of {names[id(p)]} has {piece.numel()} values, "
                                     f"the parameter {p.numel()}")
            if piece is not None:
                new[offset:offset + p.numel()].copy_(piece)
            offset += p.numel()
        if offset != buffer.numel():
            raise ValueError(f"a2sgd: bucket {index}'s parameters cover {offset} values, its buffer {buffer.numel()}")
        self.residuals[index] = new
        self._layouts[index] = layout
        return new

    def _saved_options(self):
        raise NotImplementedError

    def state_dict(self) -> dict:
        """The method, its options, the step count, the bytes handed and every parameter's residual
        (by name), for torch.save next to the model's state."""
        per_param = {}
        if self.residuals or self._pending:
            names = self._names()
            for i, r in self.residuals.items():
                offset = 0
                for (key, numel) in self._layouts[i]:
                    per_param[names[key]] = r[offset:offset + numel].clone()
                    offset += numel
            per_param.update({k: v.clone() for k, v in self._pending.items()})
        return {"method": self._method, "options": self._saved_options(), "iteration": self.iteration,
                "bytes_handed": self.bytes_handed, "residuals": per_param}

    def load_state_dict(self, sd: dict) -> None:
        """Restores state_dict()'s (the same method and options, or ValueError naming the difference);
        the residuals are placed in the buckets when DDP first hands them to the hook."""
        if sd.get("method", self._method) != self._method:
            raise ValueError(f"a2sgd: the saved state is {sd.get('method')}'s, this state {self._method}'s")
        options = self._saved_options()
        if sd.get("options") != options:
            raise ValueError(f"a2sgd: the saved state's options {sd.get('options')} differ from this state's {options}")
        if sd["residuals"]:
            unknown = set(sd["residuals"]) - set(self._names().values())
            if unknown:
                raise ValueError(f"a2sgd: the saved residuals name parameters this module lacks: {sorted(unknown)[:5]}")
        self.iteration = int(sd["iteration"])
        self.bytes_handed = int(sd["bytes_handed"])
        self.residuals, self._layouts, self._codecs = {}, {}, {}
        self._pending = {k: v.detach().to(torch.float32).contiguous().clone() for k, v in sd["residuals"].items()}


class A2SGDState(_BucketState):
    """The hook's state: options, and per DDP bucket its codec, payload and error-feedback residual.

    Args:
        process_group: the group the scalars are all-reduced on (None: the default group).
        module: the model DDP wraps (or the DDP module); its parameter names key the residuals in
            state_dict(), so that a run resumed under a new DDP (whose buckets may be laid out
            differently) gets every parameter's residual back. Needed for state_dict() only.
        averaging: "mean" (2 scalars per segment) or "weighted" (4: sums and counts).
        residual: "local" (e = a - the local mean of a's sign) or "global" (the global mean).
        granularity: "model" (one pair of means per bucket) or "layer" (one per parameter tensor).
        error_feedback: carry e into the next step (True; False for ablations only).
        zero_gradient: "move" (an entry with g == 0 is classed by its residual) or "hold" (left out).
        warmup_steps: the first steps all-reduce the dense gradient (the residual untouched).

    The defaults are a2sgd-train's (read from the library's method registry). The residuals follow
    DDP's bucket rebuild, and state_dict() / load_state_dict() carry them per parameter with the
    step count (see _BucketState), so that a resumed run continues bit for bit.

    Example::

        >>> state = A2SGDState(module=net, granularity="layer", zero_gradient="hold")
        >>> ddp_model.register_comm_hook(state, a2sgd_hook)
        >>> torch.save({"model": net.state_dict(), "a2sgd": state.state_dict()}, path)
    """

    _method = "a2sgd"

    def __init__(self, process_group: Optional[dist.ProcessGroup] = None, module: Optional[torch.nn.Module] = None,
                 averaging: str = _DEFAULTS["a2sgd"]["averaging"], residual: str = _DEFAULTS["a2sgd"]["residual"],
                 granularity: str = _DEFAULTS["a2sgd"]["granularity"],
                 error_feedback: bool = _DEFAULTS["a2sgd"]["error_feedback"] == "on",
                 zero_gradient: str = _DEFAULTS["a2sgd"]["zero_gradient"],
                 warmup_steps: int = int(_DEFAULTS["a2sgd"]["warmup_steps"])):
        for name, value in (("averaging", averaging), ("residual", residual), ("granularity", granularity),
                            ("zero_gradient", zero_gradient)):
            if not isinstance(value, str):
                raise ValueError(f"a2sgd: {name} must be a str (got {value!r})")
        if not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"a2sgd: warmup_steps must be a non-negative int (got {warmup_steps!r})")
        _check_options("a2sgd", averaging=averaging, residual=residual, granularity=granularity,
                       error_feedback=bool(error_feedback), zero_gradient=zero_gradient, warmup_steps=warmup_steps)
        super().__init__(process_group, module)
        self.averaging = averaging
        self.residual = residual
        self.granularity = granularity
        self.error_feedback = bool(error_feedback)
        self.zero_gradient = zero_gradient
        self.warmup_steps = warmup_steps

    def _bucket_codec(self, bucket, buffer):
        """The bucket's A2sgdCodec (its segments: the bucket, or its tensors) and its payload tensor
        (float64 on the CPU, where the codec writes it; a device copy is all-reduced on a GPU)."""
        n = buffer.numel()
        sizes = [n] if self.granularity == "model" else [g.numel() for g in bucket.gradients()]

        def make():
            codec = _a2sgd.A2sgdCodec(n, sizes, averaging=self.averaging, residual_reference=self.residual,
                                      error_feedback=self.error_feedback, zero_gradient=self.zero_gradient)
            return codec, torch.empty(codec.payload_words, dtype=torch.float64)

        return self._codec(bucket, tuple(sizes), make)

    def _saved_options(self):
        return dict(averaging=self.averaging, residual=self.residual, granularity=self.granularity,
                    error_feedback=self.error_feedback, zero_gradient=self.zero_gradient,
                    warmup_steps=self.warmup_steps)


def a2sgd_hook(state: A2SGDState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: A2SGD on one bucket (16 bytes per bucket and step to all_reduce; 16 per
    parameter tensor with granularity="layer").

    Args:
        state: the A2SGDState (its process group, options, residuals and byte counts).
        bucket: the bucket DDP hands the hook.

    Returns:
        A Future of the bucket's buffer holding the decoded update, which DDP hands the optimizer.

    Example::

        >>> state = A2SGDState(module=net)
        >>> ddp_model.register_comm_hook(state, a2sgd_hook)
    """
    _check_state(state, A2SGDState, "a2sgd_hook")
    buffer = bucket.buffer()
    world = state._world_size()
    if state.iteration < state.warmup_steps:
        # Dense warm-up: the averaged gradient, as DDP's default all-reduce gives it.
        state._count(bucket, buffer.numel() * buffer.element_size())
        buffer.div_(world)
        fut = dist.all_reduce(buffer, group=state.process_group, async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])

    residual = state._residual(bucket, buffer)
    codec, payload = _in_bucket(bucket, lambda: state._bucket_codec(bucket, buffer))
    non_finite = _in_bucket(bucket, lambda: codec.encode(buffer, residual, payload))
    state._count(bucket, payload.numel() * payload.element_size())
    scalars = payload if buffer.device.type == "cpu" else payload.to(buffer.device)
    fut = dist.all_reduce(scalars, group=state.process_group, async_op=True).get_future()

    def decode(f):
        reduced = f.value()[0]
        if not codec.decode(reduced if reduced.device.type == "cpu" else reduced.cpu(), world, buffer, residual):
            who = (f"this rank's gradient has {non_finite} non-finite (NaN/Inf) entries" if non_finite
                   else "another rank's gradient has non-finite (NaN/Inf) entries")
            raise FloatingPointError(f"a2sgd: bucket {bucket.index()}: {who}; the bucket was not updated")
        return buffer

    return fut.then(decode)


class _GatherState(_BucketState):
    """The state of a method whose payloads are all-gathered (a codec of GatherCodec.hpp): per bucket
    its codec and payload buffers. A subclass says what is its own: _make_codec(n), and where the
    method counts or draws differently, _encode and _poison_values."""

    def _make_codec(self, n):
        raise NotImplementedError

    def _encode(self, codec, bucket, buffer, payload):
        """Writes the bucket's payload; returns the count of non-finite entries the fold met."""
        residual = self._residual(bucket, buffer) if codec.has_residual else None
        return codec.encode(buffer, residual, payload)

    @staticmethod
    def _poison_values(words):
        """Per rank (a row of `words`), the float its payload poisons with NaN on a non-finite
        gradient: the first 32-bit word (QSGD's norm, EF-sign's scale)."""
        return words[:, 0].contiguous().view(torch.float32)

    def _buffers(self, bucket, buffer, world):
        def make():
            codec = self._make_codec(buffer.numel())
            dtype = getattr(torch, codec.word_dtype.split(".")[1])
            return (codec, torch.empty(codec.payload_words, dtype=dtype, device=buffer.device),
                    torch.empty(world * codec.payload_words, dtype=dtype, device=buffer.device))

        return self._codec(bucket, buffer.numel(), make)


class TopKState(_GatherState):
    """Top-K with error feedback (a2sgd-train's --compressor topk): per bucket, the k = round(ratio n)
    entries of largest |g + e| as (index, value) pairs, all-gathered (8 k bytes per rank); the
    update is the ranks' sparse vectors summed and divided by the rank count.

    Args:
        process_group: the group the payloads are all-gathered on (None: the default group).
        module: the model DDP wraps; its parameter names key the residuals in state_dict().
        ratio: the fraction of entries sent, a2sgd-train's --topk-ratio.
    """

    _method = "topk"

    def __init__(self, process_group: Optional[dist.ProcessGroup] = None, module: Optional[torch.nn.Module] = None,
                 ratio: float = float(_DEFAULTS["topk"]["ratio"])):
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
            raise ValueError(f"a2sgd: ratio must be a number (got {ratio!r})")
        _check_options("topk", ratio=repr(float(ratio)))
        super().__init__(process_group, module)
        self.ratio = float(ratio)

    def _saved_options(self):
        return dict(ratio=self.ratio)

    def _make_codec(self, n):
        return _a2sgd.TopkCodec(n, self.ratio)

    @staticmethod
    def _poison_values(words):
        # A poisoned payload carries NaN as its first pair's value (the low 32 bits of the word).
        return (words[:, 0] & 0xFFFFFFFF).to(torch.int32).view(torch.float32)


class QSGDState(_GatherState):
    """QSGD (a2sgd-train's --compressor qsgd): per bucket, the norm and every entry's sign and level
    of `levels` (stochastic rounding, no error feedback), packed and all-gathered
    (4 + 4 ceil(n b / 32) bytes per rank, b = ceil(log2(levels + 1)) + 1 bits per entry). The
    rounding stream is fixed by (seed, step, rank), so a resumed run rounds as the straight one.

    Args:
        process_group: the group the payloads are all-gathered on (None: the default group).
        module: the model DDP wraps (QSGD keeps no residual; taken for the same constructor shape).
        levels: a2sgd-train's --qsgd-levels.
        seed: a2sgd-train's --seed; buckets past the first draw from seeds of their own.
    """

    _method = "qsgd"

    def __init__(self, process_group: Optional[dist.ProcessGroup] = None, module: Optional[torch.nn.Module] = None,
                 levels: int = int(_DEFAULTS["qsgd"]["levels"]), seed: int = 0):
        if isinstance(levels, bool) or not isinstance(levels, int):
            raise ValueError(f"a2sgd: levels must be an int (got {levels!r})")
        _check_options("qsgd", levels=levels)
        if not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise ValueError(f"a2sgd: seed must be an int in [0, 2^64) (got {seed!r})")
        super().__init__(process_group, module)
        self.levels, self.seed = levels, seed

    def _saved_options(self):
        return dict(levels=self.levels, seed=self.seed)

    def _make_codec(self, n):
        return _a2sgd.QsgdCodec(n, self.levels)

    def _encode(self, codec, bucket, buffer, payload):
        # The stream of this step and rank, as a2sgd-train draws it for its one buffer.
        rank = dist.get_rank(self.process_group)
        seed = (self.seed + bucket.index() * 0x9E3779B97F4A7C15) % 2**64
        codec.encode(buffer, None, payload, seed=seed, step=self.iteration, rank=rank)
        # QSGD folds no residual, so its codec counts nothing: count here, only when the norm is poisoned.
        poisoned = not bool(torch.isfinite(payload[:1].view(torch.float32)).all())
        return int((~torch.isfinite(buffer)).sum()) if poisoned else 0


class EFSignState(_GatherState):
    """EF-sign (a2sgd-train's --compressor efsign): per bucket, the scale ||g + e||_1 / n and one
    sign bit per entry, all-gathered (4 + 4 ceil(n / 32) bytes per rank), with error feedback.

    Args:
        process_group: the group the payloads are all-gathered on (None: the default group).
        module: the model DDP wraps; its parameter names key the residuals in state_dict().
    """

    _method = "efsign"

    def __init__(self, process_group: Optional[dist.ProcessGroup] = None, module: Optional[torch.nn.Module] = None):
        super().__init__(process_group, module)

    def _saved_options(self):
        return {}

    def _make_codec(self, n):
        return _a2sgd.EfSignCodec(n)


def _gather_hook(state: _GatherState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """The gather methods' hook: the state's codec encodes the bucket into its payload, every rank's
    payload is all-gathered on the state's group, and the codec decodes their mean into the bucket.
    A rank that met a non-finite gradient poisons its payload, so every rank raises."""
    buffer = bucket.buffer()
    world = state._world_size()
    codec, payload, gathered = _in_bucket(bucket, lambda: state._buffers(bucket, buffer, world))
    non_finite = _in_bucket(bucket, lambda: state._encode(codec, bucket, buffer, payload))
    state._count(bucket, payload.numel() * payload.element_size())
    outputs = list(gathered.view(world, -1).unbind(0))
    fut = dist.all_gather(outputs, payload, group=state.process_group, async_op=True).get_future()

    def decode(_):
        if not bool(torch.isfinite(state._poison_values(gathered.view(world, -1))).all()):
            who = (f"this rank's gradient has {non_finite} non-finite (NaN/Inf) entries" if non_finite
                   else "another rank's gradient has non-finite (NaN/Inf) entries")
            raise FloatingPointError(f"a2sgd {state._method}: bucket {bucket.index()}: {who}; the bucket was not "
                                     "updated")
        codec.decode(gathered, world, buffer)
        return buffer

    return fut.then(decode)


def topk_hook(state: TopKState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: Top-K with error feedback on one bucket.

    Args:
        state: the TopKState (process group, ratio, residuals, byte counts).
        bucket: the bucket DDP hands the hook.

    Returns:
        A Future of the bucket's buffer holding the mean of the ranks' sparse vectors.

    Example::

        >>> ddp_model.register_comm_hook(TopKState(module=net, ratio=0.01), topk_hook)
    """
    _check_state(state, TopKState, "topk_hook")
    return _gather_hook(state, bucket)


def qsgd_hook(state: QSGDState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: QSGD on one bucket.

    Args:
        state: the QSGDState (process group, levels, seed, byte counts).
        bucket: the bucket DDP hands the hook.

    Returns:
        A Future of the bucket's buffer holding the mean of the ranks' dequantised gradients.

    Example::

        >>> ddp_model.register_comm_hook(QSGDState(module=net, levels=15, seed=1), qsgd_hook)
    """
    _check_state(state, QSGDState, "qsgd_hook")
    return _gather_hook(state, bucket)


def efsign_hook(state: EFSignState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: EF-sign on one bucket.

    Args:
        state: the EFSignState (process group, residuals, byte counts).
        bucket: the bucket DDP hands the hook.

    Returns:
        A Future of the bucket's buffer holding the mean of the ranks' scaled signs.

    Example::

        >>> ddp_model.register_comm_hook(EFSignState(module=net), efsign_hook)
    """
    _check_state(state, EFSignState, "efsign_hook")
    return _gather_hook(state, bucket)


_MODEL_CLASSES = ("mlp", "lstm")


def default_averaging(optimizer: torch.optim.Optimizer, model: str = "mlp") -> dict:
    """a2sgd-train's default replica averaging for a model class, as PeriodicAverager's keyword
    arguments: ``PeriodicAverager(net, **default_averaging(opt))``.

    Args:
        optimizer: the torch optimizer of the run (kept for the rule's signature: a2sgd-train's rule
            depends on the optimizer where a model's does; neither model's does today).
        model: ``"mlp"`` (feed-forward classifiers: an average every 100 steps with DiLoCo's outer
            Nesterov step, lr 0.7, momentum 0.9, as a2sgd-train's MLP; measured best with every
            optimizer in docs/convergence.md's outer-optimizer study) or ``"lstm"`` (recurrent
            language models: a plain average every 200 steps, as a2sgd-train's LSTM).

    Returns:
        dict with ``period``, ``outer``, ``outer_lr`` and ``outer_momentum``.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"a2sgd: optimizer must be a torch.optim.Optimizer (got {type(optimizer).__name__})")
    if model not in _MODEL_CLASSES:
        raise ValueError(f"a2sgd: model must be one of {', '.join(_MODEL_CLASSES)} (got {model!r})")
    if model == "lstm":
        return dict(period=200, outer="average", outer_lr=1.0, outer_momentum=0.0)
    return dict(period=100, outer="nesterov", outer_lr=0.7, outer_momentum=0.9)


def default_average_period(optimizer: torch.optim.Optimizer, model: str = "mlp") -> int:
    """The period of default_averaging(optimizer, model): 100 steps for the MLP class, 200 for the
    language model, with every optimizer (a2sgd-train averages plain SGD's replicas too)."""
    return default_averaging(optimizer, model)["period"]


_OUTER_OPTIMIZERS = ("average", "momentum", "nesterov")


class PeriodicAverager(averagers.ModelAverager):
    """Averages the replicas' parameters every `period` steps, with an optional outer optimizer at
    the average: a2sgd-train's --average-every and --outer-optimizer, on torch's ModelAverager.

    Call ``average_parameters(model.parameters())`` after every ``optimizer.step()``, as with torch's
    PeriodicModelAverager. ``self.step`` (torch's) counts those calls; the replicas are averaged
    after step s when s > warmup_steps and s is a multiple of `period` (a2sgd-train's count: torch's
    PeriodicModelAverager averages one step earlier in the cycle, at s - warmup_steps = 0 mod period
    counted from 0). The mean is torch's ``utils.average_parameters`` (one all-reduce of the
    flattened model). period 0: never (average() alone, e.g. at the end).

    The outer optimizer turns each average into a step from the model of the last average (theta):
    with delta = theta - the replicas' mean, ``momentum``: v <- mu v + delta, theta <- theta -
    outer_lr v; ``nesterov`` (DiLoCo: outer_lr 0.7, outer_momentum 0.9): theta <- theta - outer_lr
    (delta + mu v); every replica then restarts from theta. ``average`` (the default) is the plain
    mean. The first `warmup_steps` steps are not averaged (post-local SGD: DDP's own all-reduce keeps
    the replicas equal then); theta is the model after them, taken at construction when there are
    none (build the averager after DistributedDataParallel has broadcast rank 0's model). The
    outer state costs two model-sized float32 buffers.

    Args:
        module: the model whose parameters are averaged (its parameters are what
            average_parameters() must be handed; the outer state is laid out by them).
        period: steps between averages (0: never).
        process_group: the group of the all-reduce (None: the default group).
        warmup_steps: steps before the first average.
        outer: ``"average"``, ``"momentum"`` or ``"nesterov"``.
        outer_lr: the outer learning rate, in (0, 10].
        outer_momentum: mu, in [0, 1).

    Example::

        >>> averager = PeriodicAverager(net, **default_averaging(opt))
        >>> for x, y in data:
        ...     opt.zero_grad(); loss_fn(net(x), y).backward(); opt.step()
        ...     averager.average_parameters(net.parameters())
        >>> averager.average()  # deploy the replicas' mean
        >>> torch.save({"averager": averager.state_dict(), ...}, path)
    """

    def __init__(self, module: torch.nn.Module, period: int, process_group: Optional[dist.ProcessGroup] = None,
                 warmup_steps: int = 0, outer: str = "average", outer_lr: float = 1.0, outer_momentum: float = 0.0):
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"a2sgd: module is a {type(module).__name__}, not a torch.nn.Module")
        if isinstance(period, bool) or not isinstance(period, int) or period < 0:
            raise ValueError(f"a2sgd: period must be a non-negative int (got {period!r})")
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"a2sgd: warmup_steps must be a non-negative int (got {warmup_steps!r})")
        if outer not in _OUTER_OPTIMIZERS:
            raise ValueError(f"a2sgd: outer must be one of {', '.join(_OUTER_OPTIMIZERS)} (got {outer!r})")
        if not (0.0 < float(outer_lr) <= 10.0):
            raise ValueError(f"a2sgd: outer_lr must be in (0, 10] (got {outer_lr!r})")
        if not (0.0 <= float(outer_momentum) < 1.0):
            raise ValueError(f"a2sgd: outer_momentum must be in [0, 1) (got {outer_momentum!r})")
        if outer != "average" and period == 0:
            raise ValueError(f"a2sgd: the outer optimizer {outer} acts at the periodic average: needs period > 0")
        super().__init__(process_group)
        self.module, self.period, self.warmup_steps, self.outer = module, period, warmup_steps, outer
        self.outer_lr, self.outer_momentum = float(outer_lr), float(outer_momentum)
        self.bytes_handed = 0
        self.anchor = self.velocity = None
        if self._has_outer_state() and warmup_steps == 0:
            self._take_anchor()

    @property
    def steps(self) -> int:
        """The steps counted so far (torch's ``step``)."""
        return self.step

    def _has_outer_state(self):
        return self.period > 0 and self.outer != "average"

    def _params(self):
        return list(self.module.parameters())

    @torch.no_grad()
    def _take_anchor(self):
        self.anchor = torch.cat([p.detach().reshape(-1).float() for p in self._params()])
        self.velocity = torch.zeros_like(self.anchor)

    def average_parameters(self, params=None) -> None:
        """Counts one step and averages the replicas when the period says so (collective).

        Args:
            params: the module's parameters (``model.parameters()``, or the optimizer's
                ``param_groups``), as torch's averagers take them; None: the module's.
        """
        if params is not None:
            if not {id(p) for p in averaging_utils.get_params_to_average(params)} <= {id(p) for p in self._params()}:
                raise ValueError("a2sgd: PeriodicAverager averages the parameters of the module it was built with; "
                                 "average_parameters() was handed others")
        self.step += 1
        if self._has_outer_state() and self.step == self.warmup_steps:
            self._take_anchor()
        if self.period and self.step > self.warmup_steps and self.step % self.period == 0:
            self.average(outer_step=True)

    @torch.no_grad()
    def average(self, outer_step: bool = False) -> None:
        """Replaces every replica by the replicas' mean (collective); with outer_step, by the outer
        optimizer's step from it (average_parameters() does that at each period; a final average for
        evaluation or export is the plain mean).

        Args:
            outer_step: apply the outer optimizer (when it has one) to the mean.
        """
        params = self._params()
        averaging_utils.average_parameters(iter(params), self.process_group)
        self.bytes_handed += sum(p.numel() * p.element_size() for p in params)
        if outer_step and self._has_outer_state() and self.anchor is not None:
            mean = torch.cat([p.detach().reshape(-1) for p in params])
            delta = self.anchor - mean
            self.velocity.mul_(self.outer_momentum).add_(delta)
            step = delta + self.outer_momentum * self.velocity if self.outer == "nesterov" else self.velocity
            self.anchor.sub_(self.outer_lr * step)
            offset = 0
            for p in params:
                p.copy_(self.anchor[offset:offset + p.numel()].view_as(p))
                offset += p.numel()

    def state_dict(self) -> dict:
        """The step count, the settings and the outer optimizer's state (theta and v; None without
        one), so that a resumed run neither redoes the warm-up nor restarts the outer momentum."""
        return {"step": self.step, "period": self.period, "warmup_steps": self.warmup_steps, "outer": self.outer,
                "outer_lr": self.outer_lr, "outer_momentum": self.outer_momentum,
                "anchor": None if self.anchor is None else self.anchor.clone(),
                "velocity": None if self.velocity is None else self.velocity.clone()}

    def load_state_dict(self, sd: dict) -> None:
        """Restores state_dict()'s; the settings must be this averager's (a different period or outer
        optimizer raises ValueError: continue such a run with the settings it was saved with)."""
        for key in ("period", "warmup_steps", "outer", "outer_lr", "outer_momentum"):
            if sd[key] != getattr(self, key):
                raise ValueError(f"a2sgd: the saved averager has {key} {sd[key]!r}, this one {getattr(self, key)!r}")
        n = sum(p.numel() for p in self._params())
        for key in ("anchor", "velocity"):
            if sd[key] is not None and sd[key].numel() != n:
                raise ValueError(f"a2sgd: the saved {key} has {sd[key].numel()} values, the module {n}")
        self.step = int(sd["step"] if "step" in sd else sd["steps"])  # "steps": the key's earlier name
        self.anchor = None if sd["anchor"] is None else sd["anchor"].clone().float()
        self.velocity = None if sd["velocity"] is None else sd["velocity"].clone().float()
