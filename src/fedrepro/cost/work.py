"""The work of a run or adaptation, and the time it takes at the run's arithmetic: one model
for the paper-scale cost (``fedrepro.cost.estimate``) and the Slurm runtime of each training
and adaptation job (``job_resources``, the workflow's ``resources``).

Work = (training samples × FLOPs of one sample's step) + (evaluated samples × FLOPs of one
sample's forward), each by class of operation (convolutions, matmuls); time = those FLOPs
over the device's rate at the arithmetic each class runs on (``fedrepro.arithmetic``: the
run's ``train.precision`` and ``train.tf32``), and at least the run's kernels (training steps
× the kernels of a step + evaluation batches × those of a forward, counted on the meta device)
times the device's cost of one (``resources.gpu.launch_s``): the per-step floor a small
network's steps sit on, whatever its FLOPs. Torch is not imported here: the workflow
plans with this module. What needs torch (FLOPs counted on the meta device, the partitioner's
sample counts) comes from the cost job's memo, or for the workflow from the committed table
``config/flops/<scale>.json`` that ``python workflow/scripts/bench.py work`` writes from it.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from pathlib import Path

from fedrepro.arithmetic import of_run, seconds
from fedrepro.data.sources.registry import DATASETS, split_sizes
from fedrepro.experiments.config import load_yaml
from fedrepro.experiments.plan import digest
from fedrepro.fl.eval_batch import eval_batch_size
from fedrepro.fl.public import public_dataset, public_samples
from fedrepro.tta import adapt_method

REGENERATE = "python workflow/scripts/bench.py work --out config/flops/paper.json"


def known_sizes(assumed: dict) -> dict:
    """Images per split of every dataset: the registry's published counts
    (``fedrepro.data.sources.registry.split_sizes``), and ``assumed``
    (``bench.cost.split_sizes``) for those the registry does not record. A composite's domains
    are its components: the registry's counts where it records them, the assumptions for the
    rest. A dataset or a composite's domain given by both is refused (one source each)."""
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


def flops_key(run: dict) -> str:
    """What a sample's FLOPs depend on: the model's shape (backbone, input side, tuning and
    its options), the algorithm and the class count. Other algorithm options (a loss weight,
    a temperature) are taken not to change a step's FLOPs; a method from outside costs the
    step of the built-in it is ``priced_as``. A run whose clients hold different
    models has one key per backbone (``sample_flops``)."""
    m = run["model"]
    shape = {k: m.get(k) for k in ("backbone", "img_size", "tuning", "tuning_options")}
    classes = DATASETS[run["dataset"]].num_classes
    return json.dumps([shape, priced_as(run["algorithm"]), classes], sort_keys=True)


def priced_as(algorithm: dict) -> str:
    """The algorithm whose step a run's costs: its own, or for a method from outside
    (config ``methods``) the built-in it names (``priced_as``, default FedAvg)."""
    return algorithm.get("from", {}).get("priced_as", algorithm["name"])


def sample_flops(run: dict, per_model: Callable[[dict], dict]) -> dict:
    """A training sample's FLOPs in ``run`` from ``per_model`` (a run of one model -> its
    per-sample FLOPs): its model's; where its clients hold different models
    (``model.client_backbones``), the mean over the clients of their backbone's, every client
    weighing alike (exact where they hold as many images: the table keeps no per-client
    counts), so a federation of any clients of known backbones is priced (the smoke's)."""
    names = run["model"].get("client_backbones")
    if not names:
        return per_model(run)
    each = {n: per_model({**run, "model": {**run["model"], "backbone": n}}) for n in set(names)}
    parts = [each[n] for n in names]

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    return {
        "train": mean([p["train"] for p in parts]),
        "eval": mean([p["eval"] for p in parts]),
        "by_class": {
            stage: {
                c: mean([p["by_class"][stage].get(c, 0.0) for p in parts])
                for c in dict.fromkeys(c for p in parts for c in p["by_class"][stage])
            }
            for stage in ("train", "eval")
        },  # fmt: skip
        "personalized": any(p["personalized"] for p in parts),
        "kernels": {
            stage: mean([p.get("kernels", {}).get(stage, 0) for p in parts])
            for stage in ("train", "eval")
        },  # fmt: skip
    }


def counts_key(run: dict) -> str:
    """What a run's sample counts depend on: its dataset, partition (and the seed drawing
    it), cohort, folds and per-client image cap."""
    seed = int(run["partition"].get("seed", run["seed"]))
    return json.dumps([run["dataset"], run["partition"], seed, run.get("cohort"), run.get("cv"),
                       run.get("images")], sort_keys=True)  # fmt: skip


def run_work(run: dict, per_sample: dict, counts: dict, sizes: dict | None = None) -> dict:
    """Samples and FLOPs (in all and by class) of one run over all its rounds, from
    ``per_sample`` (``fedrepro.cost.flops.per_sample_flops``) and ``counts``
    (``fedrepro.cost.estimate.partition_counts``); a run with a public data set (FedMD) adds
    the public samples its algorithm trains on and forwards (``fedrepro.fl.public``), the
    public split's size from ``sizes`` (``known_sizes``), each at the run's per-sample cost."""
    t = run["train"]
    own_models = per_sample["personalized"] or counts["transforms"]
    evaluated = counts["own_test"] if own_models else counts["test"]
    rounds = int(t["rounds"])
    every = int(run.get("eval_every", 1))
    evals = len({*range(every, rounds + 1, every), rounds})
    if t.get("local_steps"):  # a fixed number of batches per client and round (FedPCE)
        per_round = counts["clients"] * int(t["local_steps"]) * int(t["batch_size"])
    else:
        per_round = int(t["local_epochs"]) * counts["train"]
    fraction = float(t.get("fraction", 1.0))
    public = public_dataset(run)
    public_train = int((sizes or {}).get(public, {}).get("train", 0)) if public else 0
    if public and not public_train:
        raise ValueError(f"public.dataset {public!r}: no training-split size known to price it")
    steps = int(t["local_steps"]) * int(t["batch_size"]) if t.get("local_steps") else None
    trained, forwarded = public_samples(
        run["algorithm"], public_train, counts["clients"], rounds, fraction, steps
    )
    train = rounds * fraction * per_round + trained
    evaluated_all = evals * evaluated + forwarded
    by = per_sample["by_class"]
    by_class = {c: train * by["train"].get(c, 0.0) + evaluated_all * by["eval"].get(c, 0.0)
                for c in {*by["train"], *by["eval"]}}  # fmt: skip
    kernels = per_sample.get("kernels", {})
    train_steps = train / int(t["batch_size"])
    batches = evaluated_all / eval_batch_size(t, run["model"].get("img_size"))
    eval_kernels = batches * kernels.get("eval", 0)
    return {
        "train_samples": train,
        "eval_samples": evaluated_all,
        "flops": train * per_sample["train"] + evaluated_all * per_sample["eval"],
        "by_class": by_class,
        "eval_by_class": {c: evaluated_all * f for c, f in by["eval"].items()},
        "steps": train_steps,
        "kernels": train_steps * kernels.get("train", 0) + eval_kernels,
        "eval_kernels": eval_kernels,
    }


def engine_run(plan, aid: str) -> dict:
    """The engine run an adaptation is (its method's config of the trained run)."""
    entry = plan.adapts[aid]
    return adapt_method(entry["adapt"]).run_config(plan.runs[entry["run"]], entry["adapt"])


def hours(work: dict, run: dict, gpu: dict, mfu: float | dict | None = None) -> float:
    """GPU-hours of ``work`` (``run_work``) at ``run``'s arithmetic on ``gpu``
    (``peak_flops_per_s`` per arithmetic; ``mfu``, or the GPU's, per class of operation and
    arithmetic: ``fedrepro.arithmetic.share``), at least its kernels' launches
    (``floor_hours``); where the work carries a measured ``step_s`` (``WorkTable``'s
    calibration), its training steps at that and its evaluation as modelled."""
    mfu = gpu["mfu"] if mfu is None else mfu
    if work.get("step_s") is not None:  # calibrated: its steps as measured, its evaluation
        evaluation = {"by_class": work["eval_by_class"], "kernels": work["eval_kernels"]}
        return work["steps"] * work["step_s"] / 3600 + hours(evaluation, run, gpu, mfu)
    flops = seconds(work["by_class"], *of_run(run), gpu["peak_flops_per_s"], mfu) / 3600
    return max(flops, floor_hours(work, gpu))


def floor_hours(work: dict, gpu: dict) -> float:
    """The hours ``work``'s kernels take to launch on ``gpu`` (``launch_s`` each; none where
    the GPU names no cost)."""
    return float(work.get("kernels", 0)) * float(gpu.get("launch_s", 0.0)) / 3600


class WorkTable:
    """The committed per-sample FLOPs and sample counts of a scale's plan (``REGENERATE``).
    A sample-count entry it lacks (another partition, the smoke's sizes) is the whole split
    of every client, never fewer (an upper bound); a FLOPs entry it lacks is refused."""

    def __init__(self, path: Path, sizes: dict, calibration: Path | None = None):
        self.path = Path(path)
        doc = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.flops, self.counts, self.sizes = doc.get("flops", {}), doc.get("counts", {}), sizes
        self.calibration = Path(calibration) if calibration else None
        self.steps = measured_steps(self.calibration) if self.calibration else {}

    def per_sample(self, run: dict) -> dict:
        if not self.path.exists():
            raise ValueError(f"{self.path}: no such file; write it: {REGENERATE}")
        return sample_flops(run, self._model_flops)

    def _model_flops(self, run: dict) -> dict:
        key = flops_key(run)
        if key not in self.flops:
            raise ValueError(f"{self.path}: no FLOPs for {key}; regenerate it: {REGENERATE}")
        return self.flops[key]

    def counts_of(self, run: dict) -> dict:
        found = self.counts.get(counts_key(run))
        return found if found is not None else self.bound(run)

    def bound(self, run: dict) -> dict:
        size = self.sizes.get(run["dataset"], {"train": 0, "test": 0})
        # a size per domain, or one for every domain (as cost.partition_counts reads them)
        per = size.get("domains") or dict.fromkeys(DATASETS[run["dataset"]].domains or ("_",), size)
        train = sum(int(s["train"]) for s in per.values())
        test = sum(int(s["test"]) for s in per.values())
        clients = int(run["partition"].get("clients", 1))
        return {"clients": clients, "train": train, "test": test, "own_test": test * clients,
                "transforms": True}  # fmt: skip

    def work(self, run: dict) -> dict:
        """``run_work`` of ``run``, with the measured seconds of its step (``step_s``) where
        the calibration timed its family."""
        done = run_work(run, self.per_sample(run), self.counts_of(run), self.sizes)
        measured = self.steps.get(step_family(run))
        return done if measured is None else {**done, "step_s": measured}


def calibration_of(scale_cfg: dict, base: Path) -> Path | None:
    """The step-time table the scale's ``resources.gpu.calibration`` names (relative to
    ``base``, the workflow), if any."""
    name = scale_cfg.get("resources", {}).get("gpu", {}).get("calibration")
    return None if not name else Path(base) / name


def step_family(run: dict) -> tuple:
    """What a measured step time stands for: the algorithm, the backbones, the tuning,
    the input side and the batch (the GPU check's step-time columns)."""
    m = run["model"]
    backbones = "+".join(dict.fromkeys(m.get("client_backbones") or [m["backbone"]]))
    side = "" if m.get("img_size") is None else str(m["img_size"])
    return (run["algorithm"]["name"], backbones, m.get("tuning", "full"), side,
            str(run["train"]["batch_size"]))  # fmt: skip


def measured_steps(path: Path) -> dict[tuple, float]:
    """The seconds of a step per family (``step_family``) in a step-time table (the GPU
    check's ``step_times.csv`` or ``snakemake calibrate``'s, measured on the user's GPU);
    empty where there is no such file."""
    if not Path(path).is_file():
        return {}
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {(r["algorithm"], r["backbones"], r["tuning"], r["img_size"], r["batch"]):
            float(r["step_ms"]) / 1e3 for r in rows}  # fmt: skip


def job_resources(
    plan, table: WorkTable | None, stage: str, key: str | None, attempt: int = 1,
    limit: int | None = None,
) -> dict:  # fmt: skip
    """``mem_mb`` and ``runtime`` (minutes) of a job at ``attempt``: the plan's
    (``Plan.resources``), and for a training or adaptation job where the scale names a
    ``resources.gpu``, the time its members' work takes there times ``margin``, at least the
    plan's (``min_minutes`` a member). A retry multiplies both by the attempt; under a
    partition's ``limit`` (minutes) a training or adaptation job needing longer asks the
    limit and its memory on each of its ``resumptions``, every attempt resuming from its
    last checkpoint, and a retry after those grows as before, its time at most the limit
    (as every other job's)."""
    if stage not in ("train", "adapt"):  # short: their time at most the limit
        other = plan.resources(stage, key, attempt)
        return other if limit is None else {**other, "runtime": min(other["runtime"], limit)}
    base = plan.resources(stage, key)
    need = math.ceil(max(base["runtime"], modelled_minutes(plan, table, stage, key)))
    grow = max(1, attempt - resumptions(need, limit) + 1)
    runtime = need * grow if limit is None else min(need * grow, int(limit))
    return {"mem_mb": base["mem_mb"] * grow, "runtime": runtime}


def modelled_minutes(plan, table: WorkTable | None, stage: str, key: str) -> float:
    """The minutes a training or adaptation job's members' work takes on the scale's
    ``resources.gpu`` times its ``margin``; 0 where the scale names no GPU."""
    gpu = plan.scale_cfg.get("resources", {}).get("gpu")
    if gpu is None or table is None:
        return 0.0
    if stage == "train":
        members = [plan.runs[r] for r in plan.train_jobs[key]]
    else:
        members = [engine_run(plan, a) for a in plan.adapt_jobs[key]]
    return 60.0 * sum(hours(table.work(run), run, gpu) for run in members) * float(gpu["margin"])


def pack_small_jobs(plan, table: WorkTable | None) -> None:
    """Small training jobs share a GPU allocation: where the scale sets ``resources.pack``
    (``minutes``, ``runs``), every training job whose modelled time is under its least
    request (``min_minutes`` a member: it would hold a GPU mostly idle) joins the others
    that read the same inputs (dataset, test shift, public set, backbone) for the same item
    (the first that reads its runs, so that one table's rerun trains its own) in packs of at
    most ``runs`` runs and ``minutes`` of modelled time, each one Slurm job training its
    runs one after another (``Plan.regroup``; their adaptations follow them). Each run keeps
    its directory, checkpoint and numbers. The paper-shape smoke keeps a job a combination
    (its checks are per job)."""
    pack = plan.scale_cfg.get("resources", {}).get("pack")
    if not pack or plan.smoke:
        return
    least = float(plan.scale_cfg["resources"]["train"]["min_minutes"])
    owner: dict[str, str] = {}  # a run's first item: a pack serves one item (a table rerun
    for name, manifest in plan.items.items():  # trains no other item's runs)
        for entry in manifest["runs"]:
            owner.setdefault(entry.get("run", entry["id"]), name)
    alike: dict[tuple, list[tuple[str, float]]] = {}
    for job, members in sorted(plan.train_jobs.items()):
        minutes = modelled_minutes(plan, table, "train", job)
        if minutes < least * len(members):
            key = (_inputs_key(plan.runs[members[0]]), owner.get(members[0]))
            alike.setdefault(key, []).append((job, minutes))
    packs = {}
    for jobs in alike.values():
        chunk, runs, minutes = [], 0, 0.0
        for job, need in [*jobs, (None, 0.0)]:
            n = len(plan.train_jobs[job]) if job else 0
            full = job is None or runs + n > int(pack["runs"]) or minutes + need > pack["minutes"]
            if full and len(chunk) > 1:
                members = [r for j in chunk for r in plan.train_jobs[j]]
                dataset = plan.runs[members[0]]["dataset"]
                packs[f"pack-{dataset}-{digest(members)}"] = chunk
            if full:
                chunk, runs, minutes = [], 0, 0.0
            if job:
                chunk.append(job)
                runs, minutes = runs + n, minutes + need
    plan.regroup(packs)


def _inputs_key(run: dict) -> str:
    """What a training job's runs share (its inputs but the partitions: the workflow's
    ``runs_inputs``)."""
    m = run["model"]
    return json.dumps([run["dataset"], run.get("test_shift"), public_dataset(run),
                       m.get("pretrained", True), m["backbone"], m.get("client_backbones")],
                      sort_keys=True)  # fmt: skip


def resumptions(need: float, limit: int | None) -> int:
    """The attempts a job of ``need`` minutes takes under a partition ``limit``: one per
    limit's worth (each resumes from the last checkpoint its predecessor wrote; ``margin``
    covers the set-up and the round each repeats); one without a limit."""
    return 1 if not limit else max(1, math.ceil(float(need) / int(limit)))


def job_retries(plan, table: WorkTable | None, stage: str, limit: int | None, retries: int):
    """The retries a rule of ``stage`` allows: None (the command line's ``retries``) where
    no job of it needs more than one attempt under ``limit``, else the most
    ``resumptions`` less one, plus ``retries`` (a failure's)."""
    if not limit or stage not in ("train", "adapt"):
        return None
    keys = plan.train_jobs if stage == "train" else plan.adapt_jobs
    most = max((resumptions(job_resources(plan, table, stage, k)["runtime"], limit)
                for k in keys), default=1)  # fmt: skip
    return None if most == 1 else most - 1 + int(retries)


def partition_limit(partitions: Path | None, gpus: int) -> int | None:
    """The longest ``max_runtime`` (minutes) of the partitions in the Slurm profile's file
    ``partitions`` that fit a job of ``gpus`` GPUs (``max_gpu`` at least that; a job without
    GPUs goes to one without, as the executor plugin sends it); None where one of them sets
    none, or there is no such file."""
    if partitions is None or not Path(partitions).is_file():
        return None
    parts = (load_yaml(Path(partitions)).get("partitions") or {}).values()
    fit = [p for p in parts if (int(p.get("max_gpu", 0)) >= gpus if gpus else
                                not int(p.get("max_gpu", 0)))]  # fmt: skip
    if not fit or any(not p.get("max_runtime") for p in fit):
        return None
    return max(int(p["max_runtime"]) for p in fit)
