"""The plan: per-grid seeds, per-backbone pretraining settings, structural item rows."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fedrepro.experiments.config import ConfigError
from fedrepro.experiments.plan import build_plan

REPO = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


@pytest.fixture(scope="module")
def plan():
    return build_plan({**CONFIG, "papers": ["adapters", "fedins"]}, REPO)


def test_a_grid_may_run_its_own_seeds(plan):
    seeds = {r["labels"]["seed"] for r in plan.items["fedins/table1"]["runs"]}
    sweep = {r["labels"]["seed"] for r in plan.items["fedins/fig5a"]["runs"]}
    assert seeds == {0, 1} and sweep == {0}


def test_pretraining_settings_per_backbone(plan):
    assert plan.backbones["vit_tiny_mini"]["optimizer"] == "adam"
    assert plan.backbones["resnet26_mini"].get("optimizer", "sgd") == "sgd"
    assert "per_backbone" not in plan.backbones["resnet26_mini"]


def test_parameters_item_lists_each_row_once_with_its_model(plan):
    configs = plan.items["fedins/costs"]["configs"]
    labels = [(c["row"], c["label"]) for c in configs]
    assert len(labels) == len(set(labels)) == 9 + 4 + 2
    fedins = dict(zip(labels, configs, strict=True))[("method", "FedIns (Ours)")]
    assert fedins["model"]["tuning"] == "ssf_pool" and fedins["algorithm"]["name"] == "fedins"
    assert plan.items["fedins/costs"]["runs"] == []  # nothing is trained for it


def test_unknown_source_grid_names_the_key(tmp_path):
    doc = yaml.safe_load((REPO / "config" / "experiments" / "fedins.yaml").read_text())
    doc["items"]["costs"]["sources"][0]["grid"] = "nosuch"
    (tmp_path / "config" / "experiments").mkdir(parents=True)
    (tmp_path / "config" / "experiments" / "fedins.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=r"items.costs.sources\[0\].grid"):
        build_plan({**CONFIG, "papers": ["fedins"]}, tmp_path)
