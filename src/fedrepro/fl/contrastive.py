"""Contrastive losses over two augmented views (FedICON §4.1.1 Eq. 4–5, §4.2 Eq. 7).

``z`` holds 2B L2-normalised representations: rows ``i`` and ``i + B`` are the two views of
sample ``i``. For an anchor ``a`` the candidates ``A(a)`` are the other 2B − 1 views and the
positives ``P(a)`` those of them with ``a``'s label (supervised, SupCon) or only ``a``'s twin
view (unsupervised, NT-Xent / SimCLR). The loss of ``a`` is
``−1/|P(a)| Σ_p log(exp(z_a·z_p/τ) / Σ_{b∈A(a)} exp(z_a·z_b/τ))``, averaged over the batch
(the paper writes a sum over the dataset; a batch mean keeps the step size independent of
the batch). ``base_temperature`` multiplies by τ/τ_b as the SupCon reference code and
FedICON's released code do; the paper's Eq. 4 has no such factor (``None``, the default).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def representation(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The model's representation before its classifier (timm's ``pre_logits``)."""
    return model.forward_head(model.forward_features(x), pre_logits=True)


def normalized(h: torch.Tensor) -> torch.Tensor:
    """Representations on the unit sphere (the contrastive features)."""
    return F.normalize(h, dim=1)


def contrastive_loss(
    z: torch.Tensor,
    labels: torch.Tensor | None = None,
    temperature: float = 0.1,
    base_temperature: float | None = None,
) -> torch.Tensor:
    """SupCon over ``labels`` (one per view, 2B) or, without labels, NT-Xent (twin views)."""
    n = z.shape[0]
    if n % 2:
        raise ValueError(f"contrastive_loss: {n} rows; expected two views of each sample")
    eye = torch.eye(n, dtype=torch.bool, device=z.device)
    logits = (z @ z.T / temperature).masked_fill(eye, float("-inf"))
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    if labels is None:
        rows = torch.arange(n, device=z.device)
        positive = rows.roll(n // 2)[:, None] == rows[None, :]  # each view's twin
    else:
        if labels.shape[0] != n:
            raise ValueError(f"contrastive_loss: {labels.shape[0]} labels for {n} views")
        positive = (labels[:, None] == labels[None, :]) & ~eye
    per_anchor = -torch.where(positive, log_prob, 0.0).sum(1) / positive.sum(1)
    scale = 1.0 if base_temperature is None else temperature / base_temperature
    return scale * per_anchor.mean()


def online_contrastive_loss(
    anchor: torch.Tensor, positive: torch.Tensor, memory: torch.Tensor, temperature: float = 0.1
) -> torch.Tensor:
    """FedICON's online Eq. 7 (§4.2, last paragraph) for one test sample: −log of
    exp(z_x·z'_x/τ) over the sum of exp(z_x·z_a/τ) for a in the memory and the twin view,
    the rows normalised representations (``anchor``, ``positive``: 1×d, ``memory``: U×d)."""
    logits = torch.cat([anchor @ positive.T, anchor @ memory.T], dim=1) / temperature
    return F.cross_entropy(logits, torch.zeros(len(anchor), dtype=torch.long, device=anchor.device))
