"""FedPCE's paper-scale plan does what the paper says (issue 30, points 10-13): the settings
read off the text, checked on the plan the workflow builds from config/paper.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedrepro.experiments.config import deep_merge, load_yaml
from fedrepro.experiments.plan import build_plan

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def paper_plan():
    config = deep_merge(
        load_yaml(REPO / "config/config.yaml"), load_yaml(REPO / "config/paper.yaml")
    )
    return build_plan({**config, "papers": ["fedpce"]}, REPO)


def test_the_server_mean_is_one_over_n_for_every_method(paper_plan):
    """§3.1: (ω_k^i)' = (1/N)·Σ_n ω_n^i, for every method of the grid (the authors' code
    weights by sample count: the knob ``algorithm.weighting: samples``)."""
    methods = {r["algorithm"]["name"] for r in paper_plan.runs.values()}
    assert methods == {"fedavg", "fedprox", "fedper", "fedbn", "fedpce"}
    assert {r["algorithm"].get("weighting") for r in paper_plan.runs.values()} == {"uniform"}
