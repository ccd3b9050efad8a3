"""What every job needs: a device, thread count, data on the device, a seeded model."""

from __future__ import annotations

from pathlib import Path

import torch

from fedrepro.data.prepared import Split, load_split
from fedrepro.fl.data import DeviceData
from fedrepro.models.registry import create_backbone
from fedrepro.models.tuning import apply_tuning
from fedrepro.models.weights import load_weights


def pick_device(name: str = "auto", threads: int = 1) -> torch.device:
    torch.set_num_threads(max(1, int(threads)))
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def load_data(path: Path, device, img_size: int | None, train: dict | None = None):
    """A prepared split moved to the device once, wrapped with its input settings."""
    split: Split = load_split(path, device=device)
    train = train or {}
    data = DeviceData(
        split.images,
        split.labels,
        img_size=img_size,
        crop_pad=int(train.get("crop_pad", 0)),
        flip=bool(train.get("flip", False)),
        rotate=float(train.get("rotate", 0.0)),
    )
    return split, data


def build_model(model_cfg: dict, num_classes: int, seed: int, weights: Path | None, device):
    """The backbone with a seeded head, pretrained weights loaded without the old head, and the
    trainable set of ``model.tuning`` (new adapters are seeded too: one init for all clients)."""
    torch.manual_seed(seed)
    model = create_backbone(
        model_cfg["backbone"],
        num_classes=num_classes,
        in_chans=3,
        img_size=model_cfg.get("img_size"),
    )
    if weights is not None:
        load_weights(model, weights, skip_head=True)
    tuned = apply_tuning(
        model, model_cfg.get("tuning", "full"), **model_cfg.get("tuning_options", {})
    )
    return tuned.to(device)
