"""What the paper scale costs: GPU-hours per paper from counted FLOPs and the run table.

Every paper-scale run and adaptation of the plan contributes (training samples × FLOPs per
training step) + (evaluated samples × FLOPs per forward); an adaptation is counted as the
engine run it is. Sample counts come from the run's own partition and cohort, built by the
real partitioner on label arrays of the real split sizes (balanced classes; a domain
dataset gets its domains' sizes, one for all or one each): the registry's where it records
them, else the config's assumptions (``bench.cost.split_sizes``); FLOPs are counted on the meta
device (``fedrepro.bench.flops``). Hours follow from a throughput: measured on a GPU when
one ran the benchmark, otherwise an assumed peak × MFU, stated beside the result.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from fedrepro.bench.flops import per_sample_flops
from fedrepro.data.partition import make_partition
from fedrepro.data.registry import DATASETS, split_sizes
from fedrepro.experiments.plan import paper_plan
from fedrepro.fl.engine import in_cohort
from fedrepro.tta import adapt_method


def known_sizes(assumed: dict) -> dict:
    """Images per split of every dataset: the registry's published counts
    (``fedrepro.data.registry.split_sizes``), and ``assumed`` (``bench.cost.split_sizes``) for
    those the registry does not record. A composite's domains are its components: the
    registry's counts where it records them, the assumptions for the rest. A dataset or a
    composite's domain given by both is refused (one source each)."""
    sizes = dict(assumed)
    twice = []
    for name, spec in DATASETS.items():
        if spec.components:
            given = assumed.get(name, {}).get("domains", {})
            recorded = {c: s for c in spec.components if (s := split_sizes(c)) is not None}
            twice += [f"{name}.domains.{c}" for c in sorted(set(given) & set(recorded))]
            if set(given) | set(recorded) >= set(spec.components):
                sizes[name] = {"domains": {**given, **recorded}}
        elif (recorded := split_sizes(name)) is not None:
            twice += [name] if name in assumed else []
            sizes[name] = recorded
    if twice:
        raise ValueError(
            f"bench.cost.split_sizes: {twice} recorded in the data registry already; remove them"
        )
    return sizes


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
    """Training samples (the run's cohort) and each client's evaluated samples under a
    global or split test, from the run's partition on balanced labels of the real split
    sizes; with ``cv`` each client's shares are pooled and one fold is its test."""
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
        "per_client_test": test,
        "transforms": any(c.get("transform") for c in clients),
    }


def run_flops(run: dict, sizes: dict, memo: dict) -> dict[str, float]:
    """FLOPs of one paper-scale run: training and evaluation over all its rounds."""
    model, t = run["model"], run["train"]
    num_classes = DATASETS[run["dataset"]].num_classes
    key = json.dumps([model, run["algorithm"], num_classes], sort_keys=True)
    if key not in memo:
        memo[key] = per_sample_flops(model["backbone"], num_classes, model.get("img_size"),
                                     model, run["algorithm"])  # fmt: skip
    pkey = json.dumps([run["dataset"], run["partition"], run["seed"], run.get("cohort"),
                       run.get("cv")], sort_keys=True)  # fmt: skip
    if pkey not in memo:
        memo[pkey] = partition_counts(run, sizes)
    flops, counts = memo[key], memo[pkey]
    own_models = flops["personalized"] or counts["transforms"]
    evaluated = sum(counts["per_client_test"]) if own_models else counts["test"]
    rounds = int(t["rounds"])
    evals = len({*range(int(run.get("eval_every", 1)), rounds + 1, int(run.get("eval_every", 1))),
                 rounds})  # fmt: skip
    if t.get("local_steps"):  # a fixed number of batches per client and round (FedPCE)
        per_round = counts["clients"] * int(t["local_steps"]) * int(t["batch_size"])
    else:
        per_round = int(t["local_epochs"]) * counts["train"]
    train = rounds * float(t.get("fraction", 1.0)) * per_round
    return {
        "train_samples": train,
        "eval_samples": evals * evaluated,
        "flops": train * flops["train"] + evals * evaluated * flops["eval"],
    }


def measured_rate(results: list[dict]) -> dict | None:
    """The model FLOP/s of the slowest paper-shape workload that ran on a GPU, if any."""
    gpu = [r for r in results if "skipped" not in r and r["machine"].get("gpu")]
    if not gpu:
        return None
    slowest = min(gpu, key=lambda r: r["model_flops_per_s"])
    return {"device": slowest["machine"]["gpu"], "flops_per_s": slowest["model_flops_per_s"]}


def estimate(repo: Path, cost_cfg: dict, measured: dict | None = None) -> dict:
    """GPU-hours per paper and in total; ``measured`` = {"device", "flops_per_s"} from a GPU."""
    plan = paper_plan(repo, cost_cfg.get("papers"))
    sizes = known_sizes(cost_cfg["split_sizes"])
    if measured:
        rate, device, how = measured["flops_per_s"], measured["device"], "measured"
    else:
        a = cost_cfg["assumed"]
        rate, device = float(a["peak_flops_per_s"]) * float(a["mfu"]), a["device"]
        how = f"assumed: {a['peak_flops_per_s']:.3g} FLOP/s peak × {a['mfu']:.0%} MFU"
    memo: dict = {}
    papers: dict[str, dict] = {}
    hours: dict[str, float] = {}
    for run_id, run in plan.runs.items():
        f = run_flops(run, sizes, memo)
        hours[run_id] = f["flops"] / rate / 3600
        p = papers.setdefault(run["paper"], {"runs": 0, "flops": 0.0, "by_model": {},
                                              "by_item": {}})  # fmt: skip
        p["runs"] += 1
        p["flops"] += f["flops"]
        m = run["model"]
        label = f"{m['backbone']} {m.get('tuning', 'full')} @{m.get('img_size')}"
        p["by_model"][label] = p["by_model"].get(label, 0.0) + hours[run_id]
    for aid, entry in plan.adapts.items():  # each adaptation is an engine run of its own
        run = plan.runs[entry["run"]]
        f = run_flops(adapt_method(entry["adapt"]).run_config(run, entry["adapt"]), sizes, memo)
        hours[aid] = f["flops"] / rate / 3600
        papers[run["paper"]]["adapts"] = papers[run["paper"]].get("adapts", 0) + 1
        papers[run["paper"]]["flops"] += f["flops"]
    for key, item in plan.items.items():
        paper, name = key.split("/")
        if paper in papers and item.get("runs"):  # a run shared by items counts in each
            papers[paper]["by_item"][name] = sum(
                hours[r["id"]] + (hours[r["run"]] if r["stage"] == "adapt" else 0.0)
                for r in item["runs"]
            )
    for p in papers.values():
        p["gpu_hours"] = p["flops"] / rate / 3600
    total = sum(p["gpu_hours"] for p in papers.values())
    return {
        "device": device,
        "throughput": how,
        "flops_per_s": rate,
        "papers": papers,
        "total_gpu_hours": total,
        "goal_gpu_hours": float(cost_cfg["goal_hours"]),
        "papers_in_plan": sorted(papers),
        "within_goal": total <= float(cost_cfg["goal_hours"]) and math.isfinite(total),
    }
