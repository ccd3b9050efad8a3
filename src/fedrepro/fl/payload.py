"""What a client transmits, measured the way papers measure it.

The engine counts raw tensor bytes per round (``fl.tensors.nbytes``). The adapters paper
instead "saved the state_dicts of each transmission" and read the file size; this module
reproduces that: the model's state dict minus frozen parameters and client-local tensors,
serialised with ``torch.save`` (a state dict also carries BN's int64 batch counters, which the
engine itself never averages).
"""

from __future__ import annotations

import io

import torch
from torch import nn

from fedrepro.fl.algorithm import Algorithm

__all__ = ["sent_state_dict", "serialized_bytes"]


def sent_state_dict(model: nn.Module, algorithm: Algorithm) -> dict[str, torch.Tensor]:
    """``model.state_dict()`` without frozen parameters and tensors the algorithm keeps local.

    ``algorithm.setup(model, …)`` must have run (it fixes the local keys)."""
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    keep_out = frozen | set(algorithm.local)
    return {k: v for k, v in model.state_dict().items() if k not in keep_out}


def serialized_bytes(tensors: dict[str, torch.Tensor]) -> int:
    """Size of ``torch.save(tensors)``: the file a paper would have measured."""
    buf = io.BytesIO()
    torch.save(tensors, buf)
    return buf.tell()
