"""FedAvg-FT (the ``finetune`` adapt method): what it runs, and that it starts from the
trained global model, sends nothing and never touches the run's files."""

from __future__ import annotations

import json

import pytest

from fedrepro.experiments.config import SCHEMA_DIR, load_yaml
from fedrepro.jobs.adapt import adapt_run
from fedrepro.jobs.train import train_run
from fedrepro.tta import ADAPT_METHODS, adapt_method
from tests.job_helpers import toy_job


def test_schema_enum_is_the_registry():
    schema = load_yaml(SCHEMA_DIR / "adapt.yaml")
    assert schema["properties"]["method"]["enum"] == list(ADAPT_METHODS)
    # every option the schema allows is some method's, and every method's option is allowed
    options = [set(m.options) for m in ADAPT_METHODS.values()]
    assert set(schema["properties"]) - {"method"} == set().union(*options)


def test_engine_config_is_local_training_one_epoch_per_round():
    cfg = {"seed": 0, "algorithm": {"name": "fedavg"}, "train": {
        "rounds": 50, "local_epochs": 5, "batch_size": 16, "optimizer": "sgd", "lr": 0.1,
        "fraction": 0.2, "schedule": {"kind": "milestones", "milestones": [30]}}}  # fmt: skip
    out = adapt_method({"method": "finetune"}).run_config(cfg, {"epochs": 4, "lr": 0.01})
    assert out["algorithm"] == {"name": "local"}
    assert out["train"]["rounds"] == 4 and out["train"]["local_epochs"] == 1
    assert out["train"]["fraction"] == 1.0 and out["train"]["lr"] == 0.01
    assert out["train"]["schedule"] == {"kind": "constant"}
    assert out["train"]["batch_size"] == 16  # not given: the run's
    assert cfg["train"]["rounds"] == 50  # the run's config is not changed


def test_unknown_method_or_option_is_a_clear_error():
    with pytest.raises(ValueError, match="adapt.method: unknown 'memo'"):
        adapt_method({"method": "memo"})
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['steps'\]"):
        adapt_method({"method": "finetune"}).resolve({"method": "finetune", "steps": 3})


def test_starts_from_the_global_model_sends_nothing_and_leaves_the_run(tmp_path):
    cfg = toy_job(tmp_path, 2, algorithm="fedavg", eval_every=1)
    run = tmp_path / "run"
    trained = train_run(cfg, tmp_path / "data", tmp_path / "part.json", run, device="cpu")
    before = {f.name: f.read_bytes() for f in run.iterdir()}
    # a vanishing step size: each client's model is still the global model it started from
    # (SimpleCNN has no batch norm, so nothing else moves)
    still = adapt_run({"method": "finetune", "epochs": 1, "lr": 1e-30, "momentum": 0.0,
                       "weight_decay": 0.0}, run, tmp_path / "data", tmp_path / "part.json",
                      tmp_path / "still", device="cpu")  # fmt: skip
    assert still["final_acc_per_client"] == trained["final_acc_per_client"]
    assert still["comm"]["total_bytes"] == 0 and still["params"]["communicated"] == 0
    moved = adapt_run({"method": "finetune", "epochs": 2, "lr": 0.05}, run, tmp_path / "data",
                      tmp_path / "part.json", tmp_path / "moved", device="cpu")  # fmt: skip
    assert moved["final_acc_per_client"] != trained["final_acc_per_client"]
    assert moved["rounds"] == 2 and moved["run"] == "run"
    assert json.loads((tmp_path / "moved/config.json").read_text())["adapt"]["epochs"] == 2
    assert {f.name: f.read_bytes() for f in run.iterdir()} == before


def test_a_personalized_run_is_refused(tmp_path):
    cfg = toy_job(tmp_path, 1, algorithm="fedper")
    run = tmp_path / "run"
    train_run(cfg, tmp_path / "data", tmp_path / "part.json", run, device="cpu")
    with pytest.raises(ValueError, match="starts from a global model only"):
        adapt_run({"method": "finetune"}, run, tmp_path / "data", tmp_path / "part.json",
                  tmp_path / "out", device="cpu")  # fmt: skip
