"""FedProx (Li et al. 2020): a proximal pull towards the received global model."""

from __future__ import annotations

import torch

from fedrepro.fl.algorithm import Algorithm, ClientCtx
from fedrepro.fl.tensors import named_state


class FedProx(Algorithm):
    """Adds μ(w − w_glob) to the gradient of every shared trainable tensor.

    This is the gradient of (μ/2)‖w − w_glob‖²; with μ = 0 the update is
    bit-identical to FedAvg's.
    """

    name = "fedprox"

    def __init__(self, mu: float = 0.01, **kw):
        super().__init__(**kw)
        self.mu = float(mu)

    def client_begin(self, ctx: ClientCtx) -> None:
        state = named_state(ctx.model)
        self._pairs = [(state[k], ctx.received[k]) for k in self.shared_trainable]

    @torch.no_grad()
    def correct_gradients(self, ctx: ClientCtx) -> None:
        for w, w_glob in self._pairs:
            if w.grad is not None:
                w.grad.add_(w - w_glob, alpha=self.mu)
