"""Every registered backbone builds, runs and names its head and norm tensors correctly."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedrepro.models.registry import (
    BACKBONES,
    create_backbone,
    get_spec,
    head_keys,
    norm_keys,
    tiny_sibling,
)

MINI = [n for n, s in BACKBONES.items() if s.tiny == n]
PAPER = [n for n, s in BACKBONES.items() if s.tiny != n]


def test_every_paper_backbone_has_a_registered_mini_sibling_of_its_family():
    assert PAPER and MINI
    for name in PAPER:
        sibling = tiny_sibling(name)
        assert BACKBONES[sibling].tiny == sibling
        assert BACKBONES[sibling].family == BACKBONES[name].family


def test_named_tiny_siblings():
    assert tiny_sibling("vit_base_patch16_224.augreg_in21k") == "vit_tiny_mini"
    assert tiny_sibling("vit_large_patch16_224.augreg_in21k_ft_in1k") == "vit_tiny_mini"
    assert tiny_sibling("resnet18.tv_in1k") == "resnet_mini"
    assert tiny_sibling("resnet26") == "resnet26_mini"
    assert tiny_sibling("cnn_fedicon") == "cnn_fedicon"


def test_unknown_name_lists_known_ones():
    with pytest.raises(KeyError, match="resnet26_mini"):
        get_spec("resnet26_typo")


def test_paper_timm_ids_carry_explicit_tags():
    for name in PAPER:
        timm_id = BACKBONES[name].timm_id
        assert timm_id is None or "." in timm_id


@pytest.mark.parametrize("name", MINI)
@pytest.mark.parametrize("in_chans", [1, 3])
def test_mini_backbone_forward_shapes(name, in_chans):
    torch.manual_seed(0)
    model = create_backbone(name, num_classes=7, in_chans=in_chans).eval()
    size = get_spec(name).img_size
    x = torch.randn(2, in_chans, size, size)
    with torch.no_grad():
        logits = model(x)
        features = model.forward_head(model.forward_features(x), pre_logits=True)
    assert logits.shape == (2, 7)
    assert torch.isfinite(logits).all()
    assert features.shape == (2, model.num_features)


@pytest.mark.parametrize("name", PAPER)
def test_paper_backbone_builds_and_runs_on_meta(name):
    size = get_spec(name).img_size
    with torch.device("meta"):
        model = create_backbone(name, num_classes=5, in_chans=1)
        out = model(torch.empty(2, 1, size, size))
    assert out.shape == (2, 5)


def test_img_size_reaches_vit_and_cnn():
    vit = create_backbone("vit_tiny_mini", 3, img_size=16)
    assert vit.pos_embed.shape[1] == 1 + (16 // 4) ** 2
    cnn = create_backbone("cnn_simple", 3, in_chans=1, img_size=28)
    assert cnn.fc1.in_features == 16 * 4 * 4  # NIID-Bench's SimpleCNNMNIST
    assert cnn(torch.randn(1, 1, 28, 28)).shape == (1, 3)


def test_zero_classes_gives_headless_model():
    model = create_backbone("resnet26_mini", num_classes=0)
    assert head_keys(model) == []
    assert model(torch.randn(1, 3, 32, 32)).shape == (1, model.num_features)


def test_head_and_norm_keys_resnet_bn():
    model = create_backbone("resnet_mini", num_classes=4)
    assert head_keys(model) == ["fc.weight", "fc.bias"]
    keys = set(norm_keys(model))
    assert {"bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"} <= keys
    assert "layer1.0.downsample.1.num_batches_tracked" in keys
    assert not any(k.startswith("fc.") or k.endswith("conv1.weight") for k in keys)
    bn_tensors = sum(
        len(list(m.parameters())) + len(list(m.buffers()))
        for m in model.modules()
        if isinstance(m, nn.BatchNorm2d)
    )
    assert len(keys) == bn_tensors


def test_head_and_norm_keys_vit_layernorm():
    model = create_backbone("vit_tiny_mini", num_classes=4)
    assert head_keys(model) == ["head.weight", "head.bias"]
    keys = norm_keys(model)
    depth = len(model.blocks)
    assert len(keys) == 2 * (2 * depth + 1)  # norm1, norm2 per block + final norm
    assert "blocks.0.norm1.weight" in keys and "norm.bias" in keys
    assert not any("attn" in k or "mlp" in k or k.startswith("head") for k in keys)


def test_head_and_norm_keys_instance_norm_net():
    model = create_backbone("resnet18_in_mini", num_classes=4)
    assert head_keys(model) == ["fc.weight", "fc.bias"]
    keys = norm_keys(model)
    assert "norm1.weight" in keys and "head_norm.weight" in keys
    assert "layer2.0.downsample.1.bias" in keys
    assert not any("running" in k for k in keys)  # instance norm keeps no statistics
    assert all(k.endswith(("weight", "bias")) for k in keys)


def test_head_keys_of_small_cnns():
    assert head_keys(create_backbone("cnn_simple", 10)) == ["fc3.weight", "fc3.bias"]
    fedicon = create_backbone("cnn_fedicon", 10)
    assert head_keys(fedicon) == ["classifier.weight"]  # bias-free, as in FedTHE
    assert norm_keys(create_backbone("cnn_simple", 10)) == []


def test_instance_norm_net_is_per_sample():
    torch.manual_seed(0)
    model = create_backbone("resnet18_in_mini", num_classes=3).train()
    x = torch.randn(4, 3, 32, 32)
    perm = torch.tensor([2, 0, 3, 1])
    with torch.no_grad():
        assert torch.allclose(model(x)[perm], model(x[perm]), atol=1e-5)
        assert torch.allclose(model(x[:1]), model(x)[:1], atol=1e-5)
