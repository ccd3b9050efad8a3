"""Same seed, same numbers; concurrent jobs and writers never touch each other's files."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

from fedrepro.atomic import atomic_write
from tests.job_helpers import run_metrics, toy_job, train_cmd
from tests.workflow_helpers import env

RESULT_FILES = {"config.json", "metrics.json", "history.csv", "state.safetensors"}


def test_two_concurrent_jobs_with_one_seed_give_identical_metrics_in_their_own_dirs(tmp_path):
    toy_job(tmp_path, rounds=4)
    outs = [tmp_path / "runs" / name for name in ("a", "b")]
    procs = [subprocess.Popen(train_cmd(tmp_path, out), env=env()) for out in outs]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    for out in outs:
        assert {p.name for p in out.iterdir()} == RESULT_FILES  # no temp file, no stray file
    assert run_metrics(outs[0]) == run_metrics(outs[1])
    assert (outs[0] / "state.safetensors").read_bytes() == (
        outs[1] / "state.safetensors"
    ).read_bytes()
    assert {p.name for p in (tmp_path / "runs").iterdir()} == {"a", "b", "a.json", "b.json"}


def test_concurrent_atomic_writers_never_leave_a_mixed_file(tmp_path):
    path = tmp_path / "shared.txt"
    payloads = [str(i) * 200_000 for i in range(8)]
    seen = []

    def writer(text: str) -> None:
        for _ in range(20):
            atomic_write(path, lambda p, text=text: Path(p).write_text(text))
            seen.append(path.read_text())

    threads = [threading.Thread(target=writer, args=(t,)) for t in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(text in payloads for text in seen)  # every read is one writer's whole file
    assert [p.name for p in tmp_path.iterdir()] == ["shared.txt"]
