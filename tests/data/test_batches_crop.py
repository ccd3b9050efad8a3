"""On-device random crop: zero or reflect padding, before or after the resize to the model's
input size, and the Adapters paper's CIFAR-10 runs set as NIID-Bench's transform."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
import yaml

from fedrepro.data.transforms.batches import augment, resize
from fedrepro.experiments.plan import build_plan
from fedrepro.fl.data import DeviceData

REPO = Path(__file__).resolve().parents[2]


def _crops_of(x: torch.Tensor, pad: int, mode: str) -> list[torch.Tensor]:
    padded = F.pad(x[None], (pad,) * 4, mode=mode)[0]
    side = x.shape[-1]
    shifts = range(2 * pad + 1)
    return [padded[:, i : i + side, j : j + side] for i in shifts for j in shifts]


def test_reflect_padding_crops_are_windows_of_the_reflected_image():
    x = torch.rand(16, 3, 8, 8, generator=torch.Generator().manual_seed(0)) + 0.1  # no zeros
    out = augment(x, torch.Generator().manual_seed(1), crop_pad=3, pad_mode="reflect")
    for img, crop in zip(x, out, strict=True):
        assert any(torch.equal(crop, c) for c in _crops_of(img, 3, "reflect"))
        assert (crop > 0).all()  # reflect never brings in black borders
    zeros = augment(x, torch.Generator().manual_seed(1), crop_pad=3)
    assert (zeros == 0).any()  # zero padding does, with the same offsets


def test_native_augmentation_crops_before_the_resize():
    images = torch.randint(0, 256, (6, 8, 8, 3), generator=torch.Generator().manual_seed(2),
                           dtype=torch.uint8)  # fmt: skip
    settings = {"crop_pad": 2, "pad_mode": "reflect", "flip": True}
    native = DeviceData(images, torch.zeros(6, dtype=torch.long), img_size=20,
                        augment_at="native", mean=(0, 0, 0), std=(1, 1, 1), **settings)  # fmt: skip
    x, _ = native.batch(torch.arange(6), torch.Generator().manual_seed(3), train=True)
    small = images.permute(0, 3, 1, 2).float() / 255
    want = resize(augment(small, torch.Generator().manual_seed(3), **settings), 20)
    assert x.shape[-1] == 20 and torch.allclose(x, want)
    still, _ = native.batch(torch.arange(6))  # evaluation: resize only
    assert torch.allclose(still, resize(small, 20))


def test_adapters_cifar10_runs_use_niid_benchs_transform():
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    for cfg, pad in ((config, 2), ({**config, **paper, "scales": paper["scales"]}, 4)):
        runs = [r for r in build_plan(cfg, REPO).runs.values() if r["paper"] == "adapters"]
        for run in runs:
            train = run["train"]
            if run["dataset"] == "cifar10":
                got = (train["crop_pad"], train["pad_mode"], train["flip"], train["augment_at"])
                assert got == (pad, "reflect", True, "native")
            else:
                assert not train.get("crop_pad") and not train.get("flip")
