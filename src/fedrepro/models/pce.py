"""FedPCE's personalised client embeddings (FedPCE §3.3, §4.3): a client is one vector v ∈ R^E
and every normalisation layer's scale and shift are generated from it.

Each norm layer k of the backbone (instance norms and the head's feature norm) loses its own
affine parameters; a global MLP_k (Linear(E→hidden) → ReLU → Linear(hidden→2·C_k)) maps v to
(o_γ, o_β) and the layer applies γ = 1 + o_γ, β = o_β after normalising (the authors' code,
somcogo/fedpce@b673d68:models/embedding_functionals.py, ``1 + gen_weights[:C]``). A zero last
layer gives γ = 1, β = 0: the plain network with identity affine. The γ/β are computed once
per forward from the current v, so gradients reach v and every MLP.

Tensor names: ``embedding`` (E scalars, what stays on a client) and
``generators.<k>.{0,2}.{weight,bias}`` (global), beside the backbone's own names.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.models.resnet_cifar import instance_norm

__all__ = ["PCENet", "add_client_embedding", "norm_layers"]

_EPS = 1e-5


class GeneratedNorm(nn.Module):
    """A norm layer without parameters whose γ, β its owner sets before each forward.

    ``spatial``: instance norm over H×W per sample and channel; otherwise the feature vector is
    standardised per sample (the head norm of FedPCE's ResNet, LayerNorm statistics)."""

    def __init__(self, channels: int, spatial: bool, eps: float = _EPS) -> None:
        super().__init__()
        self.channels = channels
        self.spatial = spatial
        self.eps = eps
        self.gamma: torch.Tensor | None = None
        self.beta: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gamma is None or self.beta is None:
            raise RuntimeError("GeneratedNorm: γ/β not set (call through PCENet)")
        if self.spatial:
            return instance_norm(x, self.gamma, self.beta, self.eps)
        return F.layer_norm(x, (self.channels,), eps=self.eps) * self.gamma + self.beta


def norm_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The affine norm layers FedPCE generates, in module order (21 in FedPCE's ResNet-18)."""
    found = []
    for name, m in model.named_modules():
        instance = isinstance(m, nn.InstanceNorm2d) and m.affine
        if instance or (isinstance(m, nn.LayerNorm) and m.elementwise_affine):
            found.append((name, m))
        elif isinstance(m, nn.modules.batchnorm._BatchNorm):
            raise ValueError(
                f"model.tuning pce: {name} is a batch norm; FedPCE's network uses instance "
                "norms (backbone resnet18_in / resnet18_in_mini)"
            )
    return found


def _generator(embed_dim: int, hidden: int, channels: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(embed_dim, hidden), nn.ReLU(), nn.Linear(hidden, 2 * channels))


class PCENet(nn.Module):
    """A backbone whose norm layers' γ/β come from one client embedding through global MLPs."""

    def __init__(self, backbone: nn.Module, embed_dim: int = 32, hidden: int = 64) -> None:
        super().__init__()
        if embed_dim < 1 or hidden < 1:
            raise ValueError(f"model.tuning_options: embed_dim {embed_dim}, hidden {hidden}")
        layers = norm_layers(backbone)
        self.norms: list[GeneratedNorm] = []
        generators = []
        for name, old in layers:
            channels = (
                old.num_features if isinstance(old, nn.InstanceNorm2d) else old.weight.numel()
            )
            new = GeneratedNorm(channels, isinstance(old, nn.InstanceNorm2d), old.eps)
            parent_name, _, child = name.rpartition(".")
            parent = backbone.get_submodule(parent_name) if parent_name else backbone
            setattr(parent, child, new)
            self.norms.append(new)
            generators.append(_generator(embed_dim, hidden, channels))
        self.backbone = backbone
        self.generators = nn.ModuleList(generators)
        self.embedding = nn.Parameter(torch.zeros(embed_dim))
        self.num_classes = getattr(backbone, "num_classes", 0)
        self.embed_dim = embed_dim

    def get_classifier(self) -> nn.Module:
        return self.backbone.get_classifier()

    def generate(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Every norm layer's (γ, β) for the current embedding."""
        out = []
        for norm, gen in zip(self.norms, self.generators, strict=True):
            o = gen(self.embedding)
            out.append((1 + o[: norm.channels], o[norm.channels :]))
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for norm, (gamma, beta) in zip(self.norms, self.generate(), strict=True):
            norm.gamma, norm.beta = gamma.to(x.dtype), beta.to(x.dtype)
        return self.backbone(x)


def add_client_embedding(model: nn.Module, embed_dim: int = 32, hidden: int = 64) -> PCENet:
    """The ``pce`` tuning: FedPCE's generated norms on ``model`` (everything trains)."""
    return PCENet(model, int(embed_dim), int(hidden))
