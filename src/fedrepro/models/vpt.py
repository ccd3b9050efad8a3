"""Visual prompt tuning on a frozen timm ViT (Jia et al. 2022; FedIns/FedHPL "Prompt").

Tokens are ``[CLS, P (n prompts), E (patch tokens)]`` after the patch embedding and position
embedding (prompts get none). Shallow: one prompt set before block 1, its outputs propagate.
Deep: a fresh set before every block, replacing the previous block's outputs at the prompt
positions. Trained: prompts and the classifier; the backbone is frozen. Sizes for ViT-B/16:
shallow ``768·n``, deep ``12·768·n`` (FedIns's 10 deep prompts: 92,160).

With ``pool_size > 1`` it is FedIns's "Prompt Pool" ablation (L2P-style): ``M`` prompt sets with
learnable keys, the ``top_c`` entries closest (cosine) to the frozen ``query`` model's CLS
feature are averaged per instance, in one batched forward; ``reduce_sim`` feeds the key loss.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from fedrepro.models.query_cache import QueryCache, frozen_query
from fedrepro.models.ssf_pool import select_top

__all__ = ["PromptedViT"]


class PromptedViT(nn.Module):
    """``vit`` with ``num_prompts`` learnable prompt tokens, shallow or deep."""

    def __init__(
        self,
        vit: nn.Module,
        num_prompts: int,
        deep: bool = True,
        pool_size: int = 1,
        top_c: int = 1,
        query: nn.Module | None = None,
    ) -> None:
        super().__init__()
        if not hasattr(vit, "blocks") or not hasattr(vit, "_pos_embed"):
            raise ValueError(f"{type(vit).__name__} is not a timm VisionTransformer; VPT needs one")
        if num_prompts < 0:
            raise ValueError(f"num_prompts must be ≥ 0, got {num_prompts}")
        self.vit = vit.requires_grad_(False)
        vit.get_classifier().requires_grad_(True)
        layers = len(vit.blocks) if deep else 1
        dim = vit.embed_dim
        self.prompts = nn.Parameter(torch.empty(pool_size, layers, num_prompts, dim))
        patch = vit.patch_embed.patch_size[0]
        bound = math.sqrt(6.0 / (3 * patch * patch + dim))
        nn.init.uniform_(self.prompts, -bound, bound)
        self.num_prompts = num_prompts
        self.deep = deep
        self.top_c = top_c
        self.reduce_sim = torch.zeros(())
        if pool_size > 1:
            if query is None or not 1 <= top_c <= pool_size:
                raise ValueError("a prompt pool needs a query model and 1 ≤ top_c ≤ pool_size")
            self.query = query.eval().requires_grad_(False)
            self.query_cache = QueryCache()  # q per image where the engine names it
            self.keys = nn.Parameter(torch.empty(pool_size, dim))
            nn.init.trunc_normal_(self.keys, std=0.02)

    def inference_extras(self) -> list[nn.Parameter]:
        """Prompt tokens (and a pool's keys) stay in the deployed model: they never merge."""
        return [self.prompts] + ([self.keys] if hasattr(self, "keys") else [])

    def train(self, mode: bool = True) -> PromptedViT:
        super().train(mode)
        if hasattr(self, "query"):
            self.query.eval()
        return self

    def _prompts(self, x: torch.Tensor) -> torch.Tensor:
        """``[B or 1, layers, n, d]``: the single set, or each instance's mean of c entries."""
        if not hasattr(self, "query"):
            return self.prompts[0][None]
        q = frozen_query(self.query, self.query_cache, x)
        idx, cos = select_top(q, self.keys, self.top_c)
        self.reduce_sim = cos.gather(1, idx).sum(1).mean()
        return self.prompts[idx].mean(1)

    def get_classifier(self) -> nn.Module:
        return self.vit.get_classifier()

    @property
    def num_features(self) -> int:
        return self.vit.num_features

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        vit, n = self.vit, self.num_prompts
        chosen = self._prompts(x)
        x = vit.norm_pre(vit.patch_drop(vit._pos_embed(vit.patch_embed(x))))
        head = vit.num_prefix_tokens
        batch = x.shape[0]
        for i, block in enumerate(vit.blocks):
            if i == 0 or self.deep:
                prompts = chosen[:, i if self.deep else 0].expand(batch, -1, -1)
                rest = x[:, head + n :] if i > 0 else x[:, head:]
                x = torch.cat([x[:, :head], prompts.to(x.dtype), rest], dim=1)
            x = block(x)
        return vit.norm(x)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        return self.vit.forward_head(x, pre_logits=pre_logits)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))
