"""What any targets cost before they run: the training and adaptation jobs they need, their
GPU-hours and Slurm requests, the longest job against the partitions' limits, the data to
download (or stage by hand) and the weights to fetch, per paper and per item.

Read from the plan and the committed work table alone (``fedrepro.cost.work``), as the
workflow's own requests are, so nothing is submitted and torch is not imported. GPU-hours
are each job's work on the scale's ``resources.gpu`` at its runs' arithmetic, without the
request's ``margin``; beside them the same work with TF32 for every matmul and convolution
(``train.tf32: all``) and in bf16 autocast (``train.precision: bf16``), the user's biggest
levers.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from fedrepro.cost.work import (
    WorkTable,
    engine_run,
    floor_hours,
    hours,
    job_resources,
    partition_limit,
    resumptions,
    step_family,
)
from fedrepro.data.sources.registry import get_dataset, raw_sources
from fedrepro.experiments.config import ConfigError
from fedrepro.experiments.plan import Plan, public_dataset, shift_dataset

# the arithmetic a cost is given at beside the runs' own: (label, train keys over the run's)
LEVERS = (("tf32 all", {"tf32": "all"}), ("bf16", {"precision": "bf16"}))


def target_items(plan: Plan, targets: list[str]) -> list[str]:
    """The items (``<paper>/<item>``) a list of Snakemake targets builds: ``all``, a paper, or
    ``<paper>_<item>``; anything else is refused in one line naming the allowed forms."""
    chosen: list[str] = []
    for target in targets or ["all"]:
        if target == "all":
            chosen += list(plan.items)
        elif target in plan.papers:
            chosen += [f"{target}/{i}" for i in plan.papers[target]]
        else:
            paper, _, item = target.partition("_")
            if f"{paper}/{item}" not in plan.items:
                papers = ", ".join(sorted(plan.papers))
                raise ConfigError(
                    f"unknown target {target!r} (allowed: all, a paper ({papers}), or "
                    "<paper>_<item>: snakemake --list-target-rules)"
                )
            chosen.append(f"{paper}/{item}")
    return list(dict.fromkeys(chosen))


def _jobs(plan: Plan, items: list[str]) -> dict[str, dict[tuple[str, str], None]]:
    """Per item, the (stage, job) pairs it needs: its runs' training jobs and its
    adaptations' jobs (ordered, without repeats)."""
    out = {}
    for key in items:
        jobs: dict[tuple[str, str], None] = {}
        for entry in plan.items[key]["runs"]:
            run = entry.get("run", entry["id"])
            jobs[("train", plan.job_of[run])] = None
            if entry["stage"] == "adapt":
                jobs[("adapt", plan.adapt_job_of[entry["id"]])] = None
        out[key] = jobs
    return out


def _members(plan: Plan, stage: str, job: str) -> list[dict]:
    if stage == "train":
        return [plan.runs[r] for r in plan.train_jobs[job]]
    return [engine_run(plan, a) for a in plan.adapt_jobs[job]]


def _with_train(run: dict, over: dict) -> dict:
    return {**run, "train": {**run["train"], **over}}


def job_cost(plan: Plan, table: WorkTable, stage: str, job: str, limit: int | None = None):
    """One job's GPU-hours (at its arithmetic, and at each lever's), the time it needs and
    its Slurm request under the partition ``limit``: the attempts it takes, each resuming
    from the last checkpoint (``fedrepro.cost.work.job_resources``)."""
    gpu = plan.scale_cfg["resources"]["gpu"]
    members = _members(plan, stage, job)
    works = [table.work(run) for run in members]
    cost = {"gpu_hours": sum(hours(w, r, gpu) for w, r in zip(works, members, strict=True))}
    for label, over in LEVERS:
        cost[label] = sum(
            hours(w, _with_train(r, over), gpu) for w, r in zip(works, members, strict=True)
        )
    # at the floor: its kernels' launches take longer than its FLOPs (fedrepro.cost.work.hours)
    floor = sum(floor_hours(w, gpu) for w in works)
    need = job_resources(plan, table, stage, job)
    request = job_resources(plan, table, stage, job, limit=limit)
    attempts = resumptions(need["runtime"], limit)
    return {**cost, "floor_bound": floor >= cost["gpu_hours"] > 0,
            "runtime_min": need["runtime"], "request_min": request["runtime"],
            "attempts": attempts, "mem_mb": request["mem_mb"]}  # fmt: skip


def downloads(plan: Plan, runs: list[dict]) -> list[dict]:
    """The raw files the runs' datasets are built from: bytes to download, or to stage by
    hand (no public URL), per source dataset."""
    names: dict[str, None] = {}
    for run in runs:
        used = [run["dataset"], shift_dataset(run.get("test_shift")), public_dataset(run)]
        for backbone in (run["model"]["backbone"], *run["model"].get("client_backbones", [])):
            pre = plan.backbones.get(backbone, {})
            used.append(pre.get("dataset") if pre.get("mode") == "pretrain" else None)
        for name in filter(None, used):
            names.update(dict.fromkeys(raw_sources(name)))
    rows = []
    for name in sorted(names):
        remote = get_dataset(name).remote
        fetched = [f for f in remote if f.url]
        rows.append({
            "dataset": name,
            "files": len(remote),
            "download_bytes": sum(f.size or 0 for f in fetched),
            "unsized": sum(1 for f in fetched if f.size is None),
            "stage_by_hand": [f.filename for f in remote if not f.url],
        })  # fmt: skip
    return rows


def target_cost(
    plan: Plan, table: WorkTable, targets: list[str], profile: Path, gpus: int = 1
) -> dict:
    """The cost of ``targets``: totals (each job once), per paper, per item (a job shared by
    items counts in each), the longest job against the limit of the partitions that fit a
    job of ``gpus`` GPUs (``profile``, the Slurm profile's partitions file), downloads and
    weights."""
    items = target_items(plan, targets)
    needed = _jobs(plan, items)
    limit = partition_limit(profile, gpus)
    costs = {job: job_cost(plan, table, *job, limit) for jobs in needed.values() for job in jobs}
    levers = ["gpu_hours", *(label for label, _ in LEVERS)]

    def total(jobs) -> dict:
        return {
            "jobs": len(jobs),
            **{k: sum(costs[j][k] for j in jobs) for k in levers},
            "request_hours": sum(costs[j]["request_min"] * costs[j]["attempts"] for j in jobs) / 60,
            "floor_jobs": sum(1 for j in jobs if costs[j]["floor_bound"]),
        }

    per_paper: dict[str, dict] = {}
    for key, jobs in needed.items():
        per_paper.setdefault(key.split("/")[0], {}).update(jobs)
    longest = max(costs, key=lambda j: costs[j]["runtime_min"]) if costs else None
    runs = [plan.runs[r] for stage, job in costs if stage == "train" for r in plan.train_jobs[job]]
    fetched = sorted({run["model"]["backbone"] for run in runs} & {
        name for name, b in plan.backbones.items() if b["mode"] == "fetch"
    })  # fmt: skip
    return {
        "scale": plan.scale,
        "targets": list(targets or ["all"]),
        "device": plan.scale_cfg["resources"]["gpu"]["device"],
        "total": total(costs),
        "papers": {p: total(jobs) for p, jobs in per_paper.items()},
        "items": {k: total(jobs) for k, jobs in needed.items()},
        "longest": None
        if longest is None
        else {
            "stage": longest[0],
            "job": longest[1],
            "runtime_min": costs[longest]["runtime_min"],
            "limit_min": limit,
            "over_limit": limit is not None and costs[longest]["runtime_min"] > limit,
            "attempts": costs[longest]["attempts"],
        },  # fmt: skip
        "over_limit_jobs": sum(1 for c in costs.values() if c["attempts"] > 1),
        "calibration": {
            "file": os.path.relpath(table.calibration) if table.calibration else None,
            "families": len(table.steps),
            "runs": sum(1 for r in runs if step_family(r) in table.steps),
        },
        "downloads": downloads(plan, runs),
        "weights": fetched,
    }


def _h(value: float) -> str:
    return f"{value:,.1f}" if math.isfinite(value) else "—"


def _calibrated(c: dict) -> str:
    if not c["families"]:
        return (f"Step times: modelled (no measured table at `{c['file']}`: "
                "`snakemake calibrate` writes one on your GPUs).")  # fmt: skip
    return (f"Step times: measured for {c['families']} run families (`{c['file']}`), "
            f"used by {c['runs']:,} of the runs' training steps; the rest modelled.")  # fmt: skip


def render(cost: dict) -> str:
    """The cost as Markdown: totals, per paper, per item, the longest job, downloads."""
    head = ("| | jobs | at their floor | GPU-hours | tf32 all | bf16 | Slurm request (h) |\n"
            + "|---|" + "---:|" * 6)  # fmt: skip

    def row(name: str, t: dict) -> str:
        return (f"| {name} | {t['jobs']:,} | {t['floor_jobs']:,} | {_h(t['gpu_hours'])} | "
                f"{_h(t['tf32 all'])} | {_h(t['bf16'])} | {_h(t['request_hours'])} |")  # fmt: skip

    lines = [
        f"# Cost of {' '.join(cost['targets'])} at {cost['scale']} scale",
        "",
        f"GPU-hours on {cost['device']} from the work model (FLOPs at the assumed utilisation, "
        "or where longer the kernels' launches: the jobs at their floor; no margin), at the "
        "runs' own arithmetic and with TF32 for every matmul and convolution or bf16 "
        "autocast; the Slurm request is what the jobs ask (the margin and each job's minimum "
        "included). Estimates, not measurements.",
        "",
        _calibrated(cost["calibration"]),
        "",
        head,
        row("**total**", cost["total"]),
        *(row(p, t) for p, t in cost["papers"].items()),
        "",
        "Per item (a job shared by items counts in each):",
        "",
        head,
        *(row(k, t) for k, t in cost["items"].items()),
        "",
    ]
    longest = cost["longest"]
    if longest:
        limit = longest["limit_min"]
        against = "no partition limit set"
        if limit:
            how = "within it"
            if longest["attempts"] > 1:
                how = (f"{longest['attempts']} attempts of {limit:,} min, each resuming from "
                       "the last checkpoint")  # fmt: skip
            against = (
                f"the partitions' limit {limit:,} min: {how}; "
                f"{cost['over_limit_jobs']} jobs longer than the limit"
            )
        lines += [f"Longest job: {longest['stage']} {longest['job']}, "
                  f"{longest['runtime_min']:,} min needed ({against}).", ""]  # fmt: skip
    lines += ["| data | files | to download | stage by hand |", "|---|---:|---:|---|"]
    for d in cost["downloads"]:
        size = f"{d['download_bytes'] / 2**30:,.2f} GiB" + (" +?" if d["unsized"] else "")
        lines.append(f"| {d['dataset']} | {d['files']} | {size} | "
                     f"{', '.join(d['stage_by_hand']) or '—'} |")  # fmt: skip
    lines += ["", f"Weights to fetch: {', '.join(cost['weights']) or 'none'}.", ""]
    return "\n".join(lines)
