"""Named-tensor helpers: the engine moves models around as {name: tensor} dicts."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


def named_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters and buffers by name, without copying."""
    state = dict(model.named_parameters())
    state.update(dict(model.named_buffers()))
    return state


def take(model: nn.Module, keys: Iterable[str]) -> dict[str, torch.Tensor]:
    """Detached copies of the named tensors (safe to keep across clients)."""
    state = named_state(model)
    return {k: state[k].detach().clone() for k in keys}


@torch.no_grad()
def put(model: nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """Copy tensors into the model in place (no re-creation, no re-allocation)."""
    state = named_state(model)
    for k, v in tensors.items():
        state[k].copy_(v)


def moved(tensors: dict[str, torch.Tensor], device) -> dict[str, torch.Tensor]:
    """The same named tensors on ``device`` (checkpointing moves algorithm state)."""
    return {k: v.to(device) for k, v in tensors.items()}


def per_client_moved(state: dict, device) -> dict[int, dict[str, torch.Tensor]]:
    """``{client: {name: tensor}}`` on ``device``, client ids as ints (checkpoints may not)."""
    return {int(k): moved(v, device) for k, v in state.items()}


def nbytes(tensors: dict[str, torch.Tensor]) -> int:
    """Bytes on the wire for these tensors, from their dtypes."""
    return sum(t.numel() * t.element_size() for t in tensors.values())


def all_finite(tensors: dict[str, torch.Tensor]) -> bool:
    """Whether every floating tensor is finite: one read for the whole dict."""
    flags = [torch.isfinite(t).all() for t in tensors.values() if t.is_floating_point()]
    return bool(torch.stack(flags).all()) if flags else True


def weighted_sum(dicts: list[dict[str, torch.Tensor]], weights: list[float]) -> dict:
    """Σ_i w_i · d_i over the keys of the first dict, in float32 then cast back."""
    out = {}
    for key, ref in dicts[0].items():
        acc = torch.zeros_like(ref, dtype=torch.float32)
        for d, w in zip(dicts, weights, strict=True):
            acc.add_(d[key].float(), alpha=float(w))
        out[key] = acc.to(ref.dtype)
    return out
