"""Paper-scale structure without weights: parameter counts the papers' tables quote."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedrepro.models.params import count_params, to_mega
from fedrepro.models.registry import create_backbone, head_keys, norm_keys
from fedrepro.models.resnet26 import ResNet26


def _meta(name: str, num_classes: int) -> nn.Module:
    with torch.device("meta"):
        return create_backbone(name, num_classes)


def _without_head(model: nn.Module) -> int:
    return count_params(model) - count_params(model, head_keys(model))


@pytest.mark.parametrize(
    ("name", "headless", "mebi"),
    [
        ("vit_small_patch16_224.augreg_in21k_ft_in1k", 21_665_664, "20.66"),
        ("vit_base_patch16_224.augreg_in21k_ft_in1k", 85_798_656, "81.82"),
        ("vit_large_patch16_224.augreg_in21k_ft_in1k", 303_301_632, "289.25"),
    ],
)
def test_fedhpl_backbone_sizes(name, headless, mebi):
    model = _meta(name, 10)
    assert _without_head(model) == headless
    assert f"{to_mega(headless):.2f}" == mebi  # FedHPL's "Backbone S/B/L = 20.66/81.82/289.25"


def test_vit_b16_in21k_with_and_without_head():
    model = _meta("vit_base_patch16_224.augreg_in21k", 21_843)
    assert count_params(model) == 102_595_923
    assert _without_head(model) == 85_798_656
    assert f"{to_mega(85_798_656, binary=False):.2f}" == "85.80"  # FedIns' "85.80 M"
    headless = _meta("vit_base_patch16_224.augreg_in21k", 0)
    assert count_params(headless) == 85_798_656


@pytest.mark.parametrize(
    ("name", "total"),
    [
        ("resnet18.tv_in1k", 11_689_512),
        ("resnet34.tv_in1k", 21_797_672),
        ("resnet50.tv_in1k", 25_557_032),
    ],
)
def test_torchvision_resnet_sizes(name, total):
    assert count_params(_meta(name, 1000)) == total


def test_resnet26_breakdown():
    """Rebuffi's ResNet-26 (docs/methods/adapters.md#model): 25 convs + 1 FC, 5,817,258
    parameters."""
    model = _meta("resnet26", 10)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 25  # 25 convs + 1 FC = 26
    assert sum(m.weight.numel() for m in convs) == 5_806_944
    assert count_params(model, norm_keys(model)) == 7_744
    assert count_params(model) == 5_806_944 + 7_744 + 256 * 10 + 10 == 5_817_258
    with torch.device("meta"):
        out = model.forward_features(torch.empty(1, 3, 72, 72))
    assert out.shape[-1] == 9  # 72 → 36 → 18 → 9


def test_public_reimplementation_layout_counts():
    """The 64-wide, stride-1-first-stage layout of a public re-implementation."""
    with torch.device("meta"):
        model = ResNet26(10, stem_width=64, strides=(1, 2, 2))
    assert sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Conv2d)) == 5_826_240
    assert count_params(model, norm_keys(model)) == 7_808


def test_fedpce_resnet18_instance_norm_sizes():
    model = _meta("resnet18_in", 10)
    norms = [m for m in model.modules() if isinstance(m, (nn.InstanceNorm2d, nn.LayerNorm))]
    assert len(norms) == 21
    assert count_params(model) == 11_174_986
    assert count_params(model, norm_keys(model)) == 10_624  # FedBN's fine-tuned parameters
    assert count_params(model, head_keys(model)) == 5_130  # FedPer's
