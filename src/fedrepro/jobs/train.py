"""Federated training runs: config.json in, metrics.json / history.csv / state out.

A training job (``train_runs``) trains one or several runs (the seeds of one configuration)
one after the other in one process; each run is exactly what it would be alone (its own
directory, checkpoint, seeds and metrics: tests/jobs/test_train_runs.py), and the job's
record is written last.
"""

from __future__ import annotations

import csv
import io
import json
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fedrepro.algorithms import make_algorithm
from fedrepro.arithmetic import of_run
from fedrepro.atomic import atomic_write, save_tensors, write_json
from fedrepro.data.transforms.styles import stylize_split
from fedrepro.device import gpu_paths
from fedrepro.discipline import DisciplineClock
from fedrepro.fl.algorithm import Algorithm
from fedrepro.fl.build import (
    build_models,
    held_out,
    load_train_test,
    pick_device,
    pooled,
    public_data,
    set_tf32,
    shifted_test,
)
from fedrepro.fl.data import DeviceData
from fedrepro.fl.engine import Clients, RunState, run_rounds
from fedrepro.fl.timing import NULL_CLOCK
from fedrepro.geometry import silhouette_vs_shuffled
from fedrepro.logs import Pace, duration, job_log
from fedrepro.memory import peak_gpu_mb, peak_rss_mb
from fedrepro.models.tuning import new_at_inference

HISTORY_COLUMNS = [
    "round",
    "acc",
    "acc_mean",
    "loss",
    "lr",
    "clients",
    "up_bytes",
    "down_bytes",
    "seconds",
    "diverged",
    "excluded",
]


def train_run(
    cfg: dict,
    data_dir: Path,
    partition: Path,
    out_dir: Path,
    backbone: Path | None = None,
    device: str = "auto",
    threads: int = 1,
    pace: Pace | None = None,
) -> dict:
    """Train (or resume) the run described by `cfg`; write its result files atomically.

    The resolved config is written first, so a run directory always says what it holds; the
    log's first line of the run names it (``run_header``). ``pace``: the job's, over the
    rounds of all its runs (default: this run's own).
    """
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    job_log(run_header("run", out_dir.name, cfg))
    write_json(out_dir / "config.json", cfg)
    job = load_job(cfg, data_dir, partition, backbone, device, threads)
    setup = time.perf_counter() - t0
    state = job.run(out_dir / "checkpoint.pt", pace=pace)
    tensors = {f"global.{k}": v for k, v in state.shared.items()}
    for k, local in state.local.items():
        tensors.update({f"client{k}.{n}": v for n, v in local.items()})
    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    save_tensors(out_dir / "state.safetensors", tensors)
    return write_results(out_dir, job, state, t0, setup)


RESULT_FILES = ("metrics.json", "history.csv", "state.safetensors")


def run_header(kind: str, run_id: str, cfg: dict, extra: str = "") -> str:
    """The line that opens a run in its job's log: ``run <id>: algorithm fedavg, dataset
    cifar10, partition <id>, seed 0, 50 rounds`` (an adaptation: ``adapt <id>: ...``)."""
    setting = (
        f"algorithm {cfg['algorithm']['name']}, dataset {cfg.get('dataset', '?')}, "
        f"partition {cfg.get('partition_id', '?')}, seed {cfg['seed']}, "
        f"{int(cfg['train']['rounds'])} rounds"
    )
    return f"{kind} {run_id}: {extra}{setting}"


def train_runs(
    runs: list[dict], data_dir: Path, record: Path | None = None, log=job_log, **where
) -> list[dict]:
    """Train ``runs`` (``{"config", "partition", "out_dir"}`` each) in turn (``in_turn``).
    ``where``: ``backbone``, ``device``, ``threads`` as ``train_run`` takes them."""
    return in_turn(
        runs,
        record,
        lambda r, pace: train_run(
            r["config"], data_dir, r["partition"], r["out_dir"], pace=pace, **where
        ),
        lambda r: finished(Path(r["out_dir"]), r["config"]),
        lambda out_dir: discard(out_dir, RESULT_FILES),
        log,
        lambda r: int(r["config"]["train"]["rounds"]),
    )


def in_turn(members: list[dict], record: Path | None, work, done, fresh, log, rounds) -> list[dict]:
    """Run a job's members (training runs, adaptations: ``{"out_dir", ...}`` each) one after
    the other, ``work(member, pace)`` returning its metrics, then write the job's ``record``
    (what each member took; the file the workflow tracks). ``pace`` (``fedrepro.logs.Pace``)
    counts the job's engine rounds, ``rounds(member)`` each member's, so a round's line gives
    the time left of the whole job; the last line sums the job up.

    While the job works, ``<record>.partial`` names its members. A job that finds one was
    interrupted: it keeps the members that are ``done``, and the interrupted one resumes from
    its checkpoint. Without one (a first attempt, or a rerun the workflow asked for: changed
    inputs, ``-R``) every member starts anew (``fresh(out_dir)`` clears its directory)."""
    t0 = time.perf_counter()
    partial = None if record is None else Path(f"{record}.partial")
    resuming = partial is not None and partial.exists()
    if partial is not None:
        write_json(partial, {"runs": [Path(m["out_dir"]).name for m in members]})
    record_rows = []
    pace = Pace(sum(rounds(m) for m in members))
    for i, member in enumerate(members, 1):
        out_dir = Path(member["out_dir"])
        kept = resuming and done(member)
        if kept:
            metrics = json.loads((out_dir / "metrics.json").read_text())
            pace.skip(rounds(member))
        else:
            if not resuming:
                fresh(out_dir)
            metrics = work(member, pace)
        log(f"{i}/{len(members)} {out_dir.name}: {'kept' if kept else 'ran'}, "
            f"final acc {metrics['final_acc']:.2f}, {metrics['wall_seconds']:.1f}s")  # fmt: skip
        record_rows.append(
            {"run": out_dir.name, "kept": kept, "wall_seconds": metrics["wall_seconds"]}
        )
    wall = time.perf_counter() - t0
    ran = sum(not row["kept"] for row in record_rows)
    log(f"job done: {len(members)} runs ({ran} ran, {len(members) - ran} kept), "
        f"{pace.done:.0f} rounds in {duration(wall)}")  # fmt: skip
    if record is not None:
        write_json(record, {"runs": record_rows, "wall_seconds": wall})
        partial.unlink()
    return record_rows


def finished(out_dir: Path, cfg: dict) -> bool:
    """Whether ``out_dir`` holds a finished run of exactly ``cfg``."""
    if not all((out_dir / f).exists() for f in ("config.json", *RESULT_FILES)):
        return False
    return json.loads((out_dir / "config.json").read_text()) == cfg


def discard(out_dir: Path, results: tuple[str, ...]) -> None:
    """Remove a member's ``results`` and checkpoint, so that it starts from nothing."""
    for name in (*results, "checkpoint.pt"):
        (Path(out_dir) / name).unlink(missing_ok=True)


@dataclass
class Job:
    """A run's model, algorithm, data and clients on the device, ready for the engine."""

    cfg: dict
    model: torch.nn.Module | list[torch.nn.Module]  # a list: one per architecture group
    algorithm: Algorithm | list[Algorithm]  # ... and each group's algorithm
    train: DeviceData
    test: DeviceData
    clients: Clients
    device: torch.device
    start_local: dict[int, dict] | None = None  # each client's own starting local tensors

    def run(self, checkpoint: Path | None, log=job_log, pace: Pace | None = None) -> RunState:
        """The engine's rounds (``pace``: the job's, as ``run_rounds`` takes it); under
        ``FEDREPRO_DISCIPLINE`` (``fedrepro.discipline``) on the GPU's paths with every phase
        checked, the report named for the checkpoint's folder (the run's id)."""
        checked = DisciplineClock.from_env()
        with gpu_paths() if checked else nullcontext():
            state = run_rounds(
                self.cfg,
                self.model,
                self.algorithm,
                self.train,
                self.test,
                self.clients,
                checkpoint,
                log,
                clock=checked or NULL_CLOCK,
                start_local=self.start_local,
                pace=pace,
            )
        if checked is not None and checkpoint is not None:
            checked.write_for(Path(checkpoint).parent.name)
        return state


def load_job(
    cfg: dict, data_dir: Path, partition: Path, backbone: Path | None, device: str, threads: int
) -> Job:
    """Everything an engine run of ``cfg`` needs (training and adaptation alike)."""
    dev = pick_device(device, threads, bool(cfg["train"].get("deterministic", True)))
    set_tf32(of_run(cfg)[1])
    img_size = cfg["model"].get("img_size")
    train_split, train, test = load_train_test(cfg, data_dir, dev, img_size)
    part = json.loads(Path(partition).read_text())
    train.images = stylize_split(train.images, part)  # FedIns's γ; unchanged without styles
    if part.get("test_mode") == "train_holdout":  # the test lists index the training images
        if cfg.get("cv") is not None or cfg.get("test_shift") is not None:
            raise ValueError("partition test_mode train_holdout: not with cv or test_shift")
        test = held_out(train, test)
    if cfg.get("test_shift") is not None:
        if cfg.get("cv") is not None:
            raise ValueError("test_shift: not with cv (folds cut the pooled unshifted images)")
        test, part = shifted_test(
            cfg["test_shift"], int(cfg["seed"]), test, part, train.labels, data_dir
        )
    num_train, num_test = len(train.labels), len(test.labels)
    clients = Clients.from_partition(
        part,
        num_test,
        dev,
        cfg.get("cohort", "all"),
        cfg.get("cv"),
        num_train,
        images=cfg.get("images"),
        test_images=cfg.get("test_images"),
    )
    classes, seed = len(train_split.classes), cfg["seed"]
    models, clients.architecture = build_models(
        cfg["model"], classes, seed, backbone, dev, len(clients)
    )
    algorithms = [make_algorithm(cfg["algorithm"]) for _ in models]
    uses = algorithms[0].uses_public or cfg.get("public") is not None
    public = public_data(cfg, data_dir, test) if uses else None
    for m, a in zip(models, algorithms, strict=True):
        a.prepare_model(m)
        if public is not None:
            a.use_public(public)
    if cfg.get("cv") is not None:
        train, test = pooled(train, test)  # folds cut each client's pooled images
    if len(models) == 1:
        return Job(cfg, models[0], algorithms[0], train, test, clients, dev)
    return Job(cfg, models, algorithms, train, test, clients, dev)


def write_results(
    out_dir: Path, job: Job, state: RunState, started: float, setup: float, **extra
) -> dict:
    """history.csv, then metrics.json (the file that marks the job finished); the checkpoint
    goes last. ``started``: ``time.perf_counter()`` when the run's work began, ``setup`` the
    seconds before round 1; the run's seconds end after the summaries are computed."""
    clustering = local_clustering(state.local, job.clients.groups)
    seconds = time.perf_counter() - started
    metrics = summarize(job.cfg, job.model, job.algorithm, state, seconds, job.clients)
    rounds = sum(r["seconds"] for r in state.history)
    evaluate = sum(r.get("eval_seconds", 0.0) for r in state.history)
    metrics["seconds"] = {  # where the time went (bench budget); a resumed run adds its parts
        "setup": setup,
        "train": rounds - evaluate,
        "evaluate": evaluate,
        "write": max(seconds - setup - rounds, 0.0),
    }
    metrics["run_id"] = out_dir.name
    metrics["peak_rss_mb"] = peak_rss_mb()  # what to request per job (Slurm mem_mb)
    metrics["peak_gpu_mb"] = peak_gpu_mb(job.device)
    metrics.update(extra)
    if clustering is not None:
        metrics["local_clustering"] = clustering
    atomic_write(out_dir / "history.csv", lambda p: Path(p).write_text(history_csv(state)))
    write_json(out_dir / "metrics.json", metrics)
    (out_dir / "checkpoint.pt").unlink(missing_ok=True)
    return metrics


def local_clustering(local: dict, groups: list) -> dict | None:
    """How the clients' local tensors (FedPCE's embeddings, FedBN's norm affine) cluster by
    the clients' groups (FedPCE's degradations): the silhouette of the groups, the mean under
    shuffled groups, and the gain over it. None without local tensors, or when a group has
    fewer than two clients."""
    if not local or not any(g is not None for g in groups):
        return None
    clients = sorted(local)
    labels = [groups[k] for k in clients]
    if min(labels.count(g) for g in set(labels)) < 2 or len(set(labels)) < 2:
        return None
    rows = [torch.cat([t.detach().float().flatten() for _, t in sorted(local[k].items())])
            for k in clients]  # fmt: skip
    x = np.stack([row.cpu().numpy() for row in rows])
    real, chance = silhouette_vs_shuffled(x, labels)
    return {"silhouette": real, "shuffled": chance, "gain": real - chance}


def history_csv(state: RunState) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, HISTORY_COLUMNS, extrasaction="ignore", restval="")
    writer.writeheader()
    writer.writerows(state.history)
    return buf.getvalue()


def summarize(
    cfg: dict, model, algorithm, state: RunState, seconds: float, clients: Clients | None = None
) -> dict:
    """The run's headline numbers, structural counts included (computed, never typed in).
    Clients of different models (``model`` and ``algorithm`` lists, one per group): the
    parameter counts are summed over ``clients``, each on its own model (FedHPL Table 2)."""
    rows = state.history
    evaluated = [r for r in rows if "acc" in r]
    last = evaluated[-1]
    best = max(evaluated, key=lambda r: r["acc"])
    shared_numel = sum(t.numel() for t in state.shared.values())
    counts = parameter_counts(model, algorithm, clients)
    up = sum(r["up_bytes"] for r in rows)
    down = sum(r["down_bytes"] for r in rows)
    participations = sum(r["clients"] for r in rows) or 1
    return {
        "scale": cfg["scale"],
        "final_acc": last["acc"],
        "final_acc_mean": last["acc_mean"],
        "final_acc_per_client": last["acc_per_client"],
        # per class, mean over clients (FedHPL Fig. 5); absent in runs evaluated before it
        **({"final_acc_per_class": last["acc_per_class"]} if "acc_per_class" in last else {}),
        # FedHPL's lowest and highest client (App. C.3)
        "final_acc_min": min(last["acc_per_client"], default=last["acc"]),
        "final_acc_max": max(last["acc_per_client"], default=last["acc"]),
        "final_loss": last["loss"],
        "best_acc": best["acc"],
        "best_round": best["round"],
        # per client group at the best evaluation, pooled and the mean over the group's clients
        **{f"best_{k}": best[k] for k in ("acc_per_group", "acc_per_group_mean") if k in best},
        # FedIns's "Best Acc": the best round of the mean over clients (DomainNet: per domain)
        "best_acc_mean": max(r["acc_mean"] for r in evaluated),
        "rounds": len(rows),
        "diverged": any(r["diverged"] for r in rows),
        "diverged_rounds": [r["round"] for r in rows if r["diverged"]],
        "params": {
            "total": counts["total"],
            "trainable": counts["trainable"],
            "communicated": shared_numel,
            "new_at_inference": counts["new_at_inference"],
        },
        "comm": {
            "up_bytes_per_client_round": up / participations,
            "down_bytes_per_client_round": down / participations,
            "total_bytes": up + down,
            # scalars all clients sent in the first and in the last round (FedHPL Table 10)
            "up_scalars_first_round": rows[0].get("up_scalars"),
            "up_scalars_last_round": rows[-1].get("up_scalars"),
        },
        "wall_seconds": seconds,
    }


def parameter_counts(model, algorithm, clients: Clients | None = None) -> dict[str, int]:
    """``total``, ``trainable`` and ``new_at_inference`` scalars of the run's model, or (lists,
    one per architecture group) summed over its clients, each on its own group's model."""
    if not isinstance(model, list):
        named = dict(model.named_parameters())
        return {
            "total": sum(p.numel() for p in named.values()),
            "trainable": sum(named[k].numel() for k in algorithm.trainable),
            "new_at_inference": new_at_inference(model),
        }
    each = [parameter_counts(model[g], algorithm[g]) for g in clients.model_of()]
    return {q: sum(c[q] for c in each) for q in ("total", "trainable", "new_at_inference")}
