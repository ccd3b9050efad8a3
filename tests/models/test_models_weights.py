"""Weights I/O: atomic safetensors round trip, head dropping, the conversions load allows."""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open

from fedrepro.fl.tensors import nbytes
from fedrepro.models.registry import create_backbone, head_keys
from fedrepro.models.weights import load_weights, save_weights


def _model(name: str, num_classes: int, seed: int, **kwargs):
    torch.manual_seed(seed)
    return create_backbone(name, num_classes, **kwargs).eval()


@pytest.mark.parametrize(
    ("name", "size"),
    [("vit_tiny_mini", 16), ("resnet_mini", 16), ("resnet26_mini", 16), ("cnn_fedicon", 32)],
)
def test_round_trip_gives_identical_outputs(tmp_path, name, size):
    src = _model(name, 6, seed=0)
    with torch.no_grad():  # non-default BN statistics must travel too
        for key, tensor in src.state_dict().items():
            if key.endswith("running_mean"):
                tensor.normal_()
    path = tmp_path / "w.safetensors"
    save_weights(src, path, meta={"backbone": name})
    dst = _model(name, 6, seed=1)
    x = torch.randn(2, 3, size, size)
    with torch.no_grad():
        assert not torch.allclose(src(x), dst(x))
        assert load_weights(dst, path) == []
        assert torch.equal(src(x), dst(x))
    with safe_open(str(path), "pt") as f:
        assert f.metadata() == {"backbone": name}
    assert [p.name for p in tmp_path.iterdir()] == ["w.safetensors"]  # no temp file left


@pytest.mark.parametrize("name", ["vit_tiny_mini", "resnet_mini", "resnet26_mini"])
def test_other_num_classes_drops_only_the_head(tmp_path, name):
    src = _model(name, 10, seed=0)
    path = tmp_path / "pre.safetensors"
    save_weights(src, path)
    dst = _model(name, 3, seed=1)
    head_before = {k: v.clone() for k, v in dst.state_dict().items() if k in head_keys(dst)}
    missing = load_weights(dst, path)
    assert sorted(missing) == sorted(head_keys(dst))
    for key, value in dst.state_dict().items():
        expected = head_before[key] if key in head_before else src.state_dict()[key]
        assert torch.equal(value, expected), key
    with pytest.raises(ValueError, match="shape"):
        load_weights(_model(name, 3, seed=1), path, skip_head=False)


def test_subset_of_keys_and_missing_report(tmp_path):
    src = _model("resnet26_mini", 4, seed=0)
    keys = head_keys(src)
    path = tmp_path / "head.safetensors"
    save_weights(src, path, keys=keys)
    dst = _model("resnet26_mini", 4, seed=1)
    missing = load_weights(dst, path)
    assert set(missing) == set(dst.state_dict()) - set(keys)
    assert torch.equal(dst.linears[0].weight, src.linears[0].weight)
    with pytest.raises(KeyError):
        save_weights(src, path, keys=["no.such.key"])


def test_foreign_keys_are_rejected(tmp_path):
    path = tmp_path / "vit.safetensors"
    save_weights(_model("vit_tiny_mini", 4, seed=0), path)
    with pytest.raises(ValueError, match="not in the model"):
        load_weights(_model("resnet_mini", 4, seed=0), path)


def test_rgb_stem_adapts_to_grayscale(tmp_path):
    src = _model("resnet26_mini", 4, seed=0)
    path = tmp_path / "rgb.safetensors"
    save_weights(src, path)
    dst = _model("resnet26_mini", 4, seed=1, in_chans=1)
    assert load_weights(dst, path) == []
    gray = torch.rand(2, 1, 16, 16)
    with torch.no_grad():  # summed RGB filters on a gray image == RGB net on the replicated image
        assert torch.allclose(dst(gray), src(gray.expand(-1, 3, -1, -1)), atol=1e-5)


def test_vit_position_embedding_resampled_for_other_size(tmp_path):
    src = _model("vit_tiny_mini", 4, seed=0)
    path = tmp_path / "vit.safetensors"
    save_weights(src, path)
    dst = _model("vit_tiny_mini", 4, seed=1, img_size=32)
    assert load_weights(dst, path) == []
    assert dst.pos_embed.shape[1] == 1 + 64
    assert torch.equal(dst.pos_embed[:, :1], src.pos_embed[:, :1])  # class token kept
    assert torch.equal(dst.blocks[0].attn.qkv.weight, src.blocks[0].attn.qkv.weight)


def test_saved_bytes_match_tensor_bytes(tmp_path):
    model = _model("resnet26_mini", 10, seed=0)
    path = tmp_path / "w.safetensors"
    save_weights(model, path)
    payload = nbytes(model.state_dict())
    assert payload < path.stat().st_size < payload + 16_384  # only the JSON header on top
