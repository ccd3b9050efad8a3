"""FedNova (Wang et al. 2020): average normalised updates, rescaled by τ_eff."""

from __future__ import annotations

import torch

from fedrepro.fl.algorithm import Algorithm, ClientCtx, Payload
from fedrepro.fl.tensors import take


def nova_a(steps: int, rho: float) -> float:
    """a_i = [τ − ρ(1 − ρ^τ)/(1 − ρ)] / (1 − ρ); τ when ρ = 0."""
    if rho == 0.0:
        return float(steps)
    return (steps - rho * (1 - rho**steps) / (1 - rho)) / (1 - rho)


class FedNova(Algorithm):
    """d_i = (x − y_i)/a_i; x ← x − τ_eff Σ p_i d_i with τ_eff = Σ p_i a_i.

    Batch-norm running statistics are averaged like FedAvg unless
    `nova_on_buffers` is set: then they are normalised too, as NIID-Bench does,
    which reproduces the NaN rounds the adapters paper reports.
    """

    name = "fednova"

    def __init__(self, nova_on_buffers: bool = False, **kw):
        super().__init__(**kw)
        self.nova_on_buffers = bool(nova_on_buffers)

    def setup(self, model, num_clients: int) -> None:
        super().setup(model, num_clients)
        normalised = set(self.trainable)
        self.normalised = [k for k in self.shared if k in normalised or self.nova_on_buffers]

    def client_end(self, ctx: ClientCtx) -> Payload:
        y = take(ctx.model, self.shared)
        a = nova_a(ctx.steps, ctx.momentum)
        for k in self.normalised:
            y[k] = (ctx.received[k].float() - y[k].float()) / a
        extra = {"a": torch.tensor([a], dtype=torch.float32)}
        return Payload(ctx.client, ctx.num_samples, ctx.steps, y, extra=extra)

    def aggregate(self, current, payloads):
        p = self.weights(payloads)
        mixed = super().aggregate(current, payloads)
        tau_eff = sum(w * float(q.extra["a"]) for w, q in zip(p, payloads, strict=True))
        for k in self.normalised:
            mixed[k] = (current[k].float() - tau_eff * mixed[k].float()).to(current[k].dtype)
        return mixed
