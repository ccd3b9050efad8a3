"""SIGKILL a training or adaptation job at a random round, rerun it, and get the metrics
of an uninterrupted job."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

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


def test_a_killed_job_keeps_a_log_line_per_round_with_its_eta(tmp_path):
    """Round lines were printed into the job's log block-buffered: ``tail -f`` showed nothing
    for many rounds and a kill lost them. Each finished round is in the log at once, with
    the time left."""
    toy_job(tmp_path, ROUNDS)
    out, log = tmp_path / "run", tmp_path / "job.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen(train_cmd(tmp_path, out), env=env(), stdout=fh, stderr=fh)
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None and "round 3/" not in log.read_text():
            time.sleep(0.01)
        assert proc.poll() is None, "no round line while the job ran"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    lines = [line for line in log.read_text().splitlines() if f"/{ROUNDS} loss=" in line]
    assert len(lines) >= 3, log.read_text()
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d round 1/12 .* eta \d+[hms]", lines[0])


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
