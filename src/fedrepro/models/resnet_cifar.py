"""FedPCE's CIFAR-style ResNet-18 with InstanceNorm, trained from scratch.

3×3 stride-1 stem followed by the 3×3/2 max-pool FedPCE's code keeps, four stages of BasicBlocks
with 1×1 conv + norm shortcuts, and an extra norm on the pooled features before the classifier.
InstanceNorm (affine, no running statistics) normalises each sample alone, so train and eval
behave the same and nothing about other clients' data is stored in the model. The head norm
standardises the 512-d feature vector per sample (spatial instance norm of a 1×1 map is
degenerate) and then applies a per-feature γ, β: 21 norm layers, 5,312 channels in total, whose
γ/β FedPCE later generates from client embeddings.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["CifarResNet", "InstanceNorm", "instance_norm"]

_NORMS = ("instance", "batch")


def instance_norm(
    x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float
) -> torch.Tensor:
    """Instance norm of an N×C×H×W batch, computed as a group norm of one channel a group: the
    same statistics (each sample's and channel's mean and variance over H×W), at FedPCE's mini
    shapes about 3× faster forward and backward on a CPU than ``F.instance_norm``
    (docs/methods/fedpce.md, "Mini scale"). As by ``F.instance_norm``, a 1×1 map is refused."""
    if x.shape[-1] * x.shape[-2] == 1:
        raise ValueError(f"instance norm of a 1×1 map ({tuple(x.shape)}): nothing to normalise")
    return F.group_norm(x, x.shape[1], weight, bias, eps)


class InstanceNorm(nn.InstanceNorm2d):
    """``nn.InstanceNorm2d`` (affine, no running statistics) through ``instance_norm``."""

    def __init__(self, channels: int) -> None:
        super().__init__(channels, affine=True, track_running_stats=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return instance_norm(x, self.weight, self.bias, self.eps)


def _norm2d(kind: str, channels: int) -> nn.Module:
    return InstanceNorm(channels) if kind == "instance" else nn.BatchNorm2d(channels)


class _Block(nn.Module):
    """BasicBlock with a 1×1 conv + norm projection when stride or width changes."""

    def __init__(self, in_planes: int, planes: int, stride: int, norm: str) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.norm1 = _norm2d(norm, planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.norm2 = _norm2d(norm, planes)
        self.downsample = None
        if stride != 1 or in_planes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False), _norm2d(norm, planes)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.norm1(self.conv1(x)))
        y = self.norm2(self.conv2(y))
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.relu(y + shortcut)


class CifarResNet(nn.Module):
    """ResNet with a CIFAR stem; ``norm='instance'`` is FedPCE's, ``'batch'`` its later code's."""

    def __init__(
        self,
        num_classes: int = 10,
        in_chans: int = 3,
        widths: Sequence[int] = (64, 128, 256, 512),
        depths: Sequence[int] = (2, 2, 2, 2),
        norm: str = "instance",
    ) -> None:
        super().__init__()
        if norm not in _NORMS:
            raise ValueError(f"norm must be one of {_NORMS}, got {norm!r}")
        self.conv1 = nn.Conv2d(in_chans, widths[0], 3, stride=1, padding=1, bias=False)
        self.norm1 = _norm2d(norm, widths[0])
        self.stage_names = [f"layer{i + 1}" for i in range(len(widths))]
        in_planes = widths[0]
        for i, (name, planes, depth) in enumerate(
            zip(self.stage_names, widths, depths, strict=True)
        ):
            stride = 1 if i == 0 else 2
            blocks = [_Block(in_planes, planes, stride, norm)]
            blocks += [_Block(planes, planes, 1, norm) for _ in range(depth - 1)]
            self.add_module(name, nn.Sequential(*blocks))
            in_planes = planes
        self.num_features = in_planes
        self.head_norm = (
            nn.LayerNorm(in_planes) if norm == "instance" else nn.BatchNorm1d(in_planes)
        )
        self.num_classes = num_classes
        self.fc = self._classifier(num_classes)

    def _classifier(self, num_classes: int) -> nn.Module:
        return nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity()

    def get_classifier(self) -> nn.Module:
        return self.fc

    def reset_classifier(self, num_classes: int) -> None:
        self.num_classes = num_classes
        self.fc = self._classifier(num_classes)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.norm1(self.conv1(x)))
        x = F.max_pool2d(x, 3, stride=2, padding=1)
        for name in self.stage_names:
            x = getattr(self, name)(x)
        return x

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        x = self.head_norm(x.mean(dim=(2, 3)))
        return x if pre_logits else self.fc(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))
