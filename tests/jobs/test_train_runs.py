"""A training job of several runs (config runs_per_job: seeds): each run is what it would be
alone, and a killed job resumes without retraining what it finished."""

from __future__ import annotations

import json
import re
import subprocess

import pandas as pd

from fedrepro.jobs.train import train_runs
from tests.job_helpers import kill_then_resume, run_metrics, toy_job, train_cmd
from tests.workflow_helpers import env

ROUNDS = 8


def _seeds(tmp, rounds: int) -> list[dict]:
    cfg = toy_job(tmp, rounds)
    return [cfg, {**cfg, "seed": 1}]


def _files(out) -> dict:
    return {f.name: f.read_bytes() for f in out.iterdir() if f.name != "history.csv"}


def _same_run(a, b) -> None:
    """Equal metrics, equal saved state and config, and an equal history (but its timings)."""
    assert run_metrics(a) == run_metrics(b)
    assert _files(a) == {**_files(b), "metrics.json": _files(a)["metrics.json"]}
    untimed = [pd.read_csv(d / "history.csv").drop(columns="seconds") for d in (a, b)]
    pd.testing.assert_frame_equal(*untimed)


def test_runs_trained_in_one_job_equal_the_same_runs_trained_one_per_job(tmp_path):
    configs = _seeds(tmp_path, rounds=3)
    together = [tmp_path / "job" / f"s{c['seed']}" for c in configs]
    subprocess.run(train_cmd(tmp_path, *together, configs=configs), check=True, env=env())
    alone = [tmp_path / "alone" / f"s{c['seed']}" for c in configs]
    for cfg, out in zip(configs, alone, strict=True):
        subprocess.run(train_cmd(tmp_path, out, configs=[cfg]), check=True, env=env())
    for a, b in zip(together, alone, strict=True):
        _same_run(a, b)
    assert run_metrics(together[0]) != run_metrics(together[1])  # the seeds differ
    record = json.loads((tmp_path / "job" / "s0.json").read_text())
    assert [r["run"] for r in record["runs"]] == ["s0", "s1"]
    assert not any(r["kept"] for r in record["runs"])
    assert not (tmp_path / "job" / "s0.json.partial").exists()


def test_a_killed_job_keeps_its_finished_run_and_resumes_the_interrupted_one(tmp_path):
    configs = _seeds(tmp_path, rounds=ROUNDS)
    clean = [tmp_path / "clean" / f"s{c['seed']}" for c in configs]
    subprocess.run(train_cmd(tmp_path, *clean, configs=configs), check=True, env=env())
    killed = [tmp_path / "killed" / f"s{c['seed']}" for c in configs]
    cmd = train_cmd(tmp_path, *killed, configs=configs)
    first = {}

    def finished_first() -> None:
        first.update({f.name: f.stat().st_mtime_ns for f in killed[0].iterdir()})

    done = kill_then_resume(cmd, killed[1], ROUNDS, before_rerun=finished_first)
    assert {f.name: f.stat().st_mtime_ns for f in killed[0].iterdir()} == first  # not retrained
    record = json.loads((tmp_path / "killed" / "s0.json").read_text())
    assert [r["kept"] for r in record["runs"]] == [True, False], record
    for a, b in zip(killed, clean, strict=True):
        _same_run(a, b)
    assert done < ROUNDS


def test_a_rerun_of_a_finished_job_trains_anew(tmp_path):
    """What the workflow reruns (changed inputs, `-R train`) trains again: only an interrupted
    job keeps finished runs."""
    configs = _seeds(tmp_path, rounds=1)
    outs = [tmp_path / "job" / f"s{c['seed']}" for c in configs]
    for _ in range(2):
        subprocess.run(train_cmd(tmp_path, *outs, configs=configs), check=True, env=env())
        record = json.loads((tmp_path / "job" / "s0.json").read_text())
        assert [r["kept"] for r in record["runs"]] == [False, False]


def test_the_job_log_names_each_run_and_gives_the_time_left_of_the_whole_job(tmp_path, job_lines):
    """No line named a run before its rounds, and the time left was the current run's: each
    run now opens with its id and setting, every round gives its training loss and the job's
    rounds left (over all its runs), and the job's last line sums it up."""
    configs = [{**c, "eval_every": 2} for c in _seeds(tmp_path, rounds=3)]
    runs = [{"config": c, "partition": tmp_path / "part.json", "out_dir": tmp_path / f"s{i}"}
            for i, c in enumerate(configs)]  # fmt: skip
    train_runs(runs, tmp_path / "data", tmp_path / "job.json", device="cpu")
    headers = [line for line in job_lines if line.startswith("run ")]
    assert headers == [
        f"run s{c['seed']}: algorithm scaffold, dataset cifar10, partition p, seed {c['seed']}, "
        "3 rounds"
        for c in configs
    ]
    rounds = [line for line in job_lines if line.startswith("round ")]
    assert [line.split()[1] for line in rounds] == ["1/3", "2/3", "3/3"] * 2
    assert all(re.search(r" loss=\d+\.\d{4} ", line) for line in rounds), rounds
    assert ["acc=" in line for line in rounds] == [False, True, True] * 2  # evaluated: 2, 3
    left = [int(re.search(r" eta \d+[hms].* \(job: (\d+) rounds? left\)$", line)[1])
            for line in rounds]  # fmt: skip
    assert left == [5, 4, 3, 2, 1, 0]
    assert job_lines.index(headers[1]) > job_lines.index(rounds[2])  # each before its rounds
    assert re.fullmatch(r"job done: 2 runs \(2 ran, 0 kept\), 6 rounds in \d+s", job_lines[-1])
