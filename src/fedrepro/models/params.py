"""Parameter and byte counts, so tables can check structure against the papers without weights.

Counting works on models built on the ``meta`` device, which is how paper-scale backbones
(ViT-L: 303 M parameters) are measured on a laptop.
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

__all__ = ["count_params", "to_mega"]


def count_params(model: nn.Module, keys: Iterable[str] | None = None) -> int:
    """Number of scalars in the model's parameters, or in those of them named in ``keys``.

    Buffer names in ``keys`` (BN running statistics) are skipped, so ``norm_keys(model)`` can be
    passed as is; a name that is neither a parameter nor a buffer is an error. For sizes of what
    is stored or sent, use ``fedrepro.fl.tensors.nbytes`` on the tensors themselves."""
    params = dict(model.named_parameters())
    if keys is None:
        return sum(p.numel() for p in params.values())
    wanted = set(keys)
    unknown = wanted - params.keys() - {name for name, _ in model.named_buffers()}
    if unknown:
        raise KeyError(f"not tensors of the model: {sorted(unknown)[:5]}")
    return sum(params[k].numel() for k in wanted & params.keys())


def to_mega(count: int, binary: bool = True) -> float:
    """``count`` in units of 2**20 (FedHPL's "20.66/81.82/289.25") or 10**6 (FedIns' "85.80 M")."""
    return count / (2**20 if binary else 10**6)
