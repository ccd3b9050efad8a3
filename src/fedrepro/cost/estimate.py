"""What the paper scale costs: GPU-hours per paper from counted FLOPs and the run table.

Every paper-scale run and adaptation of the plan contributes (training samples × FLOPs per
training step) + (evaluated samples × FLOPs per forward); an adaptation is counted as the
engine run it is. Sample counts come from the run's own partition and cohort, built by the
real partitioner on label arrays of the real split sizes (balanced classes; a domain
dataset gets its domains' sizes, one for all or one each): the registry's where it records
them, else the config's assumptions (``bench.cost.split_sizes``); FLOPs are counted on the meta
device (``fedrepro.cost.flops``), by class of operation. Hours: each class at the
arithmetic the run gives it (``fedrepro.arithmetic``: fp32, TF32 or bf16) on the paper
scale's ``resources.gpu`` at its MFU (or, where a GPU ran the paper-shape workloads, their
measured share of its peak), stated beside the result; the same model plans each job's Slurm
runtime (``fedrepro.cost.work``).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np

from fedrepro.arithmetic import CLASSES, DEFAULT_TF32, seconds, unit
from fedrepro.cost.flops import per_sample_flops
from fedrepro.cost.work import (
    counts_key,
    engine_run,
    flops_key,
    known_sizes,
    run_work,
    sample_flops,
)
from fedrepro.cost.work import hours as work_hours
from fedrepro.data.partitions.make import make_partition
from fedrepro.data.sources.registry import DATASETS
from fedrepro.experiments.plan import paper_plan
from fedrepro.fl.engine import in_cohort


def _labels(n: int, num_classes: int) -> np.ndarray:
    return np.arange(n) % num_classes


def _domain_sizes(spec, size: dict) -> list[tuple[int, int]]:
    """(train, test) images per domain: one size for every domain or one per domain."""
    per = size.get("domains")
    if per is None:
        return [(int(size["train"]), int(size["test"]))] * len(spec.domains)
    missing = sorted(set(spec.domains) - set(per))
    if missing:
        raise ValueError(f"bench.cost.split_sizes.{spec.name}.domains: missing {missing}")
    return [(int(per[d]["train"]), int(per[d]["test"])) for d in spec.domains]


def partition_counts(run: dict, sizes: dict) -> dict:
    """Training samples (the run's cohort) and the clients' evaluated samples under a global
    or split test (``own_test``: each client evaluating its own model on its own test), from
    the run's partition on balanced labels of the real split sizes; with ``cv`` each client's
    shares are pooled and one fold is its test."""
    spec = DATASETS[run["dataset"]]
    if run["dataset"] not in sizes:
        raise ValueError(
            f"bench.cost.split_sizes: no sizes for dataset {run['dataset']!r} (nor in the registry)"
        )
    size = sizes[run["dataset"]]
    kw = {}
    if spec.domains:
        per = _domain_sizes(spec, size)
        kw = {
            "train_domains": np.repeat(np.arange(len(per)), [n for n, _ in per]),
            "test_domains": np.repeat(np.arange(len(per)), [n for _, n in per]),
            "domain_names": list(spec.domains),
        }
        n_train, n_test = sum(n for n, _ in per), sum(n for _, n in per)
    else:
        n_train, n_test = int(size["train"]), int(size["test"])
    part = make_partition(run["partition"], _labels(n_train, spec.num_classes),
                          _labels(n_test, spec.num_classes), num_classes=spec.num_classes,
                          seed=int(run["partition"].get("seed", run["seed"])), **kw)  # fmt: skip
    cohort = run.get("cohort", "all")
    clients = [c for c in part["clients"] if in_cohort(c, cohort)]
    glob = part.get("test_mode") == "global"
    train = [len(c["train"]) for c in clients]
    test = [n_test if glob else len(c["test"]) for c in clients]
    if run.get("cv"):
        k = int(run["cv"]["folds"])
        pooled = [a + b for a, b in zip(train, test, strict=True)]
        test = [n // k for n in pooled]
        train = [n - t for n, t in zip(pooled, test, strict=True)]
    return {
        "clients": len(clients),
        "train": sum(train),
        "test": n_test,
        "own_test": sum(test),  # evaluated where each client evaluates its own model
        "transforms": any(c.get("transform") for c in clients),
    }


def run_flops(run: dict, sizes: dict, memo: dict) -> dict:
    """FLOPs of one paper-scale run: training and evaluation over all its rounds, in all and
    by class of operation (``fedrepro.cost.work.run_work``); ``memo`` gathers the per-sample
    FLOPs (a model's: each client backbone's in a run of different models) and sample counts
    by key, the table ``config/flops/<scale>.json`` holds."""
    flops, counts = memo.setdefault("flops", {}), memo.setdefault("counts", {})

    def counted(one: dict) -> dict:
        key = flops_key(one)
        if key not in flops:
            model, classes = one["model"], DATASETS[one["dataset"]].num_classes
            flops[key] = per_sample_flops(model["backbone"], classes, model.get("img_size"),
                                          model, one["algorithm"])  # fmt: skip
        return flops[key]

    ckey = counts_key(run)
    if ckey not in counts:
        counts[ckey] = partition_counts(run, sizes)
    return run_work(run, sample_flops(run, counted), counts[ckey], sizes)


def measured_rate(results: list[dict]) -> dict | None:
    """The model FLOP/s of the slowest paper-shape workload that ran on a GPU, if any, the
    arithmetic it ran at and the class of operation most of its FLOPs are (its kind of
    network)."""
    gpu = [r for r in results if "skipped" not in r and r["machine"].get("gpu")]
    if not gpu:
        return None
    slowest = min(gpu, key=lambda r: r["model_flops_per_s"])
    train = slowest["flops_per_sample"]["by_class"]["train"]
    return {"device": slowest["machine"]["gpu"], "flops_per_s": slowest["model_flops_per_s"],
            "precision": slowest.get("precision", "fp32"),
            "op_class": max(train, key=train.get)}  # fmt: skip


def estimate(repo: Path, cost_cfg: dict, measured: dict | None = None, memo: dict | None = None):
    """GPU-hours per paper and in total, each run at its arithmetic (``train.precision``,
    ``train.tf32``) on the paper scale's ``resources.gpu``, beside the same FLOPs all in bf16
    (the one rate the cost assumed before); ``measured`` = {"device", "flops_per_s",
    "precision", "op_class"} from a GPU: its share of that arithmetic's peak stands for its
    class of operation's there, the other shares stay the GPU's assumed ``mfu``."""
    plan = paper_plan(repo, cost_cfg.get("papers"))
    sizes = known_sizes(cost_cfg["split_sizes"])
    gpu = plan.scale_cfg["resources"]["gpu"]
    peaks = gpu["peak_flops_per_s"]
    mfu, device = copy.deepcopy(gpu["mfu"]), gpu["device"]
    how = f"assumed: {_shares(mfu)} of each dense peak"
    if measured:  # the workload's class of operation at its arithmetic; the rest assumed
        op_class, precision = measured["op_class"], measured["precision"]
        arithmetic = unit(op_class, precision, DEFAULT_TF32)
        rate = measured["flops_per_s"] / float(peaks[arithmetic])
        mfu = mfu if isinstance(mfu, dict) else _every(mfu)  # a copy already: the GPU's stays
        mfu[op_class][arithmetic] = rate
        device = measured["device"]
        how = (f"measured: {rate:.0%} of the {arithmetic} peak for {op_class}s; "
               f"the rest assumed: {_shares(mfu)}")  # fmt: skip
    memo = {} if memo is None else memo
    papers: dict[str, dict] = {}
    hours: dict[str, float] = {}

    def add(key: str, run: dict, counted: str) -> None:
        f = run_flops(run, sizes, memo)
        hours[key] = work_hours(f, run, gpu, mfu)
        p = papers.setdefault(run["paper"], {"runs": 0, "flops": 0.0, "gpu_hours": 0.0,
                                              "bf16_gpu_hours": 0.0, "by_model": {},
                                              "by_item": {}})  # fmt: skip
        p[counted] = p.get(counted, 0) + 1
        p["flops"] += f["flops"]
        p["gpu_hours"] += hours[key]
        p["bf16_gpu_hours"] += seconds(f["by_class"], "bf16", DEFAULT_TF32, peaks, mfu) / 3600
        m = run["model"]
        label = f"{m['backbone']} {m.get('tuning', 'full')} @{m.get('img_size')}"
        p["by_model"][label] = p["by_model"].get(label, 0.0) + hours[key]

    for run_id, run in plan.runs.items():
        add(run_id, run, "runs")
    for aid in plan.adapts:  # each adaptation is an engine run of its own
        add(aid, {**engine_run(plan, aid), "paper": plan.runs[plan.adapts[aid]["run"]]["paper"]},
            "adapts")  # fmt: skip
    for key, item in plan.items.items():
        paper, name = key.split("/")
        if paper in papers and item.get("runs"):  # a run shared by items counts in each
            papers[paper]["by_item"][name] = sum(
                hours[r["id"]] + (hours[r["run"]] if r["stage"] == "adapt" else 0.0)
                for r in item["runs"]
            )
    total = sum(p["gpu_hours"] for p in papers.values())
    return {
        "device": device,
        "throughput": how,
        "peak_flops_per_s": peaks,
        "mfu": mfu,
        "papers": papers,
        "total_gpu_hours": total,
        "total_bf16_gpu_hours": sum(p["bf16_gpu_hours"] for p in papers.values()),
        "goal_gpu_hours": float(cost_cfg["goal_hours"]),
        "papers_in_plan": sorted(papers),
        "within_goal": total <= float(cost_cfg["goal_hours"]) and math.isfinite(total),
    }


def _every(mfu: float) -> dict:
    """One share for every class of operation and arithmetic, as a table."""
    return {c: dict.fromkeys(("fp32", "tf32", "bf16"), float(mfu)) for c in CLASSES}


def _shares(mfu: float | dict) -> str:
    """The shares of each peak, as the cost page says them."""
    table = mfu if isinstance(mfu, dict) else _every(mfu)
    return "; ".join(f"{c} " + ", ".join(f"{a} {v:.0%}" for a, v in table[c].items())
                     for c in table)  # fmt: skip


def committed_memo(table: Path) -> dict:
    """A memo for ``estimate`` that starts from a committed work table (``work_table``'s
    output): its per-sample FLOPs and sample counts are taken, not counted again on the meta
    device; an entry the table lacks is counted. Empty without the file."""
    if not Path(table).exists():
        return {}
    doc = json.loads(Path(table).read_text())
    return {"flops": dict(doc.get("flops", {})), "counts": dict(doc.get("counts", {}))}


def work_table(memo: dict) -> dict:
    """The per-sample FLOPs and sample counts ``estimate`` gathered: the table the workflow
    plans training and adaptation runtimes with (``fedrepro.cost.work.WorkTable``)."""
    return {"flops": dict(sorted(memo["flops"].items())),
            "counts": dict(sorted(memo["counts"].items()))}  # fmt: skip
