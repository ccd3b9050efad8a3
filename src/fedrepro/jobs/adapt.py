"""Adaptation jobs: a finished training run's state in, the adapted clients' results out.

An adaptation reads the run's ``config.json`` and ``state.safetensors`` and writes only into
its own directory (``results/<scale>/adapt/<id>/``): ``config.json`` (the run, the resolved
adaptation and the engine config it ran), ``metrics.json`` and ``history.csv`` in the
training run's format, so items read either stage alike. A job (``adapt_runs``) adapts one
or several runs (the seeds of one configuration, the same adaptation) in turn, as a training
job trains its runs, and writes its record last.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from safetensors.torch import load_file

from fedrepro.atomic import write_json
from fedrepro.fl.tensors import put
from fedrepro.jobs.train import Job, discard, in_turn, load_job, run_header, write_results
from fedrepro.logs import Pace, job_log
from fedrepro.tta import adapt_method

ADAPT_FILES = ("metrics.json", "history.csv")


def adapt_runs(
    adapts: list[dict], data_dir: Path, record: Path | None = None, log=job_log, **where
) -> list[dict]:
    """Adapt each of ``adapts`` (``{"adapt", "run_dir", "partition", "out_dir"}``) in turn,
    then write the job's ``record`` (``fedrepro.jobs.train.in_turn``: a rerun after a kill
    keeps the finished adaptations and resumes the interrupted one)."""
    return in_turn(
        adapts,
        record,
        lambda a, pace: adapt_run(
            a["adapt"], a["run_dir"], data_dir, a["partition"], a["out_dir"], pace=pace, **where
        ),
        adapted,
        lambda out_dir: discard(out_dir, ADAPT_FILES),
        log,
        adapt_rounds,
    )


def adapt_rounds(member: dict) -> int:
    """The engine rounds of a member's adaptation (from its run's config, nothing loaded)."""
    run_cfg = json.loads((Path(member["run_dir"]) / "config.json").read_text())
    return int(
        adapt_method(member["adapt"]).run_config(run_cfg, member["adapt"])["train"]["rounds"]
    )


def adapted(member: dict) -> bool:
    """Whether the member's directory holds its finished adaptation (same run, same
    resolved adaptation)."""
    out_dir = Path(member["out_dir"])
    if not all((out_dir / f).exists() for f in ("config.json", *ADAPT_FILES)):
        return False
    source = json.loads((out_dir / "config.json").read_text())
    want = {"run": Path(member["run_dir"]).name,
            "adapt": adapt_method(member["adapt"]).resolve(member["adapt"])}  # fmt: skip
    return {k: source.get(k) for k in want} == want


def adapt_run(
    adapt: dict,
    run_dir: Path,
    data_dir: Path,
    partition: Path,
    out_dir: Path,
    pace: Pace | None = None,
    **where,
) -> dict:
    """Adapt (or resume adapting) the run in ``run_dir`` as ``adapt`` (``{"method", ...}``);
    ``where``: ``backbone``, ``device``, ``threads`` as ``prepare_adapt`` takes them, ``pace``
    the job's (``fedrepro.jobs.train.train_run``)."""
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    job, source = prepare_adapt(adapt, run_dir, data_dir, partition, **where)
    job_log(
        run_header(
            "adapt", out_dir.name, job.cfg, f"{source['adapt']['method']} of {source['run']}, "
        )
    )
    write_json(out_dir / "config.json", {**source, "engine": job.cfg})
    setup = time.perf_counter() - t0
    state = job.run(out_dir / "checkpoint.pt", pace=pace)
    return write_results(out_dir, job, state, t0, setup, **source)


def prepare_adapt(
    adapt: dict,
    run_dir: Path,
    data_dir: Path,
    partition: Path,
    backbone: Path | None = None,
    device: str = "auto",
    threads: int = 1,
) -> tuple[Job, dict]:
    """The engine job of an adaptation, its model holding the trained run's tensors (and only
    the method's trainable set left trainable), and the record of where it came from."""
    run_dir = Path(run_dir)
    run_cfg = json.loads((run_dir / "config.json").read_text())
    method = adapt_method(adapt)
    cfg = method.run_config(run_cfg, adapt)
    if run_cfg["model"].get("client_backbones"):
        raise ValueError(
            f"adapt ({method.name}): run {run_dir.name} has clients of different models "
            "(model.client_backbones); adapting them is not built yet"
        )
    saved = load_file(run_dir / "state.safetensors")
    if method.start == "global" and any(not k.startswith("global.") for k in saved):
        raise ValueError(
            f"adapt ({method.name}): run {run_dir.name} keeps client-local tensors "
            f"({run_cfg['algorithm']['name']}); {method.name} starts from a global model only"
        )
    job = load_job(cfg, data_dir, partition, backbone, device, threads)
    for prefix in ("global.", "client0.") if method.start == "client0" else ("global.",):
        start = {k.removeprefix(prefix): v for k, v in saved.items() if k.startswith(prefix)}
        put(job.model, {k: v.to(job.device) for k, v in start.items()})
    if method.start == "own":  # each client from the global tensors and its own local ones
        own: dict[int, dict] = {}
        for key, value in saved.items():
            if key.startswith("client"):
                k, name = key.removeprefix("client").split(".", 1)
                own.setdefault(int(k), {})[name] = value.to(job.device)
        job.start_local = own
    if method.trains is not None:
        keep = method.trains(job.model, job.algorithm)
        for name, p in job.model.named_parameters():
            p.requires_grad_(name in keep)
    return job, {"run": run_dir.name, "adapt": method.resolve(adapt)}
