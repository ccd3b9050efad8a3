"""A local run on a machine of several GPUs gives each concurrent job its own
(``fedrepro.jobs.gpus``): two jobs at once take different GPUs, a third waits for one to free,
a Slurm job keeps its allocation's."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from fedrepro.jobs.gpus import claim_gpu, gpu_pool

CLAIM = (
    "import os, sys, time; from fedrepro.jobs.gpus import claim_gpu; "
    "print(claim_gpu(wait_s=float(sys.argv[1])), os.environ.get('CUDA_VISIBLE_DEVICES'), "
    "flush=True); time.sleep(float(sys.argv[2]))"
)


def _job(tmp_path, wait: float, hold: float) -> subprocess.Popen:
    env = {**os.environ, "FEDREPRO_GPUS": "0,1", "FEDREPRO_GPU_LOCKS": str(tmp_path)}
    env.pop("SLURM_JOB_ID", None)
    return subprocess.Popen([sys.executable, "-c", CLAIM, str(wait), str(hold)], env=env,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip


def test_two_concurrent_local_jobs_take_different_gpus_and_a_third_waits(tmp_path):
    first, second = _job(tmp_path, 5, 3), _job(tmp_path, 5, 3)
    got = {first.stdout.readline().split()[0], second.stdout.readline().split()[0]}
    assert got == {"0", "1"}
    started = time.monotonic()
    third = _job(tmp_path, 20, 0)
    gpu, visible = third.stdout.readline().split()
    assert gpu == visible and gpu in got and time.monotonic() - started > 1.0  # waited
    for p in (first, second, third):
        p.wait(timeout=30)


def test_a_slurm_job_or_a_single_gpu_has_nothing_to_choose(monkeypatch):
    monkeypatch.setenv("FEDREPRO_GPUS", "0,1")
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    assert claim_gpu() is None
    monkeypatch.delenv("SLURM_JOB_ID")
    monkeypatch.setenv("FEDREPRO_GPUS", "3")
    assert claim_gpu() is None and gpu_pool() == ["3"]
