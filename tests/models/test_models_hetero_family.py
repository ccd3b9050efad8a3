"""FedHPL's heterogeneous clients at mini scale: tiny siblings of ViT-S/B/L and ResNet-18/34/50
whose widths, depths and blocks keep the paper models' proportions (App. B.2, Table 4), each
registered, mapped and given a pretraining spec like the other workflow-pretrained minis."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from timm.models.resnet import BasicBlock, Bottleneck

from fedrepro.models.registry import BACKBONES, create_backbone, tiny_sibling
from fedrepro.models.tuning import apply_tuning

REPO = Path(__file__).resolve().parents[2]
MINI = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["scales"]["mini"]

# paper backbone -> (its sibling in a federation, the sibling's architecture)
VITS = {
    "vit_small_patch16_224.augreg_in21k_ft_in1k": ("vit_s_mini", {"width": 24, "depth": 2}),
    "vit_base_patch16_224.augreg_in21k_ft_in1k": ("vit_b_mini", {"width": 48, "depth": 2}),
    "vit_large_patch16_224.augreg_in21k_ft_in1k": ("vit_tiny_mini", {"width": 64, "depth": 4}),
}
RESNETS = {
    "resnet18.tv_in1k": ("resnet_mini", {"layers": [1, 1, 1, 1], "latent": 128}),
    "resnet34.tv_in1k": ("resnet34_mini", {"layers": [1, 2, 3, 1], "latent": 128}),
    "resnet50.tv_in1k": ("resnet50_mini", {"layers": [1, 2, 3, 1], "latent": 512}),
}
SIBLINGS = [s for s, _ in (*VITS.values(), *RESNETS.values())]
# trainable scalars with a 10-class head and without one (num_classes=0)
PARAMS = {
    "vit_s_mini": (16_354, 16_104),
    "vit_b_mini": (60_346, 59_856),
    "vit_tiny_mini": (205_002, 204_352),
    "resnet_mini": (325_866, 324_576),
    "resnet34_mini": (492_394, 491_104),
    "resnet50_mini": (676_874, 671_744),
}


def _stages(model) -> list:
    return [model.layer1, model.layer2, model.layer3, model.layer4]


@pytest.mark.parametrize("paper", VITS)
def test_vit_siblings_width_depth_and_heads(paper):
    name, arch = VITS[paper]
    model = create_backbone(name, 10)
    assert model.num_features == model.embed_dim == arch["width"]
    assert len(model.blocks) == arch["depth"]
    assert model.patch_embed.patch_size == (4, 4)
    heads = {b.attn.num_heads for b in model.blocks}
    assert len(heads) == 1 and arch["width"] % heads.pop() == 0


def test_vit_siblings_keep_the_papers_proportions():
    with torch.device("meta"):
        paper = [create_backbone(p, 0) for p in VITS]
    mini = [create_backbone(s, 0) for s, _ in VITS.values()]
    assert [m.num_features for m in paper] == [384, 768, 1024]
    assert [len(m.blocks) for m in paper] == [12, 12, 24]
    assert [16 * m.num_features for m in mini] == [m.num_features for m in paper]
    assert [6 * len(m.blocks) for m in mini] == [len(m.blocks) for m in paper]
    widths = [m.num_features for m in mini]
    assert widths == sorted(set(widths))  # three widths, S < B < L


@pytest.mark.parametrize("paper", RESNETS)
def test_resnet_siblings_blocks_depths_and_latent(paper):
    name, arch = RESNETS[paper]
    model = create_backbone(name, 10)
    with torch.device("meta"):
        big = create_backbone(paper, 0)
    block = type(big.layer1[0])
    assert all(type(b) is block for s in _stages(model) for b in s)
    assert [len(s) for s in _stages(model)] == arch["layers"]
    assert [len(s) // 2 for s in _stages(big)] == arch["layers"]  # the paper's halved, down
    assert model.num_features == arch["latent"] == big.num_features // 4


def test_resnet50_sibling_is_a_bottleneck_net_with_four_times_the_latent():
    r18, r34, r50 = (create_backbone(s, 0) for s, _ in RESNETS.values())
    assert isinstance(r18.layer1[0], BasicBlock) and isinstance(r34.layer1[0], BasicBlock)
    assert isinstance(r50.layer4[-1], Bottleneck)
    assert r50.num_features == 4 * r34.num_features == 4 * r18.num_features
    assert len(r18.layer3) < len(r34.layer3) == len(r50.layer3)


@pytest.mark.parametrize("name", SIBLINGS)
def test_forward_at_the_mini_image_size(name):
    size = MINI["data"]["size"]
    torch.manual_seed(0)
    model = create_backbone(name, num_classes=10, img_size=size).eval()
    x = torch.randn(3, 3, size, size)
    with torch.no_grad():
        logits = model(x)
        features = model.forward_head(model.forward_features(x), pre_logits=True)
    assert logits.shape == (3, 10) and torch.isfinite(logits).all()
    assert features.shape == (3, model.num_features)


@pytest.mark.parametrize("paper", [*VITS, *RESNETS])
def test_each_sibling_takes_its_fedhpl_client_tuning(paper):
    """FedHPL (ViT): VPT-deep, 3 prompts a layer, and the head; FedHPL (CNN): a frozen frame of
    3 pixels outside the image and the head (App. B.3, Table 8): what trains is those only."""
    name, _ = VITS.get(paper) or RESNETS[paper]
    size, classes = MINI["data"]["size"], 10
    model = create_backbone(name, classes, img_size=size)
    d = model.num_features
    if paper in VITS:
        model = apply_tuning(model, "vpt_deep", num_prompts=3)
        extra = len(model.vit.blocks) * 3 * d
    else:
        model = apply_tuning(model, "pad_prompt", pad=3, size=size, outside=True, frozen=True)
        extra = 3 * ((size + 6) ** 2 - size**2)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert trainable == extra + d * classes + classes
    assert model(torch.randn(2, 3, size, size)).shape == (2, classes)


@pytest.mark.parametrize("name", SIBLINGS)
def test_parameter_counts(name):
    with_head, headless = PARAMS[name]
    assert sum(p.numel() for p in create_backbone(name, 10).parameters()) == with_head
    assert sum(p.numel() for p in create_backbone(name, 0).parameters()) == headless


def test_registry_and_config_name_the_same_siblings():
    mapping = MINI["backbones"]
    for paper, mini in mapping.items():
        assert tiny_sibling(paper) == mini, paper
    for paper, (name, _) in {**VITS, **RESNETS}.items():
        assert BACKBONES[name].source == "workflow"  # pretrained by the workflow
        if paper != "vit_base_patch16_224.augreg_in21k_ft_in1k":  # Table 1's is vit_tiny_mini
            assert mapping[paper] == name


def test_every_sibling_has_a_pretraining_spec():
    pretrain = dict(MINI["pretrain"])
    per_backbone = pretrain.pop("per_backbone")
    assert set(per_backbone) <= set(BACKBONES)
    for name in SIBLINGS:
        spec = {**pretrain, **per_backbone.get(name, {})}
        want = "adam" if BACKBONES[name].family == "vit" else "sgd"
        assert spec["optimizer"] == want, name
        assert spec["epochs"] == (30 if name == "vit_tiny_mini" else 10), name
