"""SSF on timm ViTs (docs/methods/fedins.md#ssf): sizes, frozen sets, exact re-parameterisation."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedrepro.models.params import count_params
from fedrepro.models.registry import create_backbone
from fedrepro.models.ssf import SSF, SSFWrap, merge_ssf, ssf_sites
from fedrepro.models.tuning import apply_tuning, frozen_keys


def _ssf_scalars(model: nn.Module) -> int:
    return sum(m.gamma.numel() + m.beta.numel() for m in model.modules() if isinstance(m, SSF))


def test_one_ssf_set_of_vit_b16_is_205824_scalars():
    with torch.device("meta"):
        model = apply_tuning(create_backbone("vit_base_patch16_224.augreg_in21k", 0), "ssf")
    assert len(ssf_sites(model)) == 1 + 12 * 6 + 1
    assert _ssf_scalars(model) == 2 * (768 + 12 * 8448 + 768) == 205_824  # paper: "0.20 M"
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert trainable == 205_824  # no head at num_classes=0


@pytest.mark.parametrize(
    "base",
    [nn.Linear(6, 5), nn.Linear(6, 5, bias=False), nn.LayerNorm(6), nn.Conv2d(3, 5, 2, 2)],
    ids=["linear", "linear-no-bias", "layernorm", "conv"],
)
def test_each_site_merges_exactly(base):
    torch.manual_seed(0)
    wrap = SSFWrap(base.double()).double()
    nn.init.normal_(wrap.ssf.gamma, 1.0, 0.5)
    nn.init.normal_(wrap.ssf.beta, 0.0, 0.5)
    x = torch.randn(4, 3, 8, 8) if isinstance(base, nn.Conv2d) else torch.randn(4, 7, 6)
    x = x.double()
    with torch.no_grad():
        before = wrap(x)
        after = wrap.merged()(x)
    assert (before - after).abs().max() < 1e-12


def test_whole_vit_merge_equals_ssf_model_with_zero_new_parameters():
    torch.manual_seed(0)
    base_count = count_params(create_backbone("vit_tiny_mini", 10))
    torch.manual_seed(0)
    model = apply_tuning(create_backbone("vit_tiny_mini", 10), "ssf").double().eval()
    for m in model.modules():
        if isinstance(m, SSF):
            nn.init.normal_(m.gamma, 1.0, 0.3)
            nn.init.normal_(m.beta, 0.0, 0.3)
    x = torch.randn(3, 3, 16, 16, dtype=torch.float64)
    with torch.no_grad():
        with_ssf = model(x)
        merge_ssf(model)
        merged = model(x)
    assert not any(isinstance(m, (SSF, SSFWrap)) for m in model.modules())
    assert count_params(model) == base_count  # zero new parameters at inference
    assert (with_ssf - merged).abs().max() < 1e-10


def test_ssf_trains_only_ssf_and_head():
    torch.manual_seed(0)
    model = apply_tuning(create_backbone("vit_tiny_mini", 10), "ssf")
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(".ssf." in n or n.startswith("head.") for n in trainable)
    assert {"head.weight", "head.bias"} <= set(trainable)
    assert "blocks.0.attn.qkv.base.weight" in frozen_keys(model)
    assert "pos_embed" in frozen_keys(model) and "cls_token" in frozen_keys(model)
    with pytest.raises(ValueError, match="not a timm VisionTransformer"):
        apply_tuning(create_backbone("resnet26_mini", 10), "ssf")
