"""The paper-shape smoke's plan (config/smoke.yaml over config/paper.yaml): the paper-scale
runs unchanged but for data, clients, schedule and seeds; every (algorithm, backbone,
tuning, adaptation) combination and every item kept."""

from __future__ import annotations

import operator
from pathlib import Path

import pytest

from fedrepro.experiments.config import load_yaml
from fedrepro.experiments.plan import paper_plan
from fedrepro.experiments.smoke import SMOKE_LABEL, combination

REPO = Path(__file__).resolve().parents[2]
SMOKE = load_yaml(REPO / "config/smoke.yaml")["smoke"]
# what the smoke never changes (but a public data set's samples a round: _algorithms_alike)
UNSHRUNK = ("model", "algorithm", "dataset", "paper", "public")


@pytest.fixture(scope="module")
def plans():
    return paper_plan(REPO), paper_plan(REPO, smoke=SMOKE)


def _combinations(plan, manifests) -> set[tuple]:
    return {combination(plan, e) for m in manifests for e in m["runs"]}


def test_every_combination_and_item_of_the_paper_plan_is_kept(plans):
    paper, smoke = plans
    assert _combinations(smoke, smoke.items.values()) == _combinations(paper, paper.items.values())
    assert set(smoke.items) == set(paper.items)
    for name, manifest in smoke.items.items():
        assert bool(manifest["runs"]) == bool(paper.items[name]["runs"]), name
        assert manifest["scale"] == SMOKE_LABEL
    assert smoke.structures == paper.structures
    assert len(smoke.runs) < len(paper.runs) / 20
    # every backbone a kept run reads has its job (each client's, in a federation of models)
    for run in smoke.runs.values():
        if run["model"].get("pretrained", True):
            names = run["model"].get("client_backbones") or [run["model"]["backbone"]]
            assert set(names) <= set(smoke.backbones), run["model"]


def test_runs_keep_their_models_and_hyperparameters_and_shrink_the_rest(plans):
    paper, smoke = plans
    by_group = {}
    for run in paper.runs.values():
        by_group.setdefault((run["paper"], run["dataset"], run["algorithm"]["name"]), []).append(
            run
        )
    for rid, run in smoke.runs.items():
        assert rid.endswith("-s" + str(run["seed"]))
        assert run["train"]["rounds"] == SMOKE["rounds"]
        assert run["train"]["local_steps"] == SMOKE["steps"]
        assert run["train"]["batch_size"] == SMOKE["batch_size"]
        part = run["partition"]
        fixed = {"fedpce_degradation": 12, "leave_one_domain_out": 3}  # the fewest they allow
        mixed = run["model"].get("client_backbones")
        if mixed:  # clients of different models: one client a model (FedHPL's Table 2)
            assert part["clients"] == len(mixed) == len(set(mixed)) > 1, part
        if isinstance(part.get("k"), list):  # one class count a kept client (Figs. 7-9)
            assert len(part["k"]) == part["clients"], part
        assert (
            mixed
            or part["clients"] <= fixed.get(part["scheme"], SMOKE["clients"])
            or (
                part["scheme"] == "domain"
                and part.get("clients_per_domain", 1) == (3 if part.get("new_fraction") else 1)
            )
        ), part
        data = {**SMOKE["data"], **SMOKE.get("datasets", {}).get(run["dataset"], {})}
        assert run["data"]["per_class_train"] == data["per_class_train"]
        assert run["images"] <= SMOKE["images"]
        assert run["test_images"] == SMOKE["test_images"]
        assert "size" not in run["data"] or run["dataset"] == "office10"  # the real shape
        # some paper run has the same model, algorithm and optimiser
        twins = by_group[(run["paper"], run["dataset"], run["algorithm"]["name"])]
        assert any(
            all(ALIKE.get(k, operator.eq)(t.get(k), run.get(k)) for k in UNSHRUNK)
            and t["train"]["optimizer"] == run["train"]["optimizer"]
            and t["train"]["lr"] == run["train"]["lr"]
            for t in twins
        ), rid
    assert smoke.synthetic and not paper.synthetic
    for adapt in smoke.adapts.values():
        block = adapt["adapt"]
        assert block.get("epochs", SMOKE["rounds"]) == SMOKE["rounds"]
        assert block.get("rounds", SMOKE["rounds"]) == SMOKE["rounds"]


def _models_alike(paper: dict, smoke: dict) -> bool:
    """The same model, a federation's clients cut to one of each distinct backbone."""
    if paper.get("client_backbones"):
        paper = {**paper, "client_backbones": list(dict.fromkeys(paper["client_backbones"]))}
    return paper == smoke


def _algorithms_alike(paper: dict, smoke: dict) -> bool:
    """The same algorithm, its public samples a round (FedMD's) at most the smoke's images."""
    if smoke.get("samples", 0) > SMOKE["images"] and smoke != paper:
        return False
    return {**paper, "samples": None} == {**smoke, "samples": None}


ALIKE = {"model": _models_alike, "algorithm": _algorithms_alike}


def test_the_first_seed_only(plans):
    paper, smoke = plans
    assert {r["seed"] for r in smoke.runs.values()} == {0}
    assert {r["seed"] for r in paper.runs.values()} > {0}
