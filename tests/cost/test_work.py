"""A run's work at its arithmetic: the paper cost and the Slurm runtime of each training and
adaptation job come from one model (fedrepro.cost.work), with the committed table
config/flops/paper.json in place of what needs torch."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
import yaml

from fedrepro.cost import estimate as cost
from fedrepro.cost.estimate import partition_counts, run_flops
from fedrepro.cost.target_cost import render, target_cost
from fedrepro.cost.work import (
    WorkTable,
    _inputs_key,
    counts_key,
    engine_run,
    flops_key,
    hours,
    job_resources,
    job_retries,
    known_sizes,
    measured_steps,
    modelled_minutes,
    pack_small_jobs,
    partition_limit,
    resumptions,
    run_work,
    step_family,
)
from fedrepro.experiments.config import load_yaml
from fedrepro.experiments.plan import paper_plan

REPO = Path(__file__).resolve().parents[2]
GPU = load_yaml(REPO / "config/paper.yaml")["scales"]["paper"]["resources"]["gpu"]
SIZES = known_sizes(load_yaml(REPO / "config/config.yaml")["bench"]["cost"]["split_sizes"])
PEAK = GPU["peak_flops_per_s"]
WORK = {"by_class": {"conv": 3e15, "matmul": 1e15}}


def _run(precision: str, tf32: str | None = None) -> dict:
    train = {"precision": precision, **({"tf32": tf32} if tf32 else {})}
    return {"train": train}


def test_a_run_is_priced_at_the_arithmetic_it_uses():
    """The cost assumed bf16 for every run while every grid trains in fp32: an fp32 run
    without TF32 takes the bf16/fp32 rate ratio (14.8x on an H100) longer than in bf16, and
    TF32 speeds up only the class of operation its policy names (one share everywhere here:
    the arithmetic alone)."""
    gpu = {**GPU, "mfu": 0.4}
    bf16 = hours(WORK, _run("bf16"), gpu)
    assert bf16 == pytest.approx(4e15 / (PEAK["bf16"] * 0.4) / 3600)
    fp32 = hours(WORK, _run("fp32", "none"), gpu)
    assert fp32 / bf16 == pytest.approx(PEAK["bf16"] / PEAK["fp32"])
    conv = hours(WORK, _run("fp32"), gpu)  # the default: convolutions in TF32
    assert conv * 3600 * 0.4 == pytest.approx(3e15 / PEAK["tf32"] + 1e15 / PEAK["fp32"])
    every = hours(WORK, _run("fp32", "all"), gpu)
    assert every * 3600 * 0.4 == pytest.approx(4e15 / PEAK["tf32"])
    assert bf16 < every < conv < fp32
    assert hours(WORK, _run("bf16", "none"), gpu) == bf16  # autocast: bf16 whatever the policy


def test_a_convnet_and_a_transformer_attain_their_own_shares_of_the_peak():
    """One utilisation for everything priced a TF32 ResNet at 40 % of the tensor peak
    (NVIDIA's own ResNet-50 reaches 15 %): each class of operation now takes its share at
    its arithmetic (config/paper.yaml cites each), so the same FLOPs as convolutions take
    0.4 / 0.15 the time they took, as matmuls at TF32 what they took."""
    mfu = GPU["mfu"]
    convnet = hours({"by_class": {"conv": 1e15}}, _run("fp32", "all"), GPU)
    transformer = hours({"by_class": {"matmul": 1e15}}, _run("fp32", "all"), GPU)
    assert convnet * 3600 == pytest.approx(1e15 / (PEAK["tf32"] * mfu["conv"]["tf32"]))
    assert transformer * 3600 == pytest.approx(1e15 / (PEAK["tf32"] * mfu["matmul"]["tf32"]))
    assert mfu["conv"]["tf32"] < mfu["matmul"]["tf32"]
    old = hours({"by_class": {"conv": 1e15}}, _run("fp32", "all"), {**GPU, "mfu": 0.4})
    assert convnet / old == pytest.approx(0.4 / mfu["conv"]["tf32"])


def test_a_measured_rate_replaces_its_own_class_and_arithmetic_only():
    """The bench's one measured rate (a ViT-B workload at bf16) stood for every arithmetic
    and network; now it replaces the matmuls' bf16 share and nothing else."""
    gpu = GPU
    measured = {"device": "X", "flops_per_s": 0.3 * PEAK["bf16"], "precision": "bf16",
                "op_class": "matmul"}  # fmt: skip
    cost_cfg = {**load_yaml(REPO / "config/config.yaml")["bench"]["cost"], "papers": ["fedpce"]}
    memo = cost.committed_memo(REPO / "config/flops/paper.json")
    est = cost.estimate(REPO, cost_cfg, measured, memo=memo)
    assert est["mfu"]["matmul"]["bf16"] == pytest.approx(0.3)
    assert est["mfu"]["conv"] == gpu["mfu"]["conv"]
    assert est["mfu"]["matmul"]["tf32"] == gpu["mfu"]["matmul"]["tf32"]
    assert "measured: 30% of the bf16 peak for matmuls" in est["throughput"]
    vit = {"machine": {"gpu": "X"}, "model_flops_per_s": 1e14, "precision": "bf16",
           "flops_per_sample": {"by_class": {"train": {"conv": 1e8, "matmul": 3e10}}}}  # fmt: skip
    cpu = {**vit, "machine": {}, "model_flops_per_s": 1e9}
    want = {"device": "X", "flops_per_s": 1e14, "precision": "bf16", "op_class": "matmul"}
    assert cost.measured_rate([vit, cpu]) == want


def test_run_flops_split_by_class_add_up_to_the_total(tmp_path):
    plan = paper_plan(REPO, ["fedicon"])
    run = next(r for r in plan.runs.values() if r["model"]["backbone"] == "cnn_fedicon")
    f = run_flops(run, SIZES, {})
    assert set(f["by_class"]) == {"conv", "matmul"} and min(f["by_class"].values()) > 0
    assert sum(f["by_class"].values()) == pytest.approx(f["flops"])


def test_a_sample_of_clients_with_different_models_costs_the_mean_of_their_models(tmp_path):
    """FedHPL's Table 2 federations: R18/34/50/34/18 cost (2·R18 + 2·R34 + R50) / 5 a sample,
    not ResNet-18's (model.backbone) for every client; the table keeps each backbone's, so the
    smoke's federation of one client a backbone is priced from the same entries."""
    plan = paper_plan(REPO, ["fedhpl"])
    run = next(r for r in plan.runs.values()
               if r["algorithm"]["name"] == "fedhe" and r["dataset"] == "cifar10")  # fmt: skip
    names = run["model"]["client_backbones"]
    assert len(set(names)) == 3
    alone = {n: {**copy.deepcopy(run), "model": {**run["model"], "backbone": n,
                                                 "client_backbones": None}}
             for n in set(names)}  # fmt: skip
    memo: dict = {}
    mixed = run_flops(run, SIZES, memo)["flops"]
    each = {n: run_flops(r, SIZES, memo)["flops"] for n, r in alone.items()}
    assert mixed == pytest.approx(sum(each[n] for n in names) / len(names))
    assert each["resnet50.tv_in1k"] > 2 * each["resnet18.tv_in1k"]
    table = WorkTable(REPO / "config/flops/paper.json", SIZES)
    distinct = list(dict.fromkeys(names))
    smoke = {**run, "model": {**run["model"], "client_backbones": distinct},
             "partition": {**run["partition"], "clients": len(distinct)}}  # fmt: skip
    assert table.per_sample(smoke)["train"] == pytest.approx(
        sum(table.per_sample(alone[n])["train"] for n in distinct) / len(distinct)
    )


@pytest.fixture(scope="module")
def plan():
    return paper_plan(REPO)


@pytest.fixture(scope="module")
def table():
    return WorkTable(REPO / "config/flops/paper.json", SIZES)


def test_the_committed_table_covers_every_paper_scale_job(plan, table):
    """Every training and adaptation job of the paper plan is planned from the table's exact
    counts, none from the upper bound (regenerate: fedrepro.cost.work.REGENERATE)."""
    runs = [*plan.runs.values(), *(engine_run(plan, a) for a in plan.adapts)]
    assert not {flops_key(r) for r in runs} - set(table.flops)
    assert not {counts_key(r) for r in runs} - set(table.counts)


def test_the_tables_entries_are_what_the_cost_job_counts(plan, table):
    run = next(r for r in plan.runs.values() if r["paper"] == "fedpce")
    memo: dict = {}
    expected = run_work(run, table.per_sample(run), table.counts_of(run), table.sizes)
    assert run_flops(run, SIZES, memo) == expected
    assert table.counts_of(run) == partition_counts(run, SIZES)


def test_the_cost_job_starts_from_the_table_and_counts_nothing_it_holds(monkeypatch):
    """The bench's cost job takes the committed table's per-sample FLOPs instead of counting
    every model again on the meta device (125 s of the mini default's 2 cores); counting is
    made to fail here, so the estimate of a paper must come from the table alone."""

    def count(*args, **kwargs):
        raise AssertionError("counted FLOPs the committed table holds")

    monkeypatch.setattr(cost, "per_sample_flops", count)
    cost_cfg = {**load_yaml(REPO / "config/config.yaml")["bench"]["cost"], "papers": ["fedpce"]}
    memo = cost.committed_memo(REPO / "config/flops/paper.json")
    assert cost.estimate(REPO, cost_cfg, memo=memo)["total_gpu_hours"] > 0
    assert cost.committed_memo(REPO / "no-such-table.json") == {}


def test_a_jobs_runtime_is_its_work_on_the_gpu_times_a_margin_and_grows_with_it(plan, table):
    """The runtime was minutes_per_round x rounds x epochs whatever the model: FedIns's
    ViT-B/16 asked as much a round as FedICON's 32 px CNN. Now: its FLOPs over the GPU's
    rate at the run's arithmetic, times the margin, at least min_minutes; doubled on retry.
    (The dearest run whose work is all in its rounds: FedMD's transfer learning is not.)"""
    rounds_only = [r for r in plan.runs if not plan.runs[r].get("public")]
    rid = max(rounds_only, key=lambda r: table.work(plan.runs[r])["flops"])
    run = plan.runs[rid]
    first = job_resources(plan, table, "train", rid)
    expected = 60 * hours(table.work(run), run, GPU) * GPU["margin"]
    assert first["runtime"] == pytest.approx(expected, abs=1) and expected > 30
    assert job_resources(plan, table, "train", rid, attempt=2)["runtime"] == 2 * first["runtime"]
    longer = copy.deepcopy(plan)
    longer.runs[rid]["train"]["rounds"] *= 2
    assert job_resources(longer, table, "train", rid)["runtime"] == pytest.approx(
        2 * first["runtime"], abs=2
    )
    small = min(plan.train_jobs, key=lambda j: table.work(plan.runs[j])["flops"])
    assert job_resources(plan, table, "train", small)["runtime"] == 30  # the floor
    aid = next(iter(plan.adapt_jobs))
    assert job_resources(plan, table, "adapt", aid)["runtime"] >= 30


def test_a_job_longer_than_its_partitions_limit_asks_the_limit_on_each_resumption(plan, table):
    """pFedPG's SVHN jobs asked 57 h on a partition of 48: pending forever or refused. Under
    a limit, a job needing 3.x limits asks the limit with its planned memory on each of its
    4 attempts (each resumes from the last checkpoint), a retry after those doubles the
    memory and still asks the limit; a job within the limit is as before, its retry's
    doubled time at most the limit; the rule allows the most resumptions less one, plus one
    for a failure."""
    rid = max(plan.train_jobs, key=lambda j: job_resources(plan, table, "train", j)["runtime"])
    need = job_resources(plan, table, "train", rid)
    limit = math.ceil(need["runtime"] / 3.5)
    attempts = [job_resources(plan, table, "train", rid, a, limit) for a in range(1, 6)]
    assert resumptions(need["runtime"], limit) == 4
    assert [a["runtime"] for a in attempts] == [limit] * 5
    assert [a["mem_mb"] for a in attempts] == [need["mem_mb"]] * 4 + [2 * need["mem_mb"]]
    small = min(plan.train_jobs, key=lambda j: job_resources(plan, table, "train", j)["runtime"])
    within = job_resources(plan, table, "train", small, 1, limit)
    assert within == job_resources(plan, table, "train", small)
    again = job_resources(plan, table, "train", small, 2, within["runtime"] + 1)
    assert again == {"mem_mb": 2 * within["mem_mb"], "runtime": within["runtime"] + 1}
    most = max(resumptions(job_resources(plan, table, "train", j)["runtime"], limit)
               for j in plan.train_jobs)  # fmt: skip
    assert job_retries(plan, table, "train", limit, 1) == most - 1 + 1 == 4
    assert job_retries(plan, table, "train", None, 1) is None
    assert job_retries(plan, table, "train", 10**9, 1) is None  # none needs resuming


def test_the_limit_is_the_longest_of_the_partitions_that_fit_the_job(tmp_path):
    """A job with GPUs goes to a partition with enough of them, one without to one without
    (the executor plugin's choice): its limit is the longest such partition's; none where
    one of them is unlimited or no file is there."""
    path = tmp_path / "partitions.yaml"
    parts = {"cpu": {"max_gpu": 0, "max_runtime": 30}, "gpu": {"max_gpu": 1, "max_runtime": 60},
             "big": {"max_gpu": 4, "max_runtime": 120}}  # fmt: skip
    path.write_text(yaml.safe_dump({"partitions": parts}))
    assert [partition_limit(path, g) for g in (0, 1, 2, 8)] == [30, 120, 120, None]
    parts["cpu"].pop("max_runtime")
    path.write_text(yaml.safe_dump({"partitions": parts}))
    assert partition_limit(path, 0) is None and partition_limit(tmp_path / "none.yaml", 1) is None
    shipped = REPO / "profiles/slurm/partitions.yaml"
    assert partition_limit(shipped, 1) == 2880 and partition_limit(shipped, 0) is None


def test_a_fedmd_run_is_priced_with_the_work_on_its_public_set(plan, table):
    """FedMD (FedHPL Table 2) trains each client 50 passes over the public set once and, each
    round, digests the round's 5,000 public samples and forwards the next round's: work the
    private samples alone left out (a ninth of the run's samples)."""
    run = next(r for r in plan.runs.values() if r["algorithm"]["name"] == "fedmd")
    public = SIZES[run["public"]["dataset"]]["train"]
    plain = {k: v for k, v in run.items() if k != "public"}
    work, alone = table.work(run), table.work(plain)
    clients, rounds = run["partition"]["clients"], run["train"]["rounds"]
    assert (clients, rounds) == (5, 100)
    assert work["train_samples"] - alone["train_samples"] == 5 * 50 * public + 100 * 5 * 5000
    assert work["eval_samples"] - alone["eval_samples"] == 100 * 5 * 5000
    assert work["flops"] > alone["flops"] * 1.1
    budget = copy.deepcopy(run)  # a step budget (the smoke's) caps each public phase too
    budget["train"].update(local_steps=2, batch_size=4)
    smoke, smoke_alone = table.work(budget), table.work({**plain, "train": budget["train"]})
    assert smoke["train_samples"] - smoke_alone["train_samples"] == 5 * 8 + 100 * 5 * 8


def test_a_partition_outside_the_table_is_bounded_by_the_whole_split(plan, table):
    run = next(r for r in plan.runs.values() if r["paper"] == "fedins")
    other = {**run, "partition": {**run["partition"], "beta": 0.123}}
    bound = table.counts_of(other)
    assert bound["train"] >= table.counts_of(run)["train"]
    assert run_work(other, table.per_sample(other), bound)["flops"] > table.work(run)["flops"]


def test_a_model_outside_the_table_is_refused_naming_the_table(plan, table):
    run = next(iter(plan.runs.values()))
    other = {**run, "model": {**run["model"], "img_size": 999}}
    with pytest.raises(ValueError, match=r"paper\.json: no FLOPs for .*bench\.py work"):
        table.per_sample(other)


def test_a_missing_table_is_refused_as_missing(plan, tmp_path):
    """A table at the wrong path (a renamed folder the workflow still named) is named
    as missing, not read as one without the run's FLOPs."""
    run = next(iter(plan.runs.values()))
    with pytest.raises(ValueError, match=r"nope\.json: no such file; write it: .*bench\.py work"):
        WorkTable(tmp_path / "nope.json", SIZES).per_sample(run)


def test_the_bound_of_a_domain_dataset_counts_every_domain(plan, table):
    """DomainNet's assumed size is one for every domain (bench.cost.split_sizes, as
    cost.partition_counts reads it); the bound counted one domain's images, fewer than the
    run's own counts (600 test images of 3,600)."""
    run = next(r for r in plan.runs.values() if r["dataset"] == "domainnet")
    other = {**run, "partition": {**run["partition"], "beta": 0.123}}
    bound, size = table.counts_of(other), SIZES["domainnet"]
    assert (bound["train"], bound["test"]) == (6 * size["train"], 6 * size["test"])
    counted = partition_counts(run, SIZES)
    assert bound["train"] >= counted["train"] and bound["test"] >= counted["test"]


def test_a_launch_bound_run_is_priced_at_its_kernels_not_its_flops():
    """Issue 52: a small network's step is bound by its kernel launches; the FLOPs alone
    priced FedICON's contrastive step at 93 µs where its kernels take milliseconds. A run
    takes at least its kernels times the GPU's launch cost, and a large one its FLOPs time."""
    run = _run("fp32")
    small = {"by_class": {"conv": 1e9, "matmul": 0.0}, "kernels": 1e6}
    flops_only = hours({"by_class": small["by_class"]}, run, GPU)  # the old price
    assert hours(small, run, GPU) == pytest.approx(1e6 * GPU["launch_s"] / 3600)
    assert hours(small, run, GPU) > 100 * flops_only
    large = {**WORK, "kernels": 1e6}
    assert hours(large, run, GPU) == hours(WORK, run, GPU)  # above its floor: FLOPs


def test_the_kernels_of_a_step_are_counted_without_views_and_allocations():
    """The kernel count (``fedrepro.cost.flops.KernelCount``) takes an operator that
    computes, not a view or an allocation; a run's kernels are its steps' and evaluation
    batches' (``run_work``)."""
    import torch

    from fedrepro.cost.flops import KernelCount

    with torch.device("meta"), KernelCount() as k:
        x = torch.empty(4, 8)
        y = x.view(8, 4).t()
        (y * 2 + 1).sum()
    assert k.kernels == 3  # mul, add, sum
    counts = {"clients": 2, "train": 640, "test": 100, "own_test": 200, "transforms": False}
    per = {"train": 1.0, "eval": 1.0, "by_class": {"train": {"conv": 1.0}, "eval": {"conv": 1.0}},
           "personalized": False, "kernels": {"train": 50, "eval": 20}}  # fmt: skip
    run = {"train": {"rounds": 2, "local_epochs": 1, "batch_size": 32}, "model": {},
           "algorithm": {"name": "fedavg"}}  # fmt: skip
    work = run_work(run, per, counts)
    assert work["steps"] == 2 * 640 / 32
    assert work["kernels"] == 40 * 50 + 2 * 100 / 1024 * 20


def test_small_training_jobs_are_packed_into_shared_allocations(table):
    """1,885 jobs asked a GPU for 30 minutes each for minutes of work. With resources.pack,
    a job modelled under its least request joins others reading the same inputs, up to the
    pack's runs and minutes: every run is still trained once, in one job, under its own id;
    a pack's runs share their inputs and asks its least runtime once; adaptations follow
    their runs; the jobs a pack takes in are gone; a big job stays alone; the same plan
    packs alike twice."""
    plan, alone = paper_plan(REPO), paper_plan(REPO)
    pack = plan.scale_cfg["resources"]["pack"]
    before = {j: list(m) for j, m in plan.train_jobs.items()}
    small = {j for j in before if modelled_minutes(plan, table, "train", j) < 30 * len(before[j])}
    pack_small_jobs(plan, table)
    assert plan.packs and sorted(plan.runs) == sorted(
        r for m in plan.train_jobs.values() for r in m
    )
    for job, runs in plan.train_jobs.items():
        assert all(plan.job_of[r] == job for r in runs)
        if job not in plan.packs:
            assert before[job] == runs
            continue
        assert 1 < len(runs) <= pack["runs"]
        assert len({_inputs_key(plan.runs[r]) for r in runs}) == 1
        assert {before_job for before_job, m in before.items() if set(m) <= set(runs)} <= small
        assert modelled_minutes(plan, table, "train", job) <= pack["minutes"]
        assert job_resources(plan, table, "train", job)["runtime"] >= 30
    assert len(plan.train_jobs) < len(before)
    for aid, job in plan.adapt_job_of.items():
        assert aid in plan.adapt_jobs[job]
        assert plan.adapt_jobs[job] and all(
            plan.job_of[plan.adapts[a]["run"]] == plan.job_of[plan.adapts[aid]["run"]]
            for a in plan.adapt_jobs[job]
        )
    for entry in (e for m in plan.items.values() for e in m["runs"] if "built_by" in e):
        assert Path(entry["built_by"]).stem in {**plan.train_jobs, **plan.adapt_jobs}, entry
    pack_small_jobs(alone, table)
    assert alone.train_jobs == plan.train_jobs and alone.adapt_jobs == plan.adapt_jobs


def test_a_calibrated_family_takes_its_measured_step_time(table, tmp_path):
    """`snakemake calibrate` times each run family's step on the user's GPU; where the scale
    names that table, a run of a timed family takes its training steps at the measured time
    and its evaluation as modelled (the Slurm request and the cost command with it), the
    others the model alone, and the cost page says which it used."""
    plan = paper_plan(REPO, ["fedpce"])
    rid = next(iter(plan.runs))
    run = plan.runs[rid]
    algorithm, backbones, tuning, side, batch = step_family(run)
    path = tmp_path / "calibration.csv"
    path.write_text(
        "run,algorithm,backbones,tuning,img_size,batch,clients,device,device_name,step_ms,"
        f"steps_timed,peak_mb,estimate_mb\nx,{algorithm},{backbones},{tuning},{side},{batch},"
        "2,cuda,H100,250.0,10,,1\n"
    )
    assert measured_steps(path) == {step_family(run): 0.25}
    calibrated = WorkTable(REPO / "config/flops/paper.json", SIZES, path)
    work = calibrated.work(run)
    evaluation = {"by_class": work["eval_by_class"], "kernels": work["eval_kernels"]}
    assert work["step_s"] == 0.25
    assert hours(work, run, GPU) == pytest.approx(
        work["steps"] * 0.25 / 3600 + hours(evaluation, run, GPU)
    )
    assert hours(work, run, GPU) != hours(table.work(run), run, GPU)
    other = next(r for r in plan.runs.values() if step_family(r) != step_family(run))
    assert "step_s" not in calibrated.work(other)
    page = render(target_cost(plan, calibrated, ["fedpce"], REPO / "no-profile.yaml"))
    assert "Step times: measured for 1 run families" in page
    assert "Step times: modelled" in render(target_cost(plan, table, ["fedpce"], REPO / "x"))
    assert measured_steps(tmp_path / "none.csv") == {}
