"""SIGKILL a training or adaptation job at a random round, rerun it, and get the metrics
of an uninterrupted job."""

from __future__ import annotations

import subprocess

import pytest

from tests.job_helpers import (
    VIEWS,
    adapt_cmd,
    kill_then_resume,
    run_metrics,
    toy_job,
    train_cmd,
)
from tests.workflow_helpers import env

ROUNDS = 12


def test_sigkill_at_a_random_round_then_rerun_matches_uninterrupted(tmp_path):
    toy_job(tmp_path, ROUNDS)
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    subprocess.run(train_cmd(tmp_path, clean), check=True, env=env(), timeout=300)
    done = kill_then_resume(train_cmd(tmp_path, killed), killed, ROUNDS)
    assert run_metrics(killed) == run_metrics(clean), f"killed after round {done}"


@pytest.mark.parametrize(
    "adapt",
    [
        {"method": "finetune", "epochs": ROUNDS, "lr": 0.01},
        # test-time adaptation: unlabelled test images, two views, per-client state
        {
            "method": "fedicon_test",
            "classifier_epochs": 1,
            "tta_epochs": ROUNDS - 1,
            "views": VIEWS,
        },  # fmt: skip
    ],
    ids=["finetune", "fedicon_test"],
)
def test_killed_adaptation_resumes_to_identical_numbers_and_leaves_the_run_alone(tmp_path, adapt):
    toy_job(tmp_path, 3, algorithm="fedavg")
    run = tmp_path / "run"
    subprocess.run(train_cmd(tmp_path, run), check=True, env=env(), timeout=300)
    before = {f.name: f.read_bytes() for f in run.iterdir()}
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    subprocess.run(adapt_cmd(tmp_path, run, clean, adapt), check=True, env=env(), timeout=300)
    done = kill_then_resume(adapt_cmd(tmp_path, run, killed, adapt), killed, ROUNDS)
    assert run_metrics(killed) == run_metrics(clean), f"killed after epoch {done}"
    assert {f.name: f.read_bytes() for f in run.iterdir()} == before  # the run is untouched
    assert run_metrics(clean)["run"] == "run" and len(run_metrics(clean)["final_acc_per_client"])
