"""SIGKILL a training job at a random round, rerun it, and get the metrics of an
uninterrupted run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time

import torch

from tests.job_helpers import run_metrics, toy_job, train_cmd
from tests.workflow_helpers import env

ROUNDS = 12


def test_sigkill_at_a_random_round_then_rerun_matches_uninterrupted(tmp_path):
    toy_job(tmp_path, ROUNDS)
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    subprocess.run(train_cmd(tmp_path, clean), check=True, env=env(), timeout=300)

    chance = random.SystemRandom()
    target = chance.randint(1, ROUNDS - 4)  # the round whose checkpoint we wait for
    proc = subprocess.Popen(train_cmd(tmp_path, killed), env=env())
    ckpt = killed / "checkpoint.pt"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if ckpt.exists() and torch.load(ckpt, weights_only=True)["round"] >= target:
            break
        time.sleep(0.01)
    time.sleep(chance.uniform(0.0, 0.03))  # somewhere inside the next round
    assert proc.poll() is None, f"the job finished before it could be killed (round {target})"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "metrics.json").exists(), "a killed job must not look finished"
    done = torch.load(ckpt, weights_only=True)["round"]
    assert target <= done < ROUNDS, (target, done)

    subprocess.run(train_cmd(tmp_path, killed), check=True, env=env(), timeout=300)
    assert run_metrics(killed) == run_metrics(clean), f"killed after round {done}"
    assert not ckpt.exists()
