"""Input normalisation comes from one place (``fedrepro.fl.build.input_stats``): the
statistics of the backbone a run uses, unless the run's config gives the dataset's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedrepro.data.prepared import Split, save_split
from fedrepro.data.transforms.batches import channel_stats
from fedrepro.experiments.plan import paper_plan
from fedrepro.fl.build import input_stats, load_data, load_train_test
from fedrepro.models.registry import BACKBONES, IMAGENET_MEAN, IMAGENET_STD

REPO = Path(__file__).resolve().parents[2]


def _prepared(tmp_path: Path, images: torch.Tensor) -> Path:
    labels = torch.zeros(len(images), dtype=torch.long)
    for split in ("train", "test"):
        meta = {"dataset": "t", "split": split}
        save_split(tmp_path / f"{split}.safetensors", Split(images, labels, None, ["a"], []), meta)
    return tmp_path


def test_a_resnet26_run_normalises_with_rebuffis_statistics(tmp_path):
    """Rebuffi's code normalises each dataset with its own per-channel mean and std (the
    decathlon pickle is keyed by dataset); so does every ResNet-26 run, paper and mini."""
    runs = [r for r in paper_plan(REPO).runs.values() if r["model"]["backbone"] == "resnet26"]
    assert runs and all(BACKBONES[r["model"]["backbone"]].stats == "dataset" for r in runs)
    assert BACKBONES["resnet26_mini"].stats == "dataset"
    gen = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (50, 6, 6, 3), generator=gen, dtype=torch.uint8)
    images[..., 2] //= 4  # channels on different scales
    pixels = images.reshape(-1, 3).double() / 255
    want = (tuple(pixels.mean(0).tolist()), tuple(pixels.std(0, unbiased=False).tolist()))
    with pytest.raises(ValueError, match="training images"):
        input_stats(runs[0])
    got = input_stats(runs[0], images)
    assert torch.allclose(torch.tensor(got), torch.tensor(want), atol=1e-12)
    _, train, test = load_train_test(runs[0], _prepared(tmp_path, images), "cpu", None)
    assert (train.mean, train.std) == got == (test.mean, test.std)
    x, _ = train.batch(torch.arange(50))
    assert torch.allclose(x.mean((0, 2, 3)), torch.zeros(3), atol=1e-5)
    assert torch.allclose(x.std((0, 2, 3), unbiased=False), torch.ones(3), atol=1e-5)
    # the other backbones keep the statistics their weights were trained with
    tv = {"model": {"backbone": "resnet18.tv_in1k"}, "train": {}}
    assert input_stats(tv, images) == (IMAGENET_MEAN, IMAGENET_STD)
    vit = {"model": {"backbone": "vit_base_patch16_224.augreg_in21k_ft_in1k"}, "train": {}}
    assert input_stats(vit) == ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))


def test_grey_images_give_three_equal_channel_statistics():
    images = torch.tensor([0, 255], dtype=torch.uint8).view(2, 1, 1, 1)
    assert channel_stats(images) == ((0.5,) * 3, (0.5,) * 3)


def test_a_runs_own_statistics_win_and_reach_every_batch(tmp_path):
    cfg = {"model": {"backbone": "vit_tiny_mini"},
           "train": {"normalize": {"mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0]}}}  # fmt: skip
    assert input_stats(cfg) == ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    images = torch.full((2, 4, 4, 3), 255, dtype=torch.uint8)
    split = Split(images, torch.zeros(2, dtype=torch.long), None, ["a"], [])
    save_split(tmp_path / "s.safetensors", split, {"dataset": "t", "split": "test"})
    for stats, expected in ((input_stats(cfg), 1.0), (input_stats({**cfg, "train": {}}), None)):
        _, data = load_data(tmp_path / "s.safetensors", "cpu", None, None, stats)
        x, _ = data.batch(torch.arange(2))
        mean, std = BACKBONES["vit_tiny_mini"].mean, BACKBONES["vit_tiny_mini"].std
        want = expected if expected is not None else (1.0 - mean[0]) / std[0]
        assert torch.allclose(x[:, 0], torch.full_like(x[:, 0], want))


def test_fedins_normalises_each_dataset_as_the_authors_code():
    stats = {}
    for run in paper_plan(REPO).runs.values():
        if run["paper"] == "fedins":
            stats.setdefault(run["dataset"], set()).add(input_stats(run))
    assert {len(v) for v in stats.values()} == {1}
    cifar100 = (
        (0.5070751592371323, 0.48654887331495095, 0.4409178433670343),
        (0.2673342858792401, 0.2564384629170883, 0.27615047132568404),
    )
    assert stats["cifar100"] == {cifar100}
    assert stats["domainnet"] == {((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))}  # ToTensor only
    assert stats["tinyimagenet"] == {((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))}
