"""SSF: scale and shift deep features of a frozen timm ViT (Lian et al. 2022; FedIns §3.2).

After each chosen operation ``y = op(x)`` the features become ``γ ⊙ y + β`` (over the last dim,
or over channels for the patch-embedding conv). Insertion points follow the FedIns code: the
patch-embedding conv, and per block LN1, the qkv linear, the attention projection, LN2, fc1
(before GELU) and fc2, then the final LN: 2·(768 + 12·8448 + 768) = 205,824 scalars for
ViT-B/16. Every op is affine in its output, so :func:`merge_ssf` folds (γ, β) into its weights
and bias: the merged ViT has the base's structure and parameter count and the same outputs.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["SSF", "SSFWrap", "add_ssf", "merge_ssf", "ssf_modules", "ssf_sites"]

INIT_STD = 0.02  # γ ~ N(1, 0.02²), β ~ N(0, 0.02²)


class SSF(nn.Module):
    """Per-feature scale ``gamma`` and shift ``beta``; ``channel_dim`` 1 for conv maps.

    ``gamma``/``beta`` are ``[pool_size, dim]``: one row for plain SSF, ``M`` rows for FedIns's
    pool. With a pool, the owner sets ``selection`` (``[B, c]`` row indices per instance) before
    each forward; instance ``b`` then uses the mean of its ``c`` rows, all instances in one
    batched op (``scope="batch"`` averages over the batch too, as the 2023 FedIns code did)."""

    def __init__(self, dim: int, channel_dim: int = -1, pool_size: int = 1) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.empty(pool_size, dim))
        self.beta = nn.Parameter(torch.empty(pool_size, dim))
        self.channel_dim = channel_dim
        self.selection: torch.Tensor | None = None
        self.scope = "instance"
        nn.init.normal_(self.gamma, 1.0, INIT_STD)
        nn.init.normal_(self.beta, 0.0, INIT_STD)

    def coefficients(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(γ, β): ``[dim]`` shared by the batch, or ``[B, dim]`` per instance."""
        if self.selection is None:
            if self.gamma.shape[0] != 1:
                raise RuntimeError("an SSF pool needs a selection before its forward")
            return self.gamma[0], self.beta[0]
        gamma, beta = self.gamma[self.selection].mean(1), self.beta[self.selection].mean(1)
        if self.scope == "batch":
            return gamma.mean(0), beta.mean(0)
        return gamma, beta

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        gamma, beta = self.coefficients()
        lead = (y.shape[0],) if gamma.ndim == 2 else (1,)
        if self.channel_dim == 1:
            shape = (*lead, -1) + (1,) * (y.ndim - 2)
        else:
            shape = (*lead,) + (1,) * (y.ndim - 2) + (-1,)
        return y * gamma.reshape(shape) + beta.reshape(shape)


class SSFWrap(nn.Module):
    """``ssf(base(x))`` for a Linear, Conv2d or LayerNorm ``base``."""

    def __init__(self, base: nn.Module, pool_size: int = 1) -> None:
        super().__init__()
        self.base = base
        if isinstance(base, nn.Linear):
            self.ssf = SSF(base.out_features, pool_size=pool_size)
        elif isinstance(base, nn.Conv2d):
            self.ssf = SSF(base.out_channels, channel_dim=1, pool_size=pool_size)
        elif isinstance(base, nn.LayerNorm) and base.elementwise_affine:
            self.ssf = SSF(base.normalized_shape[-1], pool_size=pool_size)
        else:
            raise TypeError(f"SSF folds into Linear, Conv2d or affine LayerNorm, not {base}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ssf(self.base(x))

    @torch.no_grad()
    def merged(self) -> nn.Module:
        """The base op with (γ, β) folded in: W' = diag(γ)·W, b' = γ ⊙ b + β.

        With a pool, the current selection must give one (γ, β) (one instance, or batch scope)."""
        base, (gamma, beta) = self.base, self.ssf.coefficients()
        if gamma.ndim == 2:
            if gamma.shape[0] != 1:
                raise ValueError("merge needs one SSF: select for a single instance first")
            gamma, beta = gamma[0], beta[0]
        weight = base.weight
        weight.mul_(gamma.view((-1,) + (1,) * (weight.ndim - 1)))
        if base.bias is None:
            base.bias = nn.Parameter(torch.zeros_like(beta), requires_grad=weight.requires_grad)
        base.bias.mul_(gamma).add_(beta)
        return base


def ssf_sites(model: nn.Module) -> list[str]:
    """Module names that get an SSF, in forward order (FedIns's insertion points)."""
    if not all(hasattr(model, a) for a in ("patch_embed", "blocks", "norm")):
        raise ValueError(f"{type(model).__name__} is not a timm VisionTransformer; SSF needs one")
    sites = ["patch_embed.proj"]
    for i in range(len(model.blocks)):
        b = f"blocks.{i}"
        sites += [f"{b}.norm1", f"{b}.attn.qkv", f"{b}.attn.proj", f"{b}.norm2"]
        sites += [f"{b}.mlp.fc1", f"{b}.mlp.fc2"]
    return [*sites, "norm"]


def _replace(model: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, attr = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, attr, module)


def add_ssf(model: nn.Module, pool_size: int = 1) -> nn.Module:
    """Freeze the ViT, wrap every site with a fresh SSF, keep the classifier trainable.

    SSF inits come from torch's global RNG: a seeded build gives all clients one init."""
    sites = ssf_sites(model)
    for p in model.parameters():
        p.requires_grad_(False)
    for name in sites:
        _replace(model, name, SSFWrap(model.get_submodule(name), pool_size))
    for p in model.get_classifier().parameters():
        p.requires_grad_(True)
    return model


def ssf_modules(model: nn.Module) -> list[SSF]:
    return [m for m in model.modules() if isinstance(m, SSF)]


def merge_ssf(model: nn.Module) -> nn.Module:
    """Fold every SSF into its op (in place): the base ViT again, with the same outputs."""
    for name, module in list(model.named_modules()):
        if isinstance(module, SSFWrap):
            _replace(model, name, module.merged())
    return model
