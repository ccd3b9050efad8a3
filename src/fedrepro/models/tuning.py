"""Tuning variants (``model.tuning`` of a run): which tensors a backbone trains.

``full`` trains everything (the adapters paper's "w/o adapter", FedAvg fine-tuning);
``adapters`` adds parallel residual adapters to a frozen ResNet-26 (``models.adapters``);
``ssf`` adds scale-and-shift features to a frozen ViT (``models.ssf``); ``ssf_pool`` is FedIns's
pool of SSF sets with keys and a frozen query copy (``models.ssf_pool``); ``vpt_deep`` /
``vpt_shallow`` add prompt tokens, ``vpt_pool`` a keyed pool of deep prompts (``models.vpt``).
``model.tuning_options`` are passed on (``pool_size``, ``top_c``, ``scope``; ``num_prompts``).
Trainable tensors are what the engine sends; frozen ones never move.
"""

from __future__ import annotations

import copy
from typing import Any

from torch import nn

from fedrepro.models.adapters import add_adapters
from fedrepro.models.ssf import add_ssf
from fedrepro.models.ssf_pool import SSFPoolViT
from fedrepro.models.vpt import PromptedViT

__all__ = ["TUNINGS", "apply_tuning", "frozen_keys", "new_at_inference"]

TUNINGS = ("full", "adapters", "ssf", "ssf_pool", "vpt_deep", "vpt_shallow", "vpt_pool")
OPTIONS = {
    "ssf_pool": {"pool_size", "top_c", "scope"},
    "vpt_deep": {"num_prompts"},
    "vpt_shallow": {"num_prompts"},
    "vpt_pool": {"num_prompts", "pool_size", "top_c"},
}


def apply_tuning(model: nn.Module, tuning: str = "full", **options: Any) -> nn.Module:
    """``model`` with the trainable set of a tuning variant (in place, or wrapped)."""
    if tuning not in TUNINGS:
        raise ValueError(f"model.tuning: '{tuning}' (allowed: {', '.join(TUNINGS)})")
    unknown = set(options) - OPTIONS.get(tuning, set())
    if unknown:
        allowed = ", ".join(sorted(OPTIONS.get(tuning, ()))) or "none"
        raise ValueError(
            f"model.tuning_options: {sorted(unknown)} for {tuning} (allowed: {allowed})"
        )
    if tuning == "adapters":
        return add_adapters(model)
    if tuning == "ssf":
        return add_ssf(model)
    if tuning == "ssf_pool":
        return SSFPoolViT(model, copy.deepcopy(model), model.num_classes, **options)
    if tuning == "vpt_pool":
        n = int(options.pop("num_prompts", 10))
        return PromptedViT(model, n, True, query=copy.deepcopy(model), **options)
    if tuning.startswith("vpt_"):
        return PromptedViT(model, int(options.get("num_prompts", 10)), tuning == "vpt_deep")
    return model


def frozen_keys(model: nn.Module) -> list[str]:
    """Names of the parameters that are not trained (and so never sent)."""
    return [n for n, p in model.named_parameters() if not p.requires_grad]


def new_at_inference(model: nn.Module) -> int:
    """Scalars a deployed model holds beyond the pretrained backbone and its classifier(s)
    (FedIns's "#New.Param."): SSF and adapters fold into the weights they follow and add
    none; prompts, SSF pools and their keys stay (``inference_extras`` of the wrappers)."""
    extras = getattr(model, "inference_extras", None)
    return sum(p.numel() for p in extras()) if extras is not None else 0
