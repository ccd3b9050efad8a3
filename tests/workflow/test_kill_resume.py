"""SIGKILL a training or adaptation job at a random round, rerun it, and get the metrics
of an uninterrupted job."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from tests.job_helpers import adapt_cmd, run_metrics, toy_job, train_cmd
from tests.workflow_helpers import env

ROUNDS = 12


def kill_then_resume(cmd: list[str], out: Path, rounds: int) -> int:
    """Kill ``cmd`` (writing to ``out``) after a random checkpointed round, rerun it to the
    end; returns the round it had finished when killed."""
    chance = random.SystemRandom()
    target = chance.randint(1, rounds - 4)  # the round whose checkpoint we wait for
    proc = subprocess.Popen(cmd, env=env())
    ckpt = out / "checkpoint.pt"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if ckpt.exists() and torch.load(ckpt, weights_only=True)["round"] >= target:
            break
        time.sleep(0.01)
    time.sleep(chance.uniform(0.0, 0.03))  # somewhere inside the next round
    assert proc.poll() is None, f"the job finished before it could be killed (round {target})"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "metrics.json").exists(), "a killed job must not look finished"
    done = torch.load(ckpt, weights_only=True)["round"]
    assert target <= done < rounds, (target, done)
    subprocess.run(cmd, check=True, env=env(), timeout=300)
    assert not ckpt.exists()
    return done


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
        {"method": "fedicon_test", "classifier_epochs": 1, "tta_epochs": ROUNDS - 1},
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
