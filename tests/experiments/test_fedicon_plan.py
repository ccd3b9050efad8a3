"""FedICON's paper-scale plan does what the paper says (issue 30, points 5–8): the settings
the resolved plan gives its runs and adaptations, read from config/paper.yaml and
config/experiments/fedicon.yaml as the workflow reads them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fedrepro.data.registry import get_dataset
from fedrepro.experiments.plan import build_plan

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def paper_plan():
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    return build_plan({**config, **paper, "papers": ["fedicon"], "scales": paper["scales"]}, REPO)


def prepared_size(plan, dataset: str) -> int:
    """The side length the workflow prepares ``dataset`` at (``--size``, else the registry's)."""
    return int(plan.datasets[dataset].get("size") or get_dataset(dataset).image_size)


def test_covariate_shift_corrupts_at_the_models_input_size(paper_plan):
    """§5.1: the CIFAR-10-C corruptions (made for 32 px) hit the test images as prepared; a
    prepared size above the model's input would shrink their effect before the model sees
    them (Office-10 at its native 256 px: defocus blur kept 2 % of its effect at 32 px)."""
    corrupted = [r for r in paper_plan.runs.values()
                 if (r.get("test_shift") or {}).get("kind") == "corrupt"]  # fmt: skip
    assert {r["dataset"] for r in corrupted} == {"digit5", "office10"}
    for run in corrupted:
        assert prepared_size(paper_plan, run["dataset"]) == run["model"]["img_size"] == 32


def _views(plan, entry: dict) -> dict | None:
    """The views of an adaptation: its own, else its run's."""
    own = entry["adapt"].get("views")
    return own if own is not None else plan.runs[entry["run"]]["train"].get("views")


def test_every_contrastive_view_is_perturbed_by_the_four_contrastive_perturbations(paper_plan):
    """§4.1.1 "an augmentation module ... some perturbations" (ours: SupCon's random resized
    crop, flip, colour jitter and grayscale): FedICON's training views and every test-time
    adaptation's views of Eq. 7, whatever run it adapts (Local and FedAvg runs included)."""
    perturbations = {"crop", "flip", "jitter", "grayscale"}
    fedicon = [r for r in paper_plan.runs.values() if r["algorithm"]["name"] == "fedicon"]
    assert fedicon and all(set(r["train"]["views"]) == perturbations for r in fedicon)
    adapting = [a for a in paper_plan.adapts.values() if a["adapt"]["method"] == "fedicon_test"
                and (a["adapt"].get("tta_epochs", 5) or a["adapt"].get("online"))]  # fmt: skip
    starts = {paper_plan.runs[a["run"]]["algorithm"]["name"] for a in adapting}
    assert starts == {"fedicon", "local", "fedavg"}
    assert all(set(_views(paper_plan, a)) == perturbations for a in adapting)
