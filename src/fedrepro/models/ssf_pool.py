"""FedIns's instance-adaptive model: an SSF pool with learnable keys (FedIns §3.3–3.4, Eq. 9).

A pool of ``M`` entries, each an SSF set over the ViT's sites, a key ``k_m ∈ R^d`` and a linear
head. For an input ``x`` the query ``q(x)`` is the final-LN CLS token of a separate, frozen copy
of the pretrained ViT; the ``c`` entries with the largest cos(q, k_m) are selected and their SSF
sets and heads averaged, per instance, in one batched forward (no Python loop over instances).
``q`` is computed once per image where the input repeats (``models.query_cache``).
``reduce_sim`` (Σ over the selected keys of the cosine, mean over the batch) is kept for the
key loss ``(1 − w)·CE + w·(1 − reduce_sim)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.models.query_cache import QueryCache, frozen_query
from fedrepro.models.ssf import add_ssf, ssf_modules

__all__ = ["SSFPoolViT", "select_top"]


def select_top(
    query: torch.Tensor, keys: torch.Tensor, c: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices ``[B, c]`` of the ``c`` keys most cosine-similar to each query, and the cosines."""
    cos = F.normalize(query, dim=-1) @ F.normalize(keys, dim=-1).T
    return cos.topk(c, dim=1).indices, cos


class SSFPoolViT(nn.Module):
    """``vit`` gets an SSF pool; ``query`` (a frozen copy of the pretrained ViT) picks entries.

    Trainable: the SSF pool, the keys and the pooled heads. ``vit``'s own head is unused (it is
    reset to none). ``scope="batch"`` reproduces the 2023 code (one batch-averaged SSF)."""

    def __init__(
        self,
        vit: nn.Module,
        query: nn.Module,
        num_classes: int,
        pool_size: int = 25,
        top_c: int = 3,
        scope: str = "instance",
    ) -> None:
        super().__init__()
        if not 1 <= top_c <= pool_size:
            raise ValueError(f"top_c must be in 1..pool_size ({pool_size}), got {top_c}")
        if scope not in ("instance", "batch"):
            raise ValueError(f"scope: '{scope}' (allowed: instance, batch)")
        vit.reset_classifier(0)
        self.vit = add_ssf(vit, pool_size)
        self.query = query.eval().requires_grad_(False)
        self.query_cache = QueryCache()  # q per image where the engine names it (query_cache)
        dim = vit.num_features
        self.keys = nn.Parameter(torch.empty(pool_size, dim))
        self.head_weight = nn.Parameter(torch.empty(pool_size, num_classes, dim))
        self.head_bias = nn.Parameter(torch.zeros(pool_size, num_classes))
        nn.init.trunc_normal_(self.keys, std=0.02)
        nn.init.kaiming_normal_(self.head_weight)
        self.top_c = top_c
        self.scope = scope
        self.reduce_sim = torch.zeros(())
        self._ssfs = ssf_modules(self.vit)  # set on every forward: walk the modules once
        for ssf in self._ssfs:
            ssf.scope = scope

    def train(self, mode: bool = True) -> SSFPoolViT:
        super().train(mode)
        self.query.eval()  # the query model stays in inference mode
        return self

    def get_classifier(self) -> nn.Module:
        return nn.Identity()  # heads live in the pool; nothing is a plain classifier

    def inference_extras(self) -> list[nn.Parameter]:
        """What a deployed model keeps beyond the backbone and its heads: the SSF pool cannot
        be merged ahead of the input that selects from it, so it stays, with its keys."""
        return [p for ssf in self._ssfs for p in ssf.parameters()] + [self.keys]

    def select(self, x: torch.Tensor) -> torch.Tensor:
        """Pick entries for each instance; sets every SSF's selection and ``reduce_sim``."""
        q = frozen_query(self.query, self.query_cache, x)
        idx, cos = select_top(q, self.keys, self.top_c)
        self.reduce_sim = cos.gather(1, idx).sum(1).mean()
        for ssf in self._ssfs:
            ssf.selection = idx
        return idx

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idx = self.select(x)
        feats = self.vit.forward_head(self.vit.forward_features(x), pre_logits=True)
        weight, bias = self.head_weight[idx].mean(1), self.head_bias[idx].mean(1)
        if self.scope == "batch":
            return feats @ weight.mean(0).T + bias.mean(0)
        return torch.einsum("bd,bkd->bk", feats, weight) + bias
