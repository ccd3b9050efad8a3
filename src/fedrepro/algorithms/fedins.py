"""FedIns (Feng et al., ICCV 2023): federated SSF pool with a key-matching term.

The model is an :class:`~fedrepro.models.ssf_pool.SSFPoolViT`; what is sent and averaged is
every trainable tensor (SSF pool, keys, pooled heads), as in FedAvg. Locally each batch
minimises ``(1 − w)·CE + w·(1 − reduce_sim)`` with ``w = key_weight`` (0.1 in the FedIns code),
which pulls the selected keys towards their queries.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fedrepro.fl.algorithm import Algorithm, ClientCtx


class FedIns(Algorithm):
    name = "fedins"

    def __init__(self, key_weight: float = 0.1, **kw):
        super().__init__(**kw)
        if not 0.0 <= float(key_weight) <= 1.0:
            raise ValueError(f"algorithm.key_weight: {key_weight} (allowed: 0..1)")
        self.key_weight = float(key_weight)

    def objective(self, ctx: ClientCtx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        model = ctx.model
        if not hasattr(model, "reduce_sim"):
            raise ValueError("fedins needs an SSF-pool model (model.tuning: ssf_pool)")
        ce = F.cross_entropy(model(x), y)
        return (1 - self.key_weight) * ce + self.key_weight * (1 - model.reduce_sim)
