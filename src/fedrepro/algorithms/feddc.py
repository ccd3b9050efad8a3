"""FedDC (Gao et al. 2022): local drift decoupling and correction.

Client i keeps a drift ``h_i`` and a gradient state ``g_i``; the server a state ``g``. With
``w_i = n_i / mean_j n_j`` the local loss adds ``(α/w_i)/2·‖θ − (w − h_i)‖²`` and
``⟨θ, g/w_i − g_i⟩`` to CE (as gradient terms), gradients are clipped to norm 10. After the
round ``Δθ = θ_i − w``, ``h_i += Δθ``, ``g_i⁺ = g_i − g/w_i − Δθ/(K·η)`` with
``K = E·⌈mean_j n_j / B⌉`` and η the base lr; the client sends θ_i and ``(g_i⁺ − g_i)·w_i``; the
server sets ``g += Σ (g_i⁺ − g_i)·w_i / N`` and ``w = mean_{i∈S} θ_i + mean_{all i} h_i``.
Parameters θ are the shared trainable tensors; buffers are averaged as in FedAvg.
"""

from __future__ import annotations

import math

import torch

from fedrepro.fl.algorithm import Algorithm, ClientCtx, Payload
from fedrepro.fl.tensors import moved, named_state, per_client_moved, take, weighted_sum


class FedDC(Algorithm):
    name = "feddc"

    def __init__(self, alpha: float = 0.01, max_grad_norm: float = 10.0, **kw):
        kw.setdefault("weighting", "uniform")  # FedDC averages the selected models uniformly
        super().__init__(**kw)
        self.alpha, self.max_grad_norm = float(alpha), float(max_grad_norm)

    def setup(self, model, num_clients: int) -> None:
        super().setup(model, num_clients)
        self.keys = self.shared_trainable
        state = named_state(model)
        self.g = {k: torch.zeros_like(state[k]) for k in self.keys}
        self.h: dict[int, dict[str, torch.Tensor]] = {}
        self.gi: dict[int, dict[str, torch.Tensor]] = {}
        sizes = self.client_sizes or [1] * num_clients
        mean = sum(sizes) / len(sizes)
        self.wi = [n / mean for n in sizes]
        tcfg = self.train_cfg
        batches = math.ceil(mean / int(tcfg.get("batch_size", 1)))
        self.k_eta = int(tcfg.get("local_epochs", 1)) * batches * float(tcfg.get("lr", 1.0))

    def _zeros(self) -> dict[str, torch.Tensor]:
        return {k: torch.zeros_like(v) for k, v in self.g.items()}

    def client_begin(self, ctx: ClientCtx) -> None:
        i = ctx.client
        h, gi, wi = self.h.get(i) or self._zeros(), self.gi.get(i) or self._zeros(), self.wi[i]
        state = named_state(ctx.model)
        self._terms = [
            (state[k], ctx.received[k] - h[k], self.g[k] / wi - gi[k]) for k in self.keys
        ]
        self._params = [state[k] for k in self.keys]
        self._coef = self.alpha / wi

    @torch.no_grad()
    def correct_gradients(self, ctx: ClientCtx) -> None:
        for theta, anchor, linear in self._terms:
            if theta.grad is not None:
                theta.grad.add_(theta - anchor, alpha=self._coef).add_(linear)
        torch.nn.utils.clip_grad_norm_(self._params, self.max_grad_norm)

    def client_end(self, ctx: ClientCtx) -> Payload:
        i, wi = ctx.client, self.wi[ctx.client]
        theta = take(ctx.model, self.shared)
        h, gi = self.h.get(i) or self._zeros(), self.gi.get(i) or self._zeros()
        delta = {k: theta[k] - ctx.received[k] for k in self.keys}
        self.h[i] = {k: h[k] + delta[k] for k in self.keys}
        new_gi = {k: gi[k] - self.g[k] / wi - delta[k] / self.k_eta for k in self.keys}
        self.gi[i] = new_gi
        state_delta = {k: (new_gi[k] - gi[k]) * wi for k in self.keys}
        return Payload(ctx.client, ctx.num_samples, ctx.steps, theta, extra=state_delta)

    def aggregate(self, current, payloads):
        mixed = weighted_sum([p.tensors for p in payloads], self.weights(payloads))
        n = self.num_clients
        for p in payloads:
            for k in self.keys:
                self.g[k].add_(p.extra[k], alpha=1.0 / n)
        for k in self.keys:
            drift = sum(h[k] for h in self.h.values()) / n  # clients never seen have h = 0
            mixed[k] = mixed[k] + drift
        return mixed

    def downlink(self, current, r):
        return {**current, **{f"state.{k}": v for k, v in self.g.items()}}

    def state_dict(self) -> dict:
        return {
            "g": moved(self.g, "cpu"),
            "h": per_client_moved(self.h, "cpu"),
            "gi": per_client_moved(self.gi, "cpu"),
        }

    def load_state_dict(self, state: dict) -> None:
        device = next(iter(self.g.values())).device
        self.g = moved(state["g"], device)
        self.h = per_client_moved(state["h"], device)
        self.gi = per_client_moved(state["gi"], device)
