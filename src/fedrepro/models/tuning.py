"""Tuning variants (``model.tuning`` of a run): which tensors a backbone trains.

``full`` trains everything (the adapters paper's "w/o adapter", FedAvg fine-tuning);
``adapters`` adds parallel residual adapters to a frozen ResNet-26 (``models.adapters``);
``ssf`` adds scale-and-shift features to a frozen ViT (``models.ssf``). Trainable tensors are
what the engine sends; frozen ones never move.
"""

from __future__ import annotations

from torch import nn

from fedrepro.models.adapters import add_adapters
from fedrepro.models.ssf import add_ssf

__all__ = ["TUNINGS", "apply_tuning", "frozen_keys"]

TUNINGS = ("full", "adapters", "ssf")


def apply_tuning(model: nn.Module, tuning: str = "full") -> nn.Module:
    """Give ``model`` the trainable set of a tuning variant (in place; returns the model)."""
    if tuning not in TUNINGS:
        raise ValueError(f"model.tuning: '{tuning}' (allowed: {', '.join(TUNINGS)})")
    if tuning == "adapters":
        return add_adapters(model)
    if tuning == "ssf":
        return add_ssf(model)
    return model


def frozen_keys(model: nn.Module) -> list[str]:
    """Names of the parameters that are not trained (and so never sent)."""
    return [n for n, p in model.named_parameters() if not p.requires_grad]
