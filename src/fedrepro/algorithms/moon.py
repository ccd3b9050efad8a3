"""MOON (Li, He, Song 2021): model-contrastive local training.

A projection MLP (``Linear(d, d) → ReLU → Linear(d, out)``) is attached to the model and shared
like any trainable tensor. Locally the loss is ``CE + μ·ℓ_con`` with
``ℓ_con = −log e^{cos(z, z_g)/τ} / (e^{cos(z, z_g)/τ} + e^{cos(z, z_prev)/τ})``: ``z`` the
projection of the representation ``forward_head(forward_features(x), pre_logits=True)``,
``z_g`` the same from the received global model, ``z_prev`` from this client's model after its
previous round (the initial global model before that). The classifier keeps reading the
representation (a projection head beside it, not in front of it: no model surgery on timm
heads). ``projection: none`` contrasts the representation itself and sends only the model
(FedIns's MOON row counts the plain ViT-B, 85.80 M). μ = 0 is FedAvg.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.fl.algorithm import Algorithm, ClientCtx, Payload
from fedrepro.fl.contrastive import representation
from fedrepro.fl.tensors import per_client_moved, put, take

PROJECTION = "moon_projection"


def contrastive_loss(
    z: torch.Tensor, z_global: torch.Tensor, z_prev: torch.Tensor, temperature: float
) -> torch.Tensor:
    """MOON's ℓ_con, mean over the batch (log 2 when all three representations agree)."""
    pos = F.cosine_similarity(z, z_global, dim=-1)
    neg = F.cosine_similarity(z, z_prev, dim=-1)
    logits = torch.stack([pos, neg], dim=1) / temperature
    return F.cross_entropy(logits, torch.zeros(len(z), dtype=torch.long, device=z.device))


class Moon(Algorithm):
    name = "moon"

    def __init__(
        self,
        mu: float = 1.0,
        temperature: float = 0.5,
        proj_dim: int = 256,
        projection: str = "mlp",
        **kw,
    ):
        super().__init__(**kw)
        if projection not in ("mlp", "none"):
            raise ValueError(f"algorithm.projection: '{projection}' (allowed: mlp, none)")
        self.mu, self.temperature, self.proj_dim = float(mu), float(temperature), int(proj_dim)
        self.projection = projection

    def setup(self, model: nn.Module, num_clients: int) -> None:
        if not hasattr(model, "forward_features"):
            raise ValueError(f"moon needs forward_features/forward_head; {type(model).__name__}")
        if self.projection == "mlp" and not hasattr(model, PROJECTION):
            d = model.num_features
            device = next(model.parameters()).device
            head = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, self.proj_dim))
            model.add_module(PROJECTION, head.to(device))
        super().setup(model, num_clients)
        self.previous: dict[int, dict[str, torch.Tensor]] = {}
        self._initial = take(model, self.shared)
        self._global_ref = copy.deepcopy(model).requires_grad_(False)
        self._prev_ref = copy.deepcopy(model).requires_grad_(False)

    def client_begin(self, ctx: ClientCtx) -> None:
        put(self._global_ref, ctx.received)
        put(self._prev_ref, self.previous.get(ctx.client, self._initial))
        self._global_ref.train(ctx.model.training)
        self._prev_ref.train(ctx.model.training)

    def objective(self, ctx: ClientCtx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        model = ctx.model
        feats = representation(model, x)
        ce = F.cross_entropy(model.get_classifier()(feats), y)
        if self.mu == 0.0:
            return ce
        z = self._project(model, feats)
        with torch.no_grad():
            z_g = self._project(self._global_ref, representation(self._global_ref, x))
            z_p = self._project(self._prev_ref, representation(self._prev_ref, x))
        return ce + self.mu * contrastive_loss(z, z_g, z_p, self.temperature)

    def _project(self, model: nn.Module, feats: torch.Tensor) -> torch.Tensor:
        return getattr(model, PROJECTION)(feats) if self.projection == "mlp" else feats

    def client_end(self, ctx: ClientCtx) -> Payload:
        payload = super().client_end(ctx)
        self.previous[ctx.client] = {k: v.clone() for k, v in payload.tensors.items()}
        return payload

    def state_dict(self) -> dict:
        return {"previous": per_client_moved(self.previous, "cpu")}

    def load_state_dict(self, state: dict) -> None:
        device = next(iter(self._initial.values())).device
        self.previous = per_client_moved(state["previous"], device)
