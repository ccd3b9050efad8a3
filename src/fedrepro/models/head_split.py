"""The client model of the heterogeneous-model baselines: a ResNet body, a feature of a
common width and a linear head (FedHPL App. C.1.2, Table 7; docs/methods/fedhpl.md).

Clients of different ResNets exchange per-class features, prototypes or logits, so each
method brings the body's latent (512 for ResNet-18/34, 2048 for ResNet-50) to a common
``feature_dim`` before the head. How, is what sets the counts of Table 7:

- ``projection="pool"``: average-pooled to ``feature_dim`` (no parameters), the split of the
  methods' common reference code (TsingZ0/HtFLlib@686ed4d:system/flcore/trainmodel/models.py,
  ``BaseHeadSplit``); FedGen and FedTGP.
- ``projection="linear"``: a linear layer ``latent → feature_dim`` with bias (FedGH's
  "linear layer for aligning representations").
- ``projection="none"``: the head reads the latent itself (FedMD, FedHE).
- ``mapping=m``: the latent pooled to ``m`` and mapped to ``feature_dim`` by a bias-free
  ``m × feature_dim`` layer (FedProto's "mapping layer", 512×2048).
- ``stem=3``: the 7×7 stride-2 stem convolution and max-pool replaced by one 3×3 stride-1
  convolution (the CIFAR form of a ResNet; FedGH, FedMD, FedHE).
- ``public_classes=n``: a second head of ``n`` classes (FedMD's head for its public data).

Every parameter trains (the baselines train their whole model, App. C.1.2).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["BinMean", "HeadSplit", "PROJECTIONS"]

PROJECTIONS = ("pool", "linear", "none")


class BinMean(nn.Module):
    """``nn.AdaptiveAvgPool1d(size)`` with a backward that CUDA computes deterministically:
    PyTorch has no deterministic CUDA kernel for the adaptive pool's backward (it raises under
    ``torch.use_deterministic_algorithms``), so the gradient of each input is the sum, in
    bin order, of the output gradients of the bins that cover it, each divided by its bin's
    width, gathered by index. That is the CPU kernel's own arithmetic (zero, then each
    covering bin's share added in order), so on the CPU the gradients are the same bits as
    the adaptive pool's; the forward is the adaptive pool itself."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = int(size)
        self._cover: dict[tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}

    def cover(self, length: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        """Bin widths (``size``) and, per input, the bins covering it in order, padded with
        ``size`` (a zero column): PyTorch's bins [⌊i·L/s⌋, ⌈(i+1)·L/s⌉), so input j lies in
        bins ⌊j·s/L⌋ … ⌈(j+1)·s/L⌉ − 1. Made on the device from ``arange`` (no tensor from
        Python values), once per input length."""
        key = (length, torch.device(device))
        if key not in self._cover:
            s = self.size
            most = max(-(-(j + 1) * s // length) - j * s // length for j in range(length))
            i, j = torch.arange(s, device=device), torch.arange(length, device=device)
            widths = (-(-(i + 1) * length).div(s, rounding_mode="floor")) - (i * length).div(
                s, rounding_mode="floor"
            )
            first = (j * s).div(length, rounding_mode="floor")
            last = -(-(j + 1) * s).div(length, rounding_mode="floor") - 1
            rows = first[:, None] + torch.arange(most, device=device)[None, :]
            rows = torch.where(rows <= last[:, None], rows, s)
            self._cover[key] = (widths.float(), rows)
        return self._cover[key]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        widths, cover = self.cover(x.shape[-1], x.device)
        return _BinMeanFn.apply(x, self.size, widths, cover)

    def extra_repr(self) -> str:
        return f"size={self.size}"


class _BinMeanFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, size, widths, cover):
        ctx.save_for_backward(widths, cover)
        return F.adaptive_avg_pool1d(x, size)

    @staticmethod
    def backward(ctx, grad):
        widths, cover = ctx.saved_tensors
        share = torch.cat([grad / widths.to(grad.dtype), grad.new_zeros(*grad.shape[:-1], 1)], -1)
        out = torch.zeros(*grad.shape[:-1], cover.shape[0], dtype=grad.dtype, device=grad.device)
        for k in range(cover.shape[1]):
            out = out + share.index_select(-1, cover[:, k])
        return out, None, None, None


class HeadSplit(nn.Module):
    """``model`` (a timm ResNet with its classifier) as body → feature → head."""

    def __init__(
        self,
        model: nn.Module,
        feature_dim: int = 512,
        projection: str = "pool",
        stem: int = 7,
        mapping: int = 0,
        public_classes: int = 0,
    ) -> None:
        super().__init__()
        if projection not in PROJECTIONS:
            raise ValueError(f"head_split: projection {projection!r} (allowed: {PROJECTIONS})")
        if int(stem) not in (3, 7):
            raise ValueError(f"head_split: stem {stem} (allowed: 3, 7)")
        latent, classes = int(model.num_features), model.get_classifier().out_features
        if int(stem) == 3:
            conv = model.conv1
            model.conv1 = nn.Conv2d(conv.in_channels, conv.out_channels, 3, 1, 1, bias=False)
            model.maxpool = nn.Identity()
        model.reset_classifier(0)  # the body ends at the pooled latent
        self.body = model
        dim = latent if projection == "none" else int(feature_dim)
        if mapping:
            self.project: nn.Module = nn.Sequential(
                BinMean(int(mapping)), nn.Linear(int(mapping), dim, bias=False)
            )
        elif projection == "linear":
            self.project = nn.Linear(latent, dim)
        elif projection == "pool":
            self.project = BinMean(dim)
        else:
            self.project = nn.Identity()
        self.num_features = dim
        self.head = nn.Linear(dim, classes)
        self.public_head = nn.Linear(dim, int(public_classes)) if public_classes else None

    def get_classifier(self) -> nn.Module:
        return self.head

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The common-width feature (what prototypes and representations are made of)."""
        return self.project(self.body(x))

    def forward_public(self, x: torch.Tensor) -> torch.Tensor:
        """Logits over the public classes (FedMD)."""
        if self.public_head is None:
            raise ValueError("head_split: no public head (give public_classes)")
        return self.public_head(self.features(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))
