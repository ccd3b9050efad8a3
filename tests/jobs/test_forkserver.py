"""The fork server (fedrepro.jobs.forkserver): a job run on it writes the same files as the
plain command, its log goes where the shell put it, a failing job fails, a killed client
kills its job, and without a server the client runs the plain command."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from safetensors.torch import load_file

from fedrepro.jobs.forkserver import ENV, ForkServer
from tests.job_helpers import run_metrics, toy_job, train_cmd

CLIENT = [sys.executable, "-m", "fedrepro.jobs.forkserver"]


@pytest.fixture(scope="module")
def server():
    srv = ForkServer()
    srv.start()
    path = os.environ[ENV]
    deadline = time.monotonic() + 120
    while not os.path.exists(path):
        assert srv.proc.poll() is None and time.monotonic() < deadline, "server did not start"
        time.sleep(0.1)
    yield dict(os.environ)
    srv.stop()


def _client(cmd: list[str]) -> list[str]:
    """The rule's command through the client: python -m fedrepro.jobs.forkserver SCRIPT …"""
    return [*CLIENT, *cmd[1:]]


def test_a_run_on_the_server_saves_what_the_plain_command_saves(tmp_path, server):
    toy_job(tmp_path, rounds=2, algorithm="fedavg")
    plain, served = tmp_path / "plain", tmp_path / "served"
    subprocess.run(train_cmd(tmp_path, plain), check=True, capture_output=True)
    log = tmp_path / "served.log"
    with open(log, "w") as out:
        subprocess.run(_client(train_cmd(tmp_path, served)), check=True, env=server,
                       stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    assert "round 2/2" in log.read_text()  # the job's own output, in the job's log
    assert run_metrics(served) == run_metrics(plain)
    a, b = load_file(plain / "state.safetensors"), load_file(served / "state.safetensors")
    assert a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)
    untimed = [pd.read_csv(d / "history.csv").drop(columns="seconds") for d in (plain, served)]
    pd.testing.assert_frame_equal(*untimed)


def test_a_failing_job_fails_with_its_traceback(tmp_path, server):
    script = tmp_path / "boom.py"
    script.write_text("import sys\nprint('started')\nsys.exit(3)\n")
    done = subprocess.run([*CLIENT, str(script)], env=server, capture_output=True, text=True)
    assert done.returncode == 3 and done.stdout == "started\n"
    script.write_text("raise ValueError('bad input')\n")
    done = subprocess.run([*CLIENT, str(script)], env=server, capture_output=True, text=True)
    assert done.returncode == 1 and "ValueError: bad input" in done.stderr


def test_killing_the_client_kills_its_job(tmp_path, server):
    marker = tmp_path / "pid"
    script = tmp_path / "sleep.py"
    script.write_text(f"import os, time\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\n"
                      "time.sleep(60)\n")  # fmt: skip
    client = subprocess.Popen([*CLIENT, str(script)], env=server)
    deadline = time.monotonic() + 30
    while not marker.exists() or not marker.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    job = int(marker.read_text())
    assert job != client.pid  # it ran on the server
    client.send_signal(signal.SIGKILL)
    client.wait()
    deadline = time.monotonic() + 10
    while _alive(job):
        assert time.monotonic() < deadline, "the job outlived its client"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except (FileNotFoundError, ProcessLookupError):  # gone before or while being read
        return False
    return status != "Z"


def test_without_a_server_the_client_runs_the_plain_command(tmp_path):
    script = tmp_path / "where.py"
    script.write_text("import os, sys\nprint(os.getpid(), sys.argv[1:])\n")
    env = {k: v for k, v in os.environ.items() if k != ENV}
    for extra in ({}, {ENV: str(tmp_path / "no-such-socket")}):
        done = subprocess.run([*CLIENT, str(script), "a", "b"], env={**env, **extra},
                              capture_output=True, text=True, check=True)  # fmt: skip
        assert done.stdout.split(maxsplit=1)[1].strip() == "['a', 'b']"


def test_a_slurm_job_runs_its_own_command_not_on_a_server_outside_its_allocation(tmp_path, server):
    """A server started outside Slurm (a driver on the login node) would run a Slurm job's work
    outside the job's limits and accounting (a 97 s pretraining recorded 17 MB and 0.04 CPU-s):
    the job runs the plain command in its allocation; a client in the server's allocation (or
    outside any, as the server) runs on it."""
    script = tmp_path / "where.py"
    script.write_text("import os\nprint(os.getpid())\n")
    for job, on_server in ((None, True), ("4242", False)):
        env = {k: v for k, v in server.items() if k != "SLURM_JOB_ID"}
        client = subprocess.Popen([*CLIENT, str(script)], stdout=subprocess.PIPE, text=True,
                                  env=env | ({"SLURM_JOB_ID": job} if job else {}))  # fmt: skip
        out, _ = client.communicate(timeout=120)
        assert client.returncode == 0 and (int(out) != client.pid) == on_server, job


def test_a_served_job_reports_its_own_memory_and_cpu_in_its_log(tmp_path, server):
    """Snakemake's benchmark file samples the client (about 17 MB, 0.03 CPU-s for any job): the
    job's own peak memory and CPU time, as the server reaps it, are the last line of its log."""
    script = tmp_path / "work.py"
    script.write_text(
        "import sys, time\n"
        "if sys.argv[1] == 'work':\n"
        "    held = b'\\x01' * (200 << 20)  # 200 MiB, every page written\n"
        "    t = time.process_time()\n"
        "    while time.process_time() - t < 0.5:\n"
        "        pass\n"
        "    with open(sys.argv[2], 'wb') as f:  # 50 MiB written through to the disk\n"
        "        f.write(held[: 50 << 20])\n"
        "        f.flush()\n"
        "        __import__('os').fsync(f.fileno())\n"
    )
    used = {}
    for kind in ("idle", "work"):
        log = tmp_path / f"{kind}.log"
        with open(log, "w") as out:
            subprocess.run([*CLIENT, str(script), kind, str(tmp_path / "out.bin")], check=True,
                           env=server, stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
        last = log.read_text().splitlines()[-1]
        number = r"([\d.]+)"
        found = re.fullmatch(
            rf"job usage .*: max_rss {number} MiB, cpu_time {number} s, "
            rf"io_in {number} MiB, io_out {number} MiB",
            last,
        )
        assert found, last
        used[kind] = [float(v) for v in found.groups()]
    assert used["work"][0] - used["idle"][0] >= 195  # the 200 MiB the job held
    assert used["work"][1] >= 0.5 > used["idle"][1]
    assert used["work"][3] >= 50 > used["idle"][3]  # the 50 MiB it wrote
