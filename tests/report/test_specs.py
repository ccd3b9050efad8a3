"""Item and claim specs checked against the plan before any job (fedrepro.report.specs): each
bad name stops in one line naming the file and the key; before, each one passed
`snakemake -n` and failed (or was ignored) only when its item or claims job ran."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from fedrepro.experiments.config import ConfigError, load_yaml
from fedrepro.experiments.plan import build_plan
from fedrepro.fl.engine import RunState
from fedrepro.jobs.train import HISTORY_COLUMNS, write_results
from fedrepro.report.specs import HISTORY, METRICS, check_specs
from tests.experiments.test_plan_checks import copy_config, set_key

REPO = Path(__file__).resolve().parents[2]
FILE = "config/experiments/adapters.yaml"

CASES = [  # (key path in adapters.yaml, value, the start of the one line)
    (["items", "table1", "rows"], ["datset", "partition"],
     f"{FILE} items.table1.rows: 'datset' is not a label of its runs"),
    (["items", "fig5", "lines"], "varient", f"{FILE} items.fig5.lines: 'varient' is not a label"),
    (["items", "table1", "metric"], "final_acc_men",
     f"{FILE} items.table1.metric: 'final_acc_men' is not a metrics.json key"),
    (["items", "fig5", "metric"], "accuracy",
     f"{FILE} items.fig5.metric: 'accuracy' is not a history.csv column"),
    (["items", "table1", "diff", 0, "label"], "algorithm2",
     f"{FILE} items.table1.diff[0].label: 'algorithm2' is not one of its columns"),
    (["items", "table1", "colums"], "x", "experiments/adapters.items.table1.colums: unknown key"),
    (["claims", 0, "test"], "value =< 30", f"{FILE} claims[0]: claim 'm1_near_chance': key 'test'"),
    (["claims", 0, "item"], "tabel1",
     f"{FILE} claims[0] (m1_near_chance).item: 'tabel1' is not an item of adapters"),
    (["claims", 0, "select"], {"partitio": "#M=1"},
     f"{FILE} claims[0] (m1_near_chance).select: 'partitio' is not a label"),
    (["claims", 0, "metric"], "final_ac",
     f"{FILE} claims[0] (m1_near_chance).metric: 'final_ac' is not a metrics.json key"),
]  # fmt: skip


def _check(repo: Path, paper: str = "adapters") -> None:
    config = load_yaml(REPO / "config/config.yaml") | {"papers": [paper]}
    check_specs(build_plan(config, repo), repo)


@pytest.mark.parametrize("at,value,message", CASES, ids=lambda v: str(v)[:30])
def test_a_bad_item_or_claim_spec_stops_the_plan_in_one_line(tmp_path, at, value, message):
    set_key(copy_config(tmp_path), "adapters", at, value)
    with pytest.raises(ConfigError) as err:
        _check(tmp_path)
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "paper", ["adapters", "baselines", "fedhpl", "fedicon", "fedins", "fedpce"]
)
def test_the_shipped_items_and_claims_pass(paper):
    _check(REPO, paper)


def test_a_transcription_not_there_is_none(tmp_path):
    """The plan takes a paper's missing config/reported/*.csv as no transcription (its report
    shows no paper values); the claims check read the file's header and raised
    FileNotFoundError, a traceback at parse time."""
    (copy_config(tmp_path) / "reported" / "adapters.csv").unlink()
    _check(tmp_path)


def _flat(doc: dict, prefix: str = "") -> set[str]:
    """Dotted keys; a per-group mapping (``best_acc_per_group``) is one metric, read whole."""
    return {
        key
        for k, v in doc.items()
        for key in (
            _flat(v, f"{prefix}{k}.")
            if isinstance(v, dict) and not k.endswith("_per_group")
            else [f"{prefix}{k}"]
        )
    }


def test_the_metrics_and_columns_a_spec_may_name_are_those_a_run_writes(tmp_path):
    """A run's own writer (every optional key present: per-class and per-group accuracy,
    clients' local tensors clustered by group)."""
    assert tuple(HISTORY_COLUMNS) == HISTORY
    row = {"round": 1, "acc": 50.0, "acc_mean": 50.0, "acc_per_client": [40.0, 60.0],
           "acc_per_class": [50.0], "acc_per_group": {"a": 50.0}, "acc_per_group_mean": 50.0,
           "loss": 1.0, "lr": 0.1, "clients": 2, "up_bytes": 8, "down_bytes": 8,
           "up_scalars": 2, "seconds": 0.1, "diverged": False}  # fmt: skip
    model = torch.nn.Linear(2, 2)
    local = {k: {"w": torch.randn(3, generator=torch.Generator().manual_seed(k))} for k in range(4)}
    job = SimpleNamespace(cfg={"scale": "mini"}, model=model, device=torch.device("cpu"),
                          algorithm=SimpleNamespace(trainable=["weight"]),
                          clients=SimpleNamespace(groups=["a", "a", "b", "b"]))  # fmt: skip
    state = RunState(round=1, shared={"weight": model.weight}, local=local, history=[row])
    write_results(tmp_path, job, state, time.perf_counter(), 0.0)
    written = _flat(json.loads((tmp_path / "metrics.json").read_text()))
    assert written - {"scale", "run_id"} == set(METRICS)
