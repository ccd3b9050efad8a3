"""SCAFFOLD option II (Karimireddy et al. 2020): control variates correct client drift."""

from __future__ import annotations

import torch

from fedrepro.fl.algorithm import Algorithm, ClientCtx, Payload
from fedrepro.fl.tensors import moved, named_state, per_client_moved, take


class Scaffold(Algorithm):
    """Gradient correction g + c − c_i; c_i⁺ = c_i − c + (x − y)/(K·η); c += Σ Δc_i / N.

    Controls cover the shared trainable tensors; the server model is the
    (sample-weighted) average of the client models, i.e. η_g = 1.
    """

    name = "scaffold"

    def setup(self, model, num_clients: int) -> None:
        super().setup(model, num_clients)
        self.keys = self.shared_trainable
        state = named_state(model)
        self.c = {k: torch.zeros_like(state[k]) for k in self.keys}
        self.ci: dict[int, dict[str, torch.Tensor]] = {}

    def _ci(self, client: int) -> dict[str, torch.Tensor]:
        return self.ci.get(client) or {k: torch.zeros_like(v) for k, v in self.c.items()}

    def client_begin(self, ctx: ClientCtx) -> None:
        state = named_state(ctx.model)
        ci = self._ci(ctx.client)
        self._corr = [(state[k], (self.c[k] - ci[k].to(self.c[k].device))) for k in self.keys]

    @torch.no_grad()
    def correct_gradients(self, ctx: ClientCtx) -> None:
        for w, corr in self._corr:
            if w.grad is not None:
                w.grad.add_(corr)

    def client_end(self, ctx: ClientCtx) -> Payload:
        y = take(ctx.model, self.shared)
        ci = self._ci(ctx.client)
        scale = 1.0 / (max(ctx.steps, 1) * ctx.lr)
        new_ci = {k: ci[k] - self.c[k] + (ctx.received[k] - y[k]) * scale for k in self.keys}
        delta = {k: new_ci[k] - ci[k] for k in self.keys}
        self.ci[ctx.client] = new_ci
        return Payload(ctx.client, ctx.num_samples, ctx.steps, y, extra=delta)

    def aggregate(self, current, payloads):
        new = super().aggregate(current, payloads)
        for p in payloads:
            for k in self.keys:
                self.c[k].add_(p.extra[k], alpha=1.0 / self.num_clients)
        return new

    def downlink(self, current, r):
        return {**current, **{f"control.{k}": v for k, v in self.c.items()}}

    def state_dict(self) -> dict:
        return {"c": self.c, "ci": self.ci}

    def load_state_dict(self, state: dict) -> None:
        device = next(iter(self.c.values())).device if self.c else "cpu"
        self.c = moved(state["c"], device)
        self.ci = per_client_moved(state["ci"], device)
