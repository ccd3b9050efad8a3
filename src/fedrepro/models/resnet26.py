"""Rebuffi et al.'s ResNet-26, the base network of Elvebakken et al. (adapters paper).

Not timm's ``resnet26`` (bottleneck, 16 M parameters, 224 px). This one takes 72 px inputs
(Visual Decathlon): a 3×3 stem (3→32, stride 1, conv + BN, no ReLU), 3 stages × 4 BasicBlocks
(widths 64/128/256, first block of each stage stride 2: 72→36→18→9), parameter-free shortcuts
(2×2 average pool, then zero channels), a final BN + ReLU, global average pool and a linear head.
25 convolutions + 1 linear layer, no conv biases: 5,817,258 parameters for 10 classes.

Every 3×3 convolution is a :class:`ConvTask`: ``BN(W * x)``, or with a parallel residual adapter
``BN(W * x + A * x)`` where ``A`` is a bias-free 1×1 conv with the conv's stride, applied to the
same input and summed *before* BN (the paper's Eq. 1). Module and tensor names are those of
Rebuffi's ``models.py`` (``pre_layers_conv``, ``layer1.0.conv1.bns.0``, ``layer1.0.conv2.1``,
``…parallel_conv.0.conv``, ``end_bns.0``, ``linears.0``), so a state dict saved from the released
network loads unchanged, and the bytes of a ``torch.save``d state dict are those the paper
measured. ``stem_width=64, strides=(1, 2, 2)`` gives the layout of a public re-implementation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Adapter", "BasicBlock", "ConvTask", "ResNet26"]


def _rebuffi_init(conv: nn.Conv2d) -> None:
    """Rebuffi's conv init, adapters included: N(0, sqrt(2 / (k·k·out)))."""
    fan_out = conv.kernel_size[0] * conv.kernel_size[1] * conv.out_channels
    nn.init.normal_(conv.weight, 0.0, math.sqrt(2.0 / fan_out))


class Adapter(nn.Module):
    """A parallel residual adapter: a bias-free 1×1 conv (attribute ``conv``, as in Rebuffi)."""

    def __init__(self, in_planes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False)
        _rebuffi_init(self.conv)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class ConvTask(nn.Module):
    """``BN(conv3x3(x) [+ adapter(x)])``; BN sits in a one-entry ``bns`` list (one task)."""

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bns = nn.ModuleList([nn.BatchNorm2d(planes)])
        self.parallel_conv: nn.ModuleList | None = None

    def add_adapter(self) -> None:
        """Attach a freshly initialised parallel 1×1 adapter (draws from torch's global RNG)."""
        if self.parallel_conv is not None:
            raise ValueError("this convolution already has an adapter")
        conv = self.conv
        self.parallel_conv = nn.ModuleList(
            [Adapter(conv.in_channels, conv.out_channels, conv.stride[0])]
        ).to(conv.weight.device)

    @torch.no_grad()
    def merge_adapter(self) -> None:
        """Fold the adapter into the 3×3 kernel's centre tap and drop it.

        Exact because both convs are linear, see the same input with the same stride, and the
        centre tap of a padding-1 3×3 kernel reads the pixel the stride-s 1×1 conv reads."""
        if self.parallel_conv is None:
            raise ValueError("this convolution has no adapter to merge")
        self.conv.weight[:, :, 1, 1] += self.parallel_conv[0].conv.weight[:, :, 0, 0]
        self.parallel_conv = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        if self.parallel_conv is not None:
            y = y + self.parallel_conv[0](x)
        return self.bns[0](y)


class BasicBlock(nn.Module):
    """ConvTask → ReLU → ConvTask, plus a parameter-free shortcut, then ReLU."""

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        if planes < in_planes:
            raise ValueError(f"zero-pad shortcut cannot shrink {in_planes} to {planes} channels")
        self.conv1 = ConvTask(in_planes, planes, stride)
        self.conv2 = nn.Sequential(nn.ReLU(inplace=True), ConvTask(planes, planes, 1))
        self.stride = stride
        self.extra_channels = planes - in_planes

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        """Average-pool then append zero channels: the shortcut adds no parameters.

        ``ceil_mode`` keeps the shape equal to the stride-2 conv's on odd sizes; on even sizes
        it is Rebuffi's plain 2×2 average pool."""
        if self.stride > 1:
            x = F.avg_pool2d(x, self.stride, ceil_mode=True)
        if self.extra_channels:
            x = F.pad(x, (0, 0, 0, 0, 0, self.extra_channels))
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv2(self.conv1(x)) + self.shortcut(x))


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
        stem_width: int = 32,
        strides: Sequence[int] = (2, 2, 2),
    ) -> None:
        super().__init__()
        if not len(widths) == len(depths) == len(strides):
            raise ValueError("widths, depths and strides need one entry per stage")
        self.pre_layers_conv = ConvTask(in_chans, stem_width, 1)
        self.stage_names = [f"layer{i + 1}" for i in range(len(widths))]
        in_planes = stem_width
        for name, planes, depth, stride in zip(
            self.stage_names, widths, depths, strides, strict=True
        ):
            blocks = [BasicBlock(in_planes, planes, stride)]
            blocks += [BasicBlock(planes, planes) for _ in range(depth - 1)]
            self.add_module(name, nn.Sequential(*blocks))
            in_planes = planes
        self.end_bns = nn.ModuleList(
            [nn.Sequential(nn.BatchNorm2d(in_planes), nn.ReLU(inplace=True))]
        )
        self.num_features = in_planes
        self.num_classes = num_classes
        self.linears = nn.ModuleList([self._classifier(num_classes)])
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                _rebuffi_init(m)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def _classifier(self, num_classes: int) -> nn.Module:
        return nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity()

    def get_classifier(self) -> nn.Module:
        return self.linears[0]

    def reset_classifier(self, num_classes: int) -> None:
        self.num_classes = num_classes
        self.linears[0] = self._classifier(num_classes)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre_layers_conv(x)
        for name in self.stage_names:
            x = getattr(self, name)(x)
        return self.end_bns[0](x)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        x = x.mean(dim=(2, 3))
        return x if pre_logits else self.linears[0](x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))
