"""pFedPG (Yang et al. ICCV 2023; FedHPL App. B.3): a prompt generator on the server.

Each client tunes visual prompts and its own head on a frozen ViT (``tuning: vpt_shallow``,
10 prompts in FedHPL's setting) and keeps both. The server holds a generator that maps a
learnable descriptor per client to that client's prompts; each round it sends client k its
generated prompts P_k, the client starts from them, trains, and sends back the update
Δ_k = P_k' − P_k. The server then takes one step of ``server_lr`` along Σ_k (∂P_k/∂φ)ᵀ Δ_k / K,
a gradient step on the mean of ½‖G_φ(k) − (P_k + Δ_k)‖² (the generator's architecture is our
reading: docs/methods/fedhpl.md). Zero updates leave the generator unchanged.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.fl.algorithm import Algorithm, ClientCtx, Payload
from fedrepro.fl.tensors import named_state

PROMPTS = "prompts"  # the prompt tensor of a PromptedViT ([1, 1, n, d] when shallow)


class PromptGenerator(nn.Module):
    """Client k's prompts: its descriptor tokens D_k ([n, d]) attend over shared base prompts
    B ([n, d]): P_k = D_k + softmax(D_k W_q (B W_k)ᵀ / √d) B W_v."""

    def __init__(self, num_clients: int, num_prompts: int, dim: int) -> None:
        super().__init__()
        self.base = nn.Parameter(torch.randn(num_prompts, dim) * 0.02)
        self.descriptors = nn.Parameter(torch.randn(num_clients, num_prompts, dim) * 0.02)
        self.query, self.key, self.value = (nn.Linear(dim, dim) for _ in range(3))

    def forward(self, client: int) -> torch.Tensor:
        d = self.descriptors[client]
        scores = self.query(d) @ self.key(self.base).T / math.sqrt(d.shape[-1])
        return d + F.softmax(scores, dim=-1) @ self.value(self.base)


class PFedPG(Algorithm):
    name = "pfedpg"

    def __init__(self, server_lr: float = 1.0, **kw):
        super().__init__(**kw)
        self.server_lr = float(server_lr)
        self.generator: PromptGenerator | None = None

    def local_keys(self, model: nn.Module) -> set[str]:
        return set(named_state(model))

    def setup(self, model: nn.Module, num_clients: int) -> None:
        super().setup(model, num_clients)
        prompts = dict(model.named_parameters()).get(PROMPTS)
        if prompts is None:
            raise ValueError("algorithm pfedpg needs model.tuning: vpt_shallow or vpt_deep")
        self.shape = tuple(prompts.shape)
        self.generator = PromptGenerator(num_clients, self.shape[-2], self.shape[-1])
        self.optimizer = torch.optim.SGD(self.generator.parameters(), lr=self.server_lr)

    def server_parameters(self) -> int:
        return sum(p.numel() for p in self.generator.parameters())

    def exchanges(self) -> bool:
        return True

    def _prompts(self, client: int) -> torch.Tensor:
        """The generated prompts of ``client`` in the model's prompt shape (every layer the
        same for deep prompts)."""
        return self.generator(client).expand(self.shape)

    def downlink_to(self, client: int, down: dict) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            return {PROMPTS: self._prompts(client).detach().clone()}

    def client_begin(self, ctx: ClientCtx) -> None:
        if PROMPTS in ctx.downloaded:
            prompts = dict(ctx.model.named_parameters())[PROMPTS]
            with torch.no_grad():
                prompts.copy_(ctx.downloaded[PROMPTS])

    def client_end(self, ctx: ClientCtx) -> Payload:
        now = dict(ctx.model.named_parameters())[PROMPTS].detach()
        start = ctx.downloaded.get(PROMPTS, now).to(now.device)
        return Payload(ctx.client, ctx.num_samples, ctx.steps, {}, {"delta": now - start})

    def aggregate(self, current: dict, payloads: list[Payload]) -> dict[str, torch.Tensor]:
        self.optimizer.zero_grad()
        pull = sum(
            (self._prompts(p.client) * p.extra["delta"].cpu().float()).sum() for p in payloads
        )
        (-pull / len(payloads)).backward()
        self.optimizer.step()
        return current

    def state_dict(self) -> dict:
        return {"generator": self.generator.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if "generator" in state:
            self.generator.load_state_dict(state["generator"])
            self.optimizer.load_state_dict(state["optimizer"])
