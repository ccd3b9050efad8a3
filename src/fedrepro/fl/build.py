"""What every job needs: a device, thread count, data on the device, a seeded model."""

from __future__ import annotations

from pathlib import Path

import torch

from fedrepro.data.batches import MEAN, STD
from fedrepro.data.prepared import Split, load_split
from fedrepro.fl.data import DeviceData
from fedrepro.models.registry import BACKBONES, create_backbone
from fedrepro.models.tuning import apply_tuning
from fedrepro.models.weights import load_weights


def pick_device(name: str = "auto", threads: int = 1) -> torch.device:
    torch.set_num_threads(max(1, int(threads)))
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


Stats = tuple[tuple[float, ...], tuple[float, ...]]


def input_stats(cfg: dict) -> Stats:
    """The one place a run's input normalisation (mean, std per channel) is decided:
    ``train.normalize`` where the paper's code normalises with the dataset's statistics (or
    not at all), otherwise the statistics the backbone's weights were trained with."""
    given = cfg.get("train", {}).get("normalize")
    if given is not None:
        return tuple(given["mean"]), tuple(given["std"])
    spec = BACKBONES.get(cfg["model"]["backbone"])
    return (spec.mean, spec.std) if spec is not None else (MEAN, STD)


def load_data(
    path: Path,
    device,
    img_size: int | None,
    train: dict | None = None,
    stats: Stats = (MEAN, STD),
):
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
        mean=tuple(stats[0]),
        std=tuple(stats[1]),
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
