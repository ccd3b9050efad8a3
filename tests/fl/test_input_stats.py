"""Input normalisation comes from one place (``fedrepro.fl.build.input_stats``): the
statistics of the backbone a run uses, unless the run's config gives the dataset's."""

from __future__ import annotations

from pathlib import Path

import torch
import yaml

from fedrepro.data.prepared import Split, save_split
from fedrepro.experiments.plan import build_plan
from fedrepro.fl.build import input_stats, load_data
from fedrepro.models.registry import BACKBONES, IMAGENET_MEAN, IMAGENET_STD

REPO = Path(__file__).resolve().parents[2]


def _paper_plan():
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    return build_plan({**config, **paper, "scales": paper["scales"]}, REPO)


def test_a_resnet26_run_normalises_with_its_backbones_statistics():
    run = next(r for r in _paper_plan().runs.values() if r["model"]["backbone"] == "resnet26")
    spec = BACKBONES["resnet26"]
    assert input_stats(run) == (spec.mean, spec.std)
    assert spec.mean != (0.5, 0.5, 0.5)  # not the old one-size-fits-all 0.5 / 0.5
    tv = {"model": {"backbone": "resnet18.tv_in1k"}, "train": {}}
    assert input_stats(tv) == (IMAGENET_MEAN, IMAGENET_STD)
    vit = {"model": {"backbone": "vit_base_patch16_224.augreg_in21k_ft_in1k"}, "train": {}}
    assert input_stats(vit) == ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))


def test_a_runs_own_statistics_win_and_reach_every_batch(tmp_path):
    cfg = {"model": {"backbone": "resnet26"},
           "train": {"normalize": {"mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0]}}}  # fmt: skip
    assert input_stats(cfg) == ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    images = torch.full((2, 4, 4, 3), 255, dtype=torch.uint8)
    split = Split(images, torch.zeros(2, dtype=torch.long), None, ["a"], [])
    save_split(tmp_path / "s.safetensors", split, {"dataset": "t", "split": "test"})
    for stats, expected in ((input_stats(cfg), 1.0), (input_stats({**cfg, "train": {}}), None)):
        _, data = load_data(tmp_path / "s.safetensors", "cpu", None, None, stats)
        x, _ = data.batch(torch.arange(2))
        mean, std = BACKBONES["resnet26"].mean, BACKBONES["resnet26"].std
        want = expected if expected is not None else (1.0 - mean[0]) / std[0]
        assert torch.allclose(x[:, 0], torch.full_like(x[:, 0], want))


def test_fedins_normalises_each_dataset_as_the_authors_code():
    stats = {}
    for run in _paper_plan().runs.values():
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
