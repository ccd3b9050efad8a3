"""The GPU check's jobs (``snakemake gpu_check``; docs/gpu.md): a training or adaptation job
run a second time and compared file by file with the first, a training job killed after its
first round's checkpoint and resumed, and a run family's step timed at the paper's batch with
its device memory against the meta-device estimate. The page
(``fedrepro.bench.gpu_check_page``) gathers them with the jobs' discipline reports.

Timings (seconds, peak memory) are left out of every comparison; everything else, the trained
tensors bit for bit, must be identical."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from fedrepro.atomic import write_json
from fedrepro.cost.job_memory import step_estimate_mb
from fedrepro.discipline import ENV
from fedrepro.fl.engine import run_rounds
from fedrepro.fl.timing import PhaseClock
from fedrepro.jobs.adapt import adapt_runs
from fedrepro.jobs.train import load_job, train_runs
from fedrepro.logs import job_log

__all__ = ["PYTHON", "compare_dirs", "repeat", "resume", "step_time"]

PYTHON = sys.executable  # the interpreter a resumed training job runs in (the check's own)

# what differs between two identical runs: wall time and the memory the process peaked at
TIMING = frozenset({"wall_seconds", "seconds", "eval_seconds", "peak_rss_mb", "peak_gpu_mb"})


def _without_timing(obj):
    if isinstance(obj, dict):
        return {k: _without_timing(v) for k, v in obj.items() if k not in TIMING}
    if isinstance(obj, list):
        return [_without_timing(v) for v in obj]
    return obj


def _content(path: Path):
    """A result file as compared: JSON without its timings, CSV without its timing
    columns, anything else (the trained tensors) as its bytes."""
    if path.suffix == ".json":
        return _without_timing(json.loads(path.read_text()))
    if path.suffix == ".csv":
        rows = list(csv.DictReader(io.StringIO(path.read_text())))
        return [{k: v for k, v in row.items() if k not in TIMING} for row in rows]
    return path.read_bytes()


def compare_dirs(first: Path, second: Path) -> dict:
    """The files of two result directories compared (``_content``): how many, and those that
    ``differ`` or are ``missing`` from either."""
    names = {p.name for p in Path(first).iterdir()} | {p.name for p in Path(second).iterdir()}
    missing = sorted(n for n in names if not (first / n).exists() or not (second / n).exists())
    differ = sorted(n for n in names - set(missing) if _content(first / n) != _content(second / n))
    return {"files": len(names), "differ": differ, "missing": missing}


def _checked_into(folder: Path) -> None:
    """A job of the check writes its discipline reports (where the smoke's jobs write theirs)
    into ``folder``, never over the first run's."""
    if os.environ.get(ENV):
        os.environ[ENV] = str(folder)


def repeat(stage: str, members: list[dict], data_dir: Path, root: Path, out: Path, **where):
    """Run a ``stage`` (``train`` or ``adapt``) job's ``members`` again, each into
    ``root/<its directory's name>``, compare each with its first run and write ``out``:
    per member its comparison, and ``identical`` when every file matches."""
    root = Path(root)
    _checked_into(root / "discipline")
    again = [{**m, "out_dir": str(root / Path(m["out_dir"]).name)} for m in members]
    run = train_runs if stage == "train" else adapt_runs
    run(again, data_dir, **where)
    rows = []
    for first, second in zip(members, again, strict=True):
        found = compare_dirs(Path(first["out_dir"]), Path(second["out_dir"]))
        rows.append({"member": Path(first["out_dir"]).name, **found})
        job_log(f"{rows[-1]['member']}: {found['files']} files, differ {found['differ']}")
    identical = all(not r["differ"] and not r["missing"] for r in rows)
    write_json(out, {"stage": stage, "members": rows, "identical": identical})


def resume(member: dict, command: list[str], root: Path, out: Path, poll: float = 0.002):
    """Train ``member`` (a training job's first run) for two rounds twice as ``command`` (the
    training job's command line without ``--runs-json`` and ``--record``): once through, once
    killed (SIGKILL) as soon as its first round's checkpoint is on disk and run again, which
    resumes it; write ``out``: the round the kill came after and the two runs compared."""
    root = Path(root)
    cfg = {**member["config"], "train": {**member["config"]["train"], "rounds": 2}}
    env = dict(os.environ)
    results = {}
    for name in ("through", "killed"):
        out_dir = root / name / Path(member["out_dir"]).name
        runs = json.dumps([{**member, "config": cfg, "out_dir": str(out_dir)}])
        args = [*command, "--runs-json", runs, "--record", str(root / name / "record.json")]
        if env.get(ENV):
            env[ENV] = str(root / name / "discipline")
        if name == "killed":
            results["killed_after"] = _kill_at_checkpoint(args, env, out_dir, poll)
        subprocess.run(args, env=env, check=True)
        results[name] = out_dir
    found = compare_dirs(results["through"], results["killed"])
    killed = results["killed_after"] is not None
    same = not found["differ"] and not found["missing"]
    name = Path(member["out_dir"]).name
    write_json(out, {"run": name, "rounds": 2, "killed_after_checkpoint": killed, **found,
                     "identical": killed and same})  # fmt: skip


def _kill_at_checkpoint(args: list[str], env: dict, out_dir: Path, poll: float) -> bool | None:
    """Start ``args``, SIGKILL it once ``out_dir/checkpoint.pt`` exists; True when killed
    there, None when it finished first."""
    proc = subprocess.Popen(args, env=env)
    checkpoint = out_dir / "checkpoint.pt"
    while proc.poll() is None and not checkpoint.exists():
        time.sleep(poll)
    if proc.poll() is not None:
        return None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return True


def step_time(
    cfg: dict, batch: int, data_dir: Path, partition: Path, warmup: int, timed: int, **where
) -> dict:
    """Seconds of one training step of ``cfg``'s family at ``batch`` images (the paper's):
    every client takes ``warmup`` + ``timed`` steps of a full batch (its images repeated up
    to the batch: the smoke holds a few) and the mean of each client's last ``timed`` is
    averaged over the clients; the device's peak memory (CUDA) against the meta-device
    estimate of the step, the algorithm's state and the data the job holds."""
    steps = warmup + timed
    cfg = {**cfg, "train": {**cfg["train"], "batch_size": batch, "rounds": 1,
                            "local_steps": steps}}  # fmt: skip
    job = load_job(cfg, data_dir, partition, **where)
    job.clients.train = [i.repeat(math.ceil(batch / len(i)))[:batch] for i in job.clients.train]
    cuda = job.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(job.device)
    clock = PhaseClock(job.device, keep=("step",))
    run_rounds(cfg, job.model, job.algorithm, job.train, job.test, job.clients, None,
               lambda _: None, clock=clock)  # fmt: skip
    clients = len(job.clients.train)
    each = clock.each["step"]
    if len(each) == clients * steps:  # one chunk a client, in turn
        chunks = [each[i : i + steps] for i in range(0, len(each), steps)]
        per = [sum(c[warmup:]) / timed for c in chunks]
    else:  # an objective skipped steps (EATA) or a server trains too: the last ones
        per = [sum(each[warmup:]) / max(len(each) - warmup, 1)]
    held = sum(t.nbytes for t in (job.train.images, job.test.images)) / 1e6
    classes = job.train.num_classes()
    run = {**cfg, "partition": {**cfg["partition"], "clients": clients}}
    estimate = step_estimate_mb(run, classes) + held
    return {
        "step_ms": 1e3 * sum(per) / len(per),
        "steps_timed": timed,
        "clients": clients,
        "batch": batch,
        "device": str(job.device),
        "device_name": torch.cuda.get_device_name(job.device) if cuda else "cpu",
        "peak_mb": torch.cuda.max_memory_allocated(job.device) / 1e6 if cuda else None,
        "estimate_mb": estimate,
    }
