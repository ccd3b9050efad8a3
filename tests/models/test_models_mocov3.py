"""FedHPL Tables 12-13's self-supervised backbones: MoCo-v3 releases (a ``.pth.tar`` whose
backbone is ``module.base_encoder.*`` beside a momentum encoder, a predictor and a projection
MLP) converted to the backbone alone; downloaded from their URL into the staging folder; ViT-L,
never released, refused with where to stage it."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from safetensors.torch import load_file

from fedrepro.data.sources.download import fetch_release
from fedrepro.models import registry
from fedrepro.models.registry import create_backbone
from fedrepro.models.weights import fetch_backbone, load_weights, sha256_file

NAME = "vit_small_patch16_224.mocov3"


def _release(path) -> dict[str, torch.Tensor]:
    """A checkpoint laid out as MoCo-v3's ``main_moco.py`` saves one; returns the backbone."""
    torch.manual_seed(0)
    backbone = create_backbone(NAME, num_classes=0).state_dict()
    state = {f"module.base_encoder.{k}": v for k, v in backbone.items()}
    state |= {f"module.momentum_encoder.{k}": v + 1 for k, v in backbone.items()}
    for encoder in ("base_encoder", "momentum_encoder"):  # the projection MLP in place of a head
        state[f"module.{encoder}.head.0.weight"] = torch.randn(4096, 384)
        state[f"module.{encoder}.head.1.running_mean"] = torch.zeros(4096)
    state["module.predictor.0.weight"] = torch.randn(4096, 256)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"epoch": 300, "arch": "vit_small", "state_dict": state, "optimizer": {}}, path)
    return backbone


def test_a_moco_v3_release_loads_as_the_base_encoder_without_its_projection(tmp_path):
    staged = tmp_path / "backbones" / NAME / "vit-s-300ep.pth.tar"
    backbone = _release(staged)
    dest = tmp_path / "out.safetensors"
    fetch_backbone(NAME, dest, tmp_path, offline=True)
    saved = load_file(dest)
    assert saved.keys() == backbone.keys()  # no head, no momentum encoder, no predictor
    assert all(torch.equal(saved[k], v) for k, v in backbone.items())
    assert staged.with_name(staged.name + ".sha256").read_text().split()[0] == sha256_file(staged)
    model = create_backbone(NAME, num_classes=10)
    assert sorted(load_weights(model, dest)) == ["head.bias", "head.weight"]
    assert model.blocks[0].attn.num_heads == 12  # MoCo-v3's ViT-S: 12 heads (timm's has 6)


def test_a_release_url_is_downloaded_into_the_staging_folder(tmp_path, monkeypatch):
    remote = tmp_path / "server" / "vit-s-300ep.pth.tar"
    backbone = _release(remote)
    spec = dataclasses.replace(registry.BACKBONES[NAME], release=remote.as_uri())
    monkeypatch.setitem(registry.BACKBONES, NAME, spec)
    fetch_backbone(NAME, tmp_path / "out.safetensors", tmp_path / "data", download=fetch_release)
    assert (tmp_path / "data" / "backbones" / NAME / "vit-s-300ep.pth.tar").is_file()
    assert torch.equal(load_file(tmp_path / "out.safetensors")["cls_token"], backbone["cls_token"])


def test_the_unreleased_moco_v3_vit_l_says_where_to_stage_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="no public release exists"):
        fetch_backbone("vit_large_patch16_224.mocov3", tmp_path / "o.safetensors", tmp_path)
