"""a2sgd: communication-efficient data-parallel training (A2SGD, two-level gradient averaging).

The C++ library's exchange kernels for Python: `a2sgd.torch` registers them as PyTorch DDP
communication hooks (docs/pytorch.md). `a2sgd._a2sgd` is the compiled module they run on.
"""
from . import _a2sgd  # noqa: F401

__all__ = ["torch"]
