"""Models the server of a heterogeneous-model baseline trains (FedHPL App. C.1.2, Table 9's
remarks; docs/methods/fedhpl.md), built from their published shapes.

- ``generator`` (FedGen): noise and a one-hot label → a feature, Linear(noise + C → hidden),
  BatchNorm1d, ReLU, Linear(hidden → feature); 531,456 scalars for C = 10 (Table 9 "0.507M")
  and 577,536 for C = 100 ("0.551M"). Shapes and the widths 512
  (TsingZ0/HtFLlib@686ed4d:system/flcore/servers/servergen.py, ``Generative``;
  system/main.py: ``noise_dim``, ``hidden_dim``, ``feature_dim`` 512).
- ``prototypes`` (FedTGP): a class embedding of the feature width, Linear(feature → hidden),
  ReLU, Linear(hidden → feature); 530,432 scalars for C = 10 ("0.506M"), 576,512 for C = 100
  ("0.550M") (TsingZ0/HtFLlib@686ed4d:system/flcore/servers/servertgp.py,
  ``Trainable_prototypes``, hidden = feature = 512).
- ``global_head`` (FedGH): the head every client receives, Linear(feature → C); 5,130 and
  51,300 scalars (Table 9's remark).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["SERVER_MODELS", "Generator", "PrototypeGenerator", "server_model"]


class Generator(nn.Module):
    """FedGen's generator: a feature for a label, from uniform noise."""

    def __init__(
        self, num_classes: int, feature_dim: int = 512, hidden_dim: int = 512, noise_dim: int = 512
    ) -> None:
        super().__init__()
        self.num_classes, self.noise_dim = int(num_classes), int(noise_dim)
        self.hidden = nn.Sequential(
            nn.Linear(self.noise_dim + self.num_classes, hidden_dim),
            nn.BatchNorm1d(hidden_dim),
            nn.ReLU(),
        )
        self.out = nn.Linear(hidden_dim, feature_dim)

    def forward(self, labels: torch.Tensor) -> torch.Tensor:
        noise = torch.rand(len(labels), self.noise_dim, device=labels.device)
        z = torch.cat([noise, F.one_hot(labels, self.num_classes).to(noise.dtype)], dim=1)
        return self.out(self.hidden(z))


class PrototypeGenerator(nn.Module):
    """FedTGP's trainable global prototypes: one per class, through a two-layer map."""

    def __init__(self, num_classes: int, feature_dim: int = 512, hidden_dim: int = 512) -> None:
        super().__init__()
        self.embedding = nn.Embedding(int(num_classes), feature_dim)
        self.hidden = nn.Sequential(nn.Linear(feature_dim, hidden_dim), nn.ReLU())
        self.out = nn.Linear(hidden_dim, feature_dim)

    def forward(self, classes: torch.Tensor) -> torch.Tensor:
        return self.out(self.hidden(self.embedding(classes)))


def _global_head(num_classes: int, feature_dim: int = 512) -> nn.Module:
    return nn.Linear(feature_dim, int(num_classes))


# name -> builder(num_classes, **options): what a structural row's ``server_model`` may name
SERVER_MODELS: dict[str, Callable[..., nn.Module]] = {
    "generator": Generator,
    "prototypes": PrototypeGenerator,
    "global_head": _global_head,
}


def server_model(spec: dict, num_classes: int) -> nn.Module:
    """The server model ``spec`` (``{"name": ..., **options}``) names, for ``num_classes``."""
    options = dict(spec)
    name = options.pop("name", None)
    if name not in SERVER_MODELS:
        raise ValueError(f"server_model: {name!r} (allowed: {', '.join(SERVER_MODELS)})")
    return SERVER_MODELS[name](num_classes, **options)
