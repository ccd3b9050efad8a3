"""ResNet-26 topology and its readiness for parallel 1×1 adapters."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.models.registry import create_backbone
from fedrepro.models.resnet26 import BasicBlock, ResNet26, conv3x3_names


class _Parallel(nn.Module):
    """conv(x) + adapter(x): the shape Rebuffi's parallel adapter will take."""

    def __init__(self, conv: nn.Conv2d) -> None:
        super().__init__()
        self.conv = conv
        self.adapter = nn.Conv2d(conv.in_channels, conv.out_channels, 1, conv.stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x) + self.adapter(x)


def _wrap_all(model: nn.Module) -> list[_Parallel]:
    wrapped = []
    for name in conv3x3_names(model):
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        wrapped.append(_Parallel(getattr(parent, attr)))
        setattr(parent, attr, wrapped[-1])
    return wrapped


def test_spatial_path_and_key_names():
    model = ResNet26(10)
    x = torch.randn(1, 3, 72, 72)
    sizes = []
    for stage in (model.layer1, model.layer2, model.layer3):
        stage.register_forward_hook(lambda m, i, o: sizes.append(o.shape[-1]))
    with torch.no_grad():
        model(x)
    assert sizes == [72, 36, 18]
    keys = model.state_dict().keys()
    for key in ("pre_conv.weight", "pre_bn.running_var", "layer1.0.conv1.weight"):
        assert key in keys
    assert {"end_bn_relu.0.weight", "linears.weight", "linears.bias"} <= set(keys)
    assert not any(k.endswith("bias") and "conv" in k for k in keys)  # no conv biases


def test_zero_pad_shortcut_is_parameter_free_and_handles_odd_sizes():
    block = BasicBlock(4, 8, stride=2)
    assert sum(p.numel() for p in block.parameters()) == 9 * 4 * 8 + 9 * 8 * 8 + 4 * 8
    x = torch.randn(2, 4, 9, 9)
    short = block.shortcut(x)
    assert short.shape == (2, 8, 5, 5) == block(x).shape
    assert torch.equal(short[:, 4:], torch.zeros_like(short[:, 4:]))
    assert torch.allclose(short[:, :4, :4, :4], F.avg_pool2d(x[..., :8, :8], 2))
    with pytest.raises(ValueError):
        BasicBlock(8, 4)


def test_parallel_adapters_drop_in_without_forward_changes():
    torch.manual_seed(0)
    model = create_backbone("resnet26_mini", num_classes=5).eval()
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        base = model(x)
        adapters = _wrap_all(model)
        assert len(adapters) == 1 + 2 * 3  # stem + two per block, 1 block per stage
        for a in adapters:
            nn.init.zeros_(a.adapter.weight)
        assert torch.allclose(model(x), base, atol=1e-6)
        for a in adapters:
            nn.init.normal_(a.adapter.weight, std=0.05)
        adapted = model(x)
        assert not torch.allclose(adapted, base, atol=1e-3)
        # Folding each adapter into the centre tap of its 3×3 conv gives the same network.
        for a in adapters:
            a.conv.weight[:, :, 1, 1] += a.adapter.weight[:, :, 0, 0]
            a.adapter.weight.zero_()
        assert torch.allclose(model(x), adapted, atol=1e-5)
