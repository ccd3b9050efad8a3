"""An adaptation job of several runs (the same adaptation of each seed of a configuration):
each adaptation is what it would be alone, and a killed job resumes without redoing what
it finished."""

from __future__ import annotations

import json
import subprocess

from tests.job_helpers import adapt_cmd, kill_then_resume, run_metrics, toy_job, train_cmd
from tests.workflow_helpers import env

EPOCHS = 8
ADAPT = {"method": "finetune", "epochs": EPOCHS, "lr": 0.01}


def _two_runs(tmp) -> list:
    """Two seeds of a toy FedAvg configuration, trained in one job."""
    cfg = toy_job(tmp, 2, algorithm="fedavg")
    runs = [tmp / "runs" / f"s{s}" for s in (0, 1)]
    configs = [cfg, {**cfg, "seed": 1}]
    subprocess.run(train_cmd(tmp, *runs, configs=configs), check=True, env=env(), timeout=300)
    return runs


def _files(out) -> dict:
    """The adaptation's files but those that hold timings."""
    timed = ("metrics.json", "history.csv")
    return {f.name: f.read_bytes() for f in out.iterdir() if f.name not in timed}


def test_adaptations_in_one_job_equal_the_same_adaptations_one_per_job(tmp_path):
    runs = _two_runs(tmp_path)
    together = [tmp_path / "job" / r.name for r in runs]
    cmd = adapt_cmd(tmp_path, runs[0], together[0], ADAPT, (runs[1], together[1]))
    subprocess.run(cmd, check=True, env=env(), timeout=300)
    for run, out in zip(runs, together, strict=True):
        alone = tmp_path / "alone" / run.name
        subprocess.run(adapt_cmd(tmp_path, run, alone, ADAPT), check=True, env=env())
        assert run_metrics(out) == run_metrics(alone) and _files(out) == _files(alone)
    assert run_metrics(together[0]) != run_metrics(together[1])  # the runs differ
    record = json.loads((tmp_path / "job" / "s0.json").read_text())
    assert [(r["run"], r["kept"]) for r in record["runs"]] == [("s0", False), ("s1", False)]


def test_a_killed_adaptation_job_keeps_its_finished_adaptation_and_resumes_the_other(tmp_path):
    runs = _two_runs(tmp_path)
    clean = [tmp_path / "clean" / r.name for r in runs]
    cmd = adapt_cmd(tmp_path, runs[0], clean[0], ADAPT, (runs[1], clean[1]))
    subprocess.run(cmd, check=True, env=env(), timeout=300)
    killed = [tmp_path / "killed" / r.name for r in runs]
    first = {}

    def finished_first() -> None:
        first.update({f.name: f.stat().st_mtime_ns for f in killed[0].iterdir()})

    cmd = adapt_cmd(tmp_path, runs[0], killed[0], ADAPT, (runs[1], killed[1]))
    done = kill_then_resume(cmd, killed[1], EPOCHS, before_rerun=finished_first)
    assert {f.name: f.stat().st_mtime_ns for f in killed[0].iterdir()} == first  # not redone
    record = json.loads((tmp_path / "killed" / "s0.json").read_text())
    assert [r["kept"] for r in record["runs"]] == [True, False], record
    for a, b in zip(killed, clean, strict=True):
        assert run_metrics(a) == run_metrics(b), f"killed after epoch {done}"
