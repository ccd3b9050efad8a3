"""fetch_backbone from pre-staged files, offline, with checksum verification."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from fedrepro.models.registry import create_backbone
from fedrepro.models.weights import (
    ChecksumError,
    fetch_backbone,
    load_weights,
    save_weights,
    sha256_file,
)

SCRIPT = Path(__file__).resolve().parents[2] / "workflow" / "scripts" / "fetch_backbone.py"


def _stage(data_root: Path, name: str, filename: str) -> Path:
    folder = data_root / "backbones" / name
    folder.mkdir(parents=True)
    return folder / filename


def _run_script(*argv: str) -> None:
    spec = importlib.util.spec_from_file_location("fetch_backbone_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(list(argv))


def test_resnet26_release_pth_staged_offline_then_checksum_enforced(tmp_path):
    torch.manual_seed(0)
    release = create_backbone("resnet26", num_classes=1000)  # the Decathlon release's layout
    staged = _stage(tmp_path, "resnet26", "model.pth")
    torch.save(release.state_dict(), staged)
    dest = tmp_path / "out" / "resnet26.safetensors"

    _run_script("resnet26", str(dest), "--data-root", str(tmp_path), "--offline")

    record = staged.with_name("model.pth.sha256")
    assert record.read_text().split()[0] == sha256_file(staged)  # our own checksum, first fetch
    model = create_backbone("resnet26", num_classes=10)
    missing = load_weights(model, dest)
    assert sorted(missing) == ["linears.0.bias", "linears.0.weight"]
    assert torch.equal(model.layer3[3].conv1.conv.weight, release.layer3[3].conv1.conv.weight)

    fetch_backbone("resnet26", dest, tmp_path, offline=True)  # verified against the record
    with open(staged, "ab") as handle:
        handle.write(b"\0")
    with pytest.raises(ChecksumError, match=str(staged)):
        fetch_backbone("resnet26", dest, tmp_path, offline=True)


def test_staged_file_of_another_architecture_is_refused(tmp_path):
    staged = _stage(tmp_path, "resnet26", "model.safetensors")
    save_weights(create_backbone("resnet26_mini", 10), staged)
    with pytest.raises(ValueError, match="not a resnet26 checkpoint"):
        fetch_backbone("resnet26", tmp_path / "w.safetensors", tmp_path, offline=True)
    assert not (tmp_path / "w.safetensors").exists()
    assert not staged.with_name("model.safetensors.sha256").exists()  # a bad file is not trusted


def test_timm_staged_file_of_another_architecture_names_the_file(tmp_path):
    staged = _stage(tmp_path, "resnet34.tv_in1k", "model.safetensors")
    save_weights(create_backbone("resnet_mini", 1000), staged)
    with pytest.raises(ValueError, match=f"{staged}: not a resnet34.tv_in1k checkpoint"):
        fetch_backbone("resnet34.tv_in1k", tmp_path / "w.safetensors", tmp_path, offline=True)


def test_timm_backbone_from_staged_safetensors(tmp_path):
    torch.manual_seed(0)
    name = "resnet18.tv_in1k"
    release = create_backbone(name, num_classes=1000)
    save_weights(release, _stage(tmp_path, name, "model.safetensors"))
    dest = tmp_path / "resnet18.safetensors"
    fetch_backbone(name, dest, tmp_path, offline=True)
    model = create_backbone(name, num_classes=10)
    assert sorted(load_weights(model, dest)) == ["fc.bias", "fc.weight"]
    assert torch.equal(model.layer4[1].conv2.weight, release.layer4[1].conv2.weight)


def test_torchvision_release_with_wrong_hash_prefix(tmp_path):
    staged = _stage(tmp_path, "resnet18.tv_in1k", "resnet18-f37072fd.pth")
    torch.save({"fc.weight": torch.zeros(2, 2)}, staged)
    with pytest.raises(ChecksumError, match="resnet18-f37072fd.pth"):
        fetch_backbone("resnet18.tv_in1k", tmp_path / "w.safetensors", tmp_path, offline=True)


def test_offline_without_staged_file_names_where_to_put_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="backbones/resnet26/model.safetensors"):
        fetch_backbone("resnet26", tmp_path / "w.safetensors", tmp_path, offline=True)
    with pytest.raises(FileNotFoundError, match="gdrive"):
        fetch_backbone("resnet26", tmp_path / "w.safetensors", tmp_path, offline=False)


def test_tiny_backbones_are_not_fetched(tmp_path):
    with pytest.raises(ValueError, match="workflow"):
        fetch_backbone("vit_tiny_mini", tmp_path / "w.safetensors", tmp_path)
