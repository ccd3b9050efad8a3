"""FedPCE's generated norms (FedPCE §3.3, §4.3; docs/methods/fedpce.md#model): sizes, the
zero-MLP identity, what v can change, and the batch independence of instance norm."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedrepro.models.params import count_params
from fedrepro.models.pce import PCENet, norm_layers
from fedrepro.models.registry import create_backbone
from fedrepro.models.resnet_cifar import CifarResNet
from fedrepro.models.tuning import apply_tuning


def _meta_pce(widths=(64, 128, 256, 512), **options) -> PCENet:
    with torch.device("meta"):
        return PCENet(CifarResNet(10, widths=widths), **options)


def test_paper_scale_sizes_match_the_papers_counts():
    model = _meta_pce()
    assert len(model.norms) == 21
    assert sum(n.channels for n in model.norms) == 5_312
    # 21·(32·64 + 64) + Σ_k (64·2C_k + 2C_k)
    assert count_params(model.generators) == 21 * (32 * 64 + 64) + 65 * 2 * 5_312 == 734_912
    # ResNet-18-IN (11,174,986) without its 10,624 norm affine, plus MLPs and E = 32
    assert count_params(model) == 11_174_986 - 10_624 + 734_912 + 32 == 11_899_306
    assert count_params(model, ["embedding"]) == 32  # what client training trains


def test_hidden_and_embedding_sizes_are_knobs():
    small = _meta_pce(embed_dim=8, hidden=16)
    assert small.embedding.numel() == 8
    assert count_params(small.generators) == 21 * (8 * 16 + 16) + 17 * 2 * 5_312


def _tiny(seed=0, **options) -> PCENet:
    torch.manual_seed(seed)
    return apply_tuning(create_backbone("resnet18_in_mini", 5), "pce", **options)


def test_zero_last_layer_gives_the_plain_instance_norm_resnet():
    model = _tiny().eval()
    with torch.no_grad():
        for gen in model.generators:
            gen[2].weight.zero_()
            gen[2].bias.zero_()
        model.embedding.normal_()
    torch.manual_seed(0)
    plain = create_backbone("resnet18_in_mini", 5).eval()  # identity affine: γ = 1, β = 0
    x = torch.randn(3, 3, 32, 32)
    assert torch.allclose(model(x), plain(x), atol=1e-5)


def test_changing_v_changes_only_the_norms():
    model = _tiny().eval()
    x = torch.randn(2, 3, 32, 32)
    before_conv = model.backbone.conv1(x)
    gb = model.generate()
    out = model(x)
    with torch.no_grad():
        model.embedding.add_(torch.randn(model.embedding.shape))
    assert torch.equal(model.backbone.conv1(x), before_conv)  # the conv before the first norm
    gb2 = model.generate()
    assert all(not torch.equal(a[0], b[0]) for a, b in zip(gb, gb2, strict=True))
    assert not torch.allclose(model(x), out)
    # v reaches nothing but the generators: every other tensor is untouched by it
    named = dict(model.named_parameters())
    assert {n for n in named if not n.startswith(("generators.", "backbone."))} == {"embedding"}
    assert not [n for n in named if n.startswith("backbone.") and "norm" in n]


def test_instance_norm_is_batch_independent():
    model = _tiny().eval()
    x = torch.randn(6, 3, 32, 32)
    perm = torch.randperm(6)
    assert torch.allclose(model(x)[perm], model(x[perm]), atol=1e-5)
    assert torch.allclose(model(x[:1]), model(x)[:1], atol=1e-5)


def test_gradients_reach_the_embedding_and_every_generator():
    model = _tiny()
    with torch.no_grad():
        model.embedding.copy_(torch.eye(model.embedding.numel())[0])  # client 0's one-hot
    model(torch.randn(4, 3, 32, 32)).sum().backward()
    assert model.embedding.grad is not None and model.embedding.grad.abs().sum() > 0
    assert all(g[0].weight.grad.abs().sum() > 0 for g in model.generators)


def test_a_batch_norm_network_is_refused():
    with pytest.raises(ValueError, match="batch norm"):
        norm_layers(CifarResNet(10, norm="batch"))
    assert isinstance(CifarResNet(10).head_norm, nn.LayerNorm)
