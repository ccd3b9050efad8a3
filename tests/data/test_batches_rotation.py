"""On-device rotation (``train.rotate``): torchvision's ``RandomRotation`` pixel for pixel,
angles within the configured range, and FedIns's batches rotated as the authors' code does."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torchvision.transforms.functional as TF
import yaml

from fedrepro.data.prepared import Split, save_split
from fedrepro.data.transforms.batches import augment, rotate_images, rotation_angles
from fedrepro.experiments.plan import build_plan
from fedrepro.fl.build import load_data

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("degrees", [90.0, 13.0, -27.0, 0.0])
def test_rotation_equals_torchvision(degrees):
    x = torch.rand(3, 3, 24, 24, generator=torch.Generator().manual_seed(0))
    ours = rotate_images(x, torch.full((3,), degrees))
    assert torch.equal(ours, torch.stack([TF.rotate(img, degrees) for img in x]))


def test_angles_cover_the_range_and_stay_in_it():
    angles = rotation_angles(4000, torch.Generator().manual_seed(1), 15)
    assert angles.abs().max() <= 15 and angles.min() < -14 and angles.max() > 14


def test_no_rotation_draws_nothing():
    """Runs without ``rotate`` keep their random stream (and so their numbers)."""
    x = torch.rand(8, 3, 8, 8)
    a, b = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    augment(x, a, crop_pad=2, flip=True)
    augment(x, b, crop_pad=2, flip=True, rotate=0.0)
    assert torch.equal(torch.rand(4, generator=a), torch.rand(4, generator=b))


def _bar_angle(img: torch.Tensor) -> float:
    """Orientation (degrees, counter-clockwise) of the bright bar through the centre."""
    ys, xs = torch.nonzero(img[0] > 0.5, as_tuple=True)
    x, y = xs.float() - xs.float().mean(), -(ys.float() - ys.float().mean())
    return math.degrees(0.5 * math.atan2(2 * float((x * y).mean()), float((x * x - y * y).mean())))


def _bars(tmp_path: Path, n: int = 64, side: int = 65) -> Path:
    images = torch.zeros(n, side, side, 3, dtype=torch.uint8)
    images[:, side // 2, 8:-8, :] = 255  # a horizontal bar through the centre
    split = Split(images, torch.zeros(n, dtype=torch.long), None, ["bar"], [])
    save_split(tmp_path / "train.safetensors", split, {"dataset": "bars", "split": "train"})
    return tmp_path / "train.safetensors"


@pytest.mark.parametrize(("dataset", "degrees"), [("cifar100", 15), ("domainnet", 30)])
def test_a_fedins_training_batch_is_rotated_within_its_range(tmp_path, dataset, degrees):
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    plan = build_plan({**config, "papers": ["fedins"]}, REPO)
    run = next(r for r in plan.runs.values() if r["dataset"] == dataset)
    assert run["train"]["rotate"] == degrees and run["train"]["flip"]
    _, data = load_data(_bars(tmp_path), "cpu", None, run["train"])  # as a training job does
    x, _ = data.batch(torch.arange(64), torch.Generator().manual_seed(0), train=True)
    angles = [_bar_angle(img) for img in x]
    assert max(abs(a) for a in angles) <= degrees + 2  # nearest-neighbour pixels: ±2°
    assert max(abs(a) for a in angles) > degrees / 2  # and they do turn
    still, _ = data.batch(torch.arange(64))  # evaluation batches are never rotated
    assert all(abs(_bar_angle(img)) < 0.5 for img in still)


def test_tiny_imagenet_is_not_augmented_as_the_authors_code():
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    plan = build_plan({**config, "papers": ["fedins"]}, REPO)
    tiny = [r["train"] for r in plan.runs.values() if r["dataset"] == "tinyimagenet"]
    assert tiny and not any(t.get("rotate") or t.get("flip") for t in tiny)
    assert all(t["drop_last"] for t in tiny)
