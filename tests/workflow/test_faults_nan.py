"""NaN in one client's update: the run finishes, the round is flagged, the table marks it."""

from __future__ import annotations

import json
import math

import pytest
import torch

import fedrepro.fl.engine as engine
from fedrepro.jobs.train import train_run
from fedrepro.report.tables import make_table
from tests.job_helpers import toy_job
from tests.report.test_report_results import with_files

POISONED_CALL = 3  # the 4th local update: round 2 (two clients per round)


@pytest.mark.parametrize("nonfinite", ["exclude", "keep"])
def test_nan_client_update_is_flagged_and_marked_in_the_table(tmp_path, monkeypatch, nonfinite):
    toy_job(tmp_path, rounds=4, algorithm="fedavg", nonfinite=nonfinite)
    real = engine.train_epochs
    calls = []

    def poisoned(model, *args, **kwargs):
        out = real(model, *args, **kwargs)
        if len(calls) == POISONED_CALL:
            with torch.no_grad():
                next(p for p in model.parameters() if p.requires_grad).fill_(math.nan)
        calls.append(1)
        return out

    monkeypatch.setattr(engine, "train_epochs", poisoned)
    cfg = json.loads((tmp_path / "config.json").read_text())
    runs = tmp_path / "runs"
    metrics = train_run(cfg, tmp_path / "data", tmp_path / "part.json", runs / "poisoned")
    assert len(calls) == 8  # every round ran
    assert metrics["diverged"] and metrics["diverged_rounds"][0] == 2
    history = (runs / "poisoned" / "history.csv").read_text().splitlines()
    assert history[2].split(",")[-2:] == ["True", "1" if nonfinite == "exclude" else "0"]
    if nonfinite == "exclude":
        assert metrics["diverged_rounds"] == [2] and math.isfinite(metrics["final_acc"])

    manifest = {
        "paper": "test", "item": "t", "kind": "table", "title": "NaN", "scale": "mini",
        "spec": {"rows": ["dataset"], "columns": ["algorithm"], "metric": "final_acc",
                 "fmt": "{:.2f}"},
        "runs": [{"id": "poisoned", "labels": {"dataset": "toy", "algorithm": "FedAvg",
                                               "seed": 0}}],
    }  # fmt: skip
    make_table(with_files(manifest, runs), tmp_path / "table")
    row = next(ln for ln in (tmp_path / "table.md").read_text().splitlines() if "toy" in ln)
    assert "†" in row, row
