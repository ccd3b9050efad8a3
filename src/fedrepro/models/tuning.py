"""Tuning variants (``model.tuning`` of a run): which tensors a backbone trains.

``full`` trains everything (the adapters paper's "w/o adapter", FedAvg fine-tuning);
``adapters`` adds parallel residual adapters to a frozen ResNet-26 (``models.adapters``);
``ssf`` adds scale-and-shift features to a frozen ViT (``models.ssf``); ``ssf_pool`` is FedIns's
pool of SSF sets with keys and a frozen query copy (``models.ssf_pool``); ``vpt_deep`` /
``vpt_shallow`` add prompt tokens, ``vpt_pool`` a keyed pool of deep prompts (``models.vpt``).
``pce`` generates every norm layer's scale and shift from a client embedding through global
MLPs (FedPCE, ``models.pce``). ``pad_prompt`` adds a learnable pixel frame to the input of a
model that still trains entirely (pFedPT, ``models.pad_prompt``), or (``outside``, ``frozen``)
around the input of a frozen model whose frame and head train (FedHPL (CNN)).
``head_split`` is the heterogeneous-model baselines' ResNet client: body, a feature of common
width, head (FedHPL App. C.1.2, ``models.head_split``).
``model.tuning_options`` are passed on (``pool_size``, ``top_c``, ``scope``; ``num_prompts``;
``embed_dim``, ``hidden``; ``pad``, ``size``, ``outside``, ``frozen``; ``feature_dim``,
``projection``, ``stem``, ``mapping``, ``public_classes``).
Trainable tensors are what the engine sends; frozen ones never move.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from fedrepro.models.adapters import add_adapters
from fedrepro.models.head_split import HeadSplit
from fedrepro.models.pad_prompt import PadPrompted
from fedrepro.models.pce import add_client_embedding
from fedrepro.models.ssf import add_ssf
from fedrepro.models.ssf_pool import SSFPoolViT
from fedrepro.models.vpt import PromptedViT

__all__ = ["TUNINGS", "apply_tuning", "frozen_keys", "new_at_inference"]


@dataclass(frozen=True)
class Tuning:
    """How a variant changes a backbone, and the ``tuning_options`` it takes."""

    build: Callable[..., nn.Module]
    options: frozenset[str] = frozenset()


def _ssf_pool(model: nn.Module, **options: Any) -> nn.Module:
    return SSFPoolViT(model, copy.deepcopy(model), model.num_classes, **options)


def _vpt(deep: bool) -> Callable[..., nn.Module]:
    def build(model: nn.Module, num_prompts: int = 10) -> nn.Module:
        return PromptedViT(model, int(num_prompts), deep)

    return build


def _vpt_pool(model: nn.Module, num_prompts: int = 10, **options: Any) -> nn.Module:
    return PromptedViT(model, int(num_prompts), True, query=copy.deepcopy(model), **options)


# the registry of tuning variants: a new variant is one entry here (and its schema enum
# value, which a test checks against these keys)
TUNINGS: dict[str, Tuning] = {
    "full": Tuning(lambda model: model),
    "adapters": Tuning(add_adapters),
    "ssf": Tuning(add_ssf),
    "ssf_pool": Tuning(_ssf_pool, frozenset({"pool_size", "top_c", "scope"})),
    "vpt_deep": Tuning(_vpt(True), frozenset({"num_prompts"})),
    "vpt_shallow": Tuning(_vpt(False), frozenset({"num_prompts"})),
    "vpt_pool": Tuning(_vpt_pool, frozenset({"num_prompts", "pool_size", "top_c"})),
    "pce": Tuning(add_client_embedding, frozenset({"embed_dim", "hidden"})),
    "pad_prompt": Tuning(PadPrompted, frozenset({"pad", "size", "outside", "frozen"})),
    "head_split": Tuning(
        HeadSplit, frozenset({"feature_dim", "projection", "stem", "mapping", "public_classes"})
    ),
}


def apply_tuning(model: nn.Module, tuning: str = "full", **options: Any) -> nn.Module:
    """``model`` with the trainable set of a tuning variant (in place, or wrapped)."""
    if tuning not in TUNINGS:
        raise ValueError(f"model.tuning: '{tuning}' (allowed: {', '.join(TUNINGS)})")
    unknown = set(options) - TUNINGS[tuning].options
    if unknown:
        allowed = ", ".join(sorted(TUNINGS[tuning].options)) or "none"
        raise ValueError(
            f"model.tuning_options: {sorted(unknown)} for {tuning} (allowed: {allowed})"
        )
    return TUNINGS[tuning].build(model, **options)


def frozen_keys(model: nn.Module) -> list[str]:
    """Names of the parameters that are not trained (and so never sent)."""
    return [n for n, p in model.named_parameters() if not p.requires_grad]


def new_at_inference(model: nn.Module) -> int:
    """Scalars a deployed model holds beyond the pretrained backbone and its classifier(s)
    (FedIns's "#New.Param."): SSF and adapters fold into the weights they follow and add
    none; prompts, SSF pools and their keys stay (``inference_extras`` of the wrappers)."""
    extras = getattr(model, "inference_extras", None)
    return sum(p.numel() for p in extras()) if extras is not None else 0
