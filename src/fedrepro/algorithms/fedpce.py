"""FedPCE (FedPCE §3.4): only the client embedding v_n stays on a client; the backbone and the
norm generators are averaged as FedAvg averages everything."""

from __future__ import annotations

import torch

from fedrepro.fl.algorithm import Algorithm

EMBEDDING = "embedding"  # the tensor name of ``fedrepro.models.pce.PCENet``


class FedPCE(Algorithm):
    """Personalised client embeddings: v_n local, every other tensor global.

    Initialisation (FedPCE §3.4): v_n = e^(n) for the first E clients, 0 for the rest."""

    name = "fedpce"

    def local_keys(self, model) -> set[str]:
        if EMBEDDING not in dict(model.named_parameters()):
            raise ValueError("algorithm fedpce needs a model with a client embedding (tuning: pce)")
        return {EMBEDDING}

    def initial_local(self, client: int, tensors: dict[str, torch.Tensor]) -> dict:
        v = torch.zeros_like(tensors[EMBEDDING])
        if client < v.numel():
            v[client] = 1.0
        return {**tensors, EMBEDDING: v}
