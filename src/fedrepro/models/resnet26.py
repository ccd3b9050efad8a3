"""The residual-adapters ResNet-26 (Rebuffi et al.; Elvebakken et al.'s base network).

Not timm's ``resnet26`` (bottleneck, 16 M parameters, 224 px): this one has 3 stages of BasicBlocks
(widths 64/128/256), a stride-1 3×3 stem, parameter-free avg-pool + zero-pad shortcuts, a final
BN + ReLU, and takes 72 px inputs (Visual Decathlon). Defaults follow the public re-implementation
whose weights are on Google Drive (64-wide stem, first stage stride 1): 5,826,240 conv weights +
7,808 BN affine parameters. Module names follow that release (``pre_conv``, ``layer1.0.conv1``,
``end_bn_relu.0``, ``linears``) so its state dict loads unchanged. Rebuffi's own ``models.py`` has a
32-wide stem and stride 2 in every stage (``stem_width=32, strides=(2, 2, 2)``).

Adapter-ready: every 3×3 conv is a plain ``nn.Conv2d`` attribute called on exactly the tensor a
parallel 1×1 adapter needs, and BN follows it. Replacing the conv by a module that returns
``conv(x) + adapter(x)`` (same stride) is Rebuffi's parallel adapter summed before BN, with no
change to any forward here; :func:`conv3x3_names` lists the convs to wrap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["BasicBlock", "ResNet26", "conv3x3_names"]


class BasicBlock(nn.Module):
    """3×3 conv → BN → ReLU → 3×3 conv → BN, plus a parameter-free shortcut, then ReLU."""

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        if planes < in_planes:
            raise ValueError(f"zero-pad shortcut cannot shrink {in_planes} to {planes} channels")
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.stride = stride
        self.extra_channels = planes - in_planes

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        """Average-pool then append zero channels: the shortcut adds no parameters.

        ``ceil_mode`` keeps the shape equal to the stride-2 conv's on odd sizes; on even sizes
        it is the plain 2×2 average pool of the original."""
        if self.stride > 1:
            x = F.avg_pool2d(x, self.stride, ceil_mode=True)
        if self.extra_channels:
            x = F.pad(x, (0, 0, 0, 0, 0, self.extra_channels))
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.shortcut(x))


class ResNet26(nn.Module):
    """Stem, ``len(widths)`` stages of BasicBlocks, end BN + ReLU, global average pool, linear.

    Follows timm's interface (``forward_features``, ``forward_head``, ``get_classifier``,
    ``reset_classifier``, ``num_features``) so the FL code treats it like any timm model."""

    def __init__(
        self,
        num_classes: int = 10,
        in_chans: int = 3,
        widths: Sequence[int] = (64, 128, 256),
        depths: Sequence[int] = (4, 4, 4),
        stem_width: int = 64,
        strides: Sequence[int] = (1, 2, 2),
    ) -> None:
        super().__init__()
        if not len(widths) == len(depths) == len(strides):
            raise ValueError("widths, depths and strides need one entry per stage")
        self.pre_conv = nn.Conv2d(in_chans, stem_width, 3, stride=1, padding=1, bias=False)
        self.pre_bn = nn.BatchNorm2d(stem_width)
        self.stage_names = [f"layer{i + 1}" for i in range(len(widths))]
        in_planes = stem_width
        for name, planes, depth, stride in zip(
            self.stage_names, widths, depths, strides, strict=True
        ):
            blocks = [BasicBlock(in_planes, planes, stride)]
            blocks += [BasicBlock(planes, planes) for _ in range(depth - 1)]
            self.add_module(name, nn.Sequential(*blocks))
            in_planes = planes
        self.end_bn_relu = nn.Sequential(nn.BatchNorm2d(in_planes), nn.ReLU(inplace=True))
        self.num_features = in_planes
        self.num_classes = num_classes
        self.linears = self._classifier(num_classes)
        self._init_weights()

    def _classifier(self, num_classes: int) -> nn.Module:
        return nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity()

    def _init_weights(self) -> None:
        """Rebuffi's init: conv ~ N(0, sqrt(2 / (k·k·out))), BN γ = 1, β = 0."""
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                nn.init.normal_(m.weight, 0.0, math.sqrt(2.0 / fan_out))
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def get_classifier(self) -> nn.Module:
        return self.linears

    def reset_classifier(self, num_classes: int) -> None:
        self.num_classes = num_classes
        self.linears = self._classifier(num_classes)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.pre_bn(self.pre_conv(x)))
        for name in self.stage_names:
            x = getattr(self, name)(x)
        return self.end_bn_relu(x)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        x = x.mean(dim=(2, 3))
        return x if pre_logits else self.linears(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))


def conv3x3_names(model: nn.Module) -> list[str]:
    """Names of every 3×3 conv: the ones that get a parallel 1×1 adapter (25 at full size)."""
    return [
        name
        for name, m in model.named_modules()
        if isinstance(m, nn.Conv2d) and tuple(m.kernel_size) == (3, 3)
    ]
