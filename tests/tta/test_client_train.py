"""FedPCE's client training (the ``client_train`` adapt method): new clients train only what
their method keeps local, every frozen tensor stays bit-identical, and a killed job resumes to
the same numbers."""

from __future__ import annotations

import pytest
import torch

from fedrepro.jobs.adapt import prepare_adapt
from fedrepro.jobs.train import train_run
from fedrepro.tta import adapt_method
from tests.job_helpers import assert_adaptation_resumes, toy_job

SPEC = {"scheme": "fedpce_degradation", "m": 2, "clients": 12, "min_size": 2}
GROUPS = [{"match": "generators.", "lr": 1e-2}, {"match": "embedding", "lr": 0.1, "min_lr": 1e-4}]


def fedpce_run(tmp, algorithm: str):
    """A collaborative run of FedPCE's setting (9 of 12 clients, fold 0 of 5), trained."""
    tuning = {"tuning": "pce", "tuning_options": {"embed_dim": 4, "hidden": 8}}
    model = {"backbone": "resnet18_in_mini", "pretrained": False, "img_size": 32}
    cfg = toy_job(tmp, algorithm=algorithm, spec=SPEC, cohort="collaborative",
                  cv={"folds": 5, "fold": 0}, eval_every=1,
                  model={**model, **(tuning if algorithm == "fedpce" else {})},
                  train={"rounds": 2, "local_epochs": 1, "local_steps": 2, "batch_size": 8,
                         "optimizer": "adam", "lr": 1e-3, "betas": [0.5, 0.9],
                         "weight_decay": 1e-4, "optimizer_state": "client",
                         "schedule": {"kind": "cosine", "min_lr": 1e-6},
                         "param_groups": GROUPS})  # fmt: skip
    run = tmp / "run"
    metrics = train_run(cfg, tmp / "data", tmp / "part.json", run, device="cpu")
    return run, metrics


ADAPT = {"method": "client_train", "rounds": 3,
         "param_groups": [{"match": "embedding", "lr": 1e-2, "min_lr": 1e-5}]}  # fmt: skip


def _client_training(tmp, algorithm):
    run, trained = fedpce_run(tmp, algorithm)
    job, _ = prepare_adapt(ADAPT, run, tmp / "data", tmp / "part.json", device="cpu")
    before = {n: p.detach().clone() for n, p in job.model.named_parameters()}
    state = job.run(None, log=lambda _: None)
    return job, before, state, trained


@pytest.mark.parametrize(
    ("algorithm", "trains"),
    [("fedpce", 4), ("fedbn", None), ("fedper", None), ("fedavg", 0)],
)
def test_new_clients_train_only_their_methods_local_set(tmp_path, algorithm, trains):
    job, before, state, trained = _client_training(tmp_path, algorithm)
    assert len(job.clients) == 3  # the 20 % new clients: one per degradation
    local = set(job.algorithm.local)
    assert state.shared == {}  # nothing is sent or aggregated
    numel = sum(before[n].numel() for n in local if n in before)
    if trains is not None:
        assert numel == trains  # FedPCE: E scalars; FedAvg: none
    for name, p in job.model.named_parameters():
        if name not in local:
            assert torch.equal(p, before[name]), name  # frozen: bit-identical
            assert not p.requires_grad
    if local:
        moved = [k for k in range(3) if any(
            not torch.equal(state.local[k][n], before[n]) for n in local)]  # fmt: skip
        assert moved == [0, 1, 2] or algorithm == "fedpce"
    if algorithm == "fedpce":  # each new client starts one-hot and moves from there
        for k in range(3):
            start = torch.zeros(4)
            start[k] = 1
            assert not torch.equal(state.local[k]["embedding"], start)


def test_client_training_resumes_to_identical_numbers(tmp_path):
    run, _ = fedpce_run(tmp_path, "fedpce")
    assert_adaptation_resumes(ADAPT, run, tmp_path)


def test_engine_config_takes_the_new_cohort_and_the_runs_fold():
    run = {"seed": 0, "cohort": "collaborative", "cv": {"folds": 5, "fold": 3},
           "algorithm": {"name": "fedpce"},
           "train": {"rounds": 1000, "lr": 1e-4, "param_groups": GROUPS}}  # fmt: skip
    out = adapt_method(ADAPT).run_config(run, ADAPT)
    assert out["cohort"] == "new" and out["cv"] == {"folds": 5, "fold": 3}
    assert out["train"]["rounds"] == 3 and out["train"]["param_groups"] == ADAPT["param_groups"]
    assert out["algorithm"] == {"name": "fedpce"} and run["train"]["rounds"] == 1000
    assert "images" not in out
    assert adapt_method(ADAPT).run_config(run, {**ADAPT, "images": 8})["images"] == 8


def test_a_global_models_new_clients_are_evaluated_once_per_degradation(tmp_path):
    """FedPCE §4.3: FedAvg's new clients are evaluated, not trained: the experiment's one
    round (nothing trains in it) gives one evaluation, reported per degradation as Table 2's
    caption says (the mean over the group's clients) beside the pooled accuracy."""
    run, _ = fedpce_run(tmp_path, "fedavg")
    once = {**ADAPT, "rounds": 1, "eval_every": 1}
    job, _ = prepare_adapt(once, run, tmp_path / "data", tmp_path / "part.json", device="cpu")
    state = job.run(None, log=lambda _: None)
    assert [r["round"] for r in state.history if "acc" in r] == [1]
    row = state.history[0]
    assert len(row["acc_per_group"]) == 3 and set(row["acc_per_group_mean"]) == set(
        row["acc_per_group"]
    )
    # one new client per degradation: the group's mean is that client's accuracy
    means = sorted(row["acc_per_group_mean"].values())
    assert means == pytest.approx(sorted(row["acc_per_client"]))
