"""Benchmarks: phase accounting, FLOP counts, sample counts, the paper-cost arithmetic."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from fedrepro.bench.machine import matmul_flops
from fedrepro.bench.workload import run_workload, stepped_samples, summarize_rounds
from fedrepro.cost.estimate import partition_counts, run_flops
from fedrepro.cost.flops import per_sample_flops
from fedrepro.cost.work import known_sizes
from fedrepro.data.sources.registry import DATASETS
from fedrepro.experiments.config import load_yaml
from fedrepro.experiments.plan import paper_plan
from fedrepro.fl.timing import PhaseClock
from fedrepro.tta import adapt_method

REPO = Path(__file__).resolve().parents[2]

VIT_B = "vit_base_patch16_224.augreg_in21k_ft_in1k"


def test_phase_clock_adds_up_and_restarts():
    clock = PhaseClock("cpu")
    for _ in range(3):
        with clock.phase("step"):
            sum(range(10_000))
    with clock.phase("data"):
        pass
    seconds = clock.take()
    assert set(seconds) == {"step", "data"} and seconds["step"] > seconds["data"] >= 0
    assert clock.take() == {}


def test_summary_arithmetic():
    rows = [{"seconds": 2.0, "phases": {"step": 1.5, "data": 0.2, "evaluate": 0.2}}] * 2
    flops = {"train": 10.0, "eval": 5.0}
    s = summarize_rounds(rows, train_samples=100, eval_samples=20, flops=flops, peak=1e3)
    assert s["round_seconds"] == 2.0 and s["samples_per_s"] == 50.0
    assert s["model_flops_per_s"] == pytest.approx((100 * 10 + 20 * 5) / 2.0)
    assert s["mfu"] == pytest.approx(550 / 1e3) and s["step_mfu"] == pytest.approx(1000 / 1.5 / 1e3)
    assert s["overhead_share"] == pytest.approx(0.25)
    assert s["phase_shares"]["other"] == pytest.approx(0.05)
    assert stepped_samples([33, 32, 31], 32) == 32 + 32 + 31  # a last batch of one is dropped


def test_small_workload_runs_the_engine_and_reports_sane_numbers():
    spec = {"backbone": "cnn_simple", "img_size": 32, "samples": 300, "test": 100,
            "clients": 3, "rounds": 3, "matmul_n": 256}  # fmt: skip
    r = run_workload(spec, threads=1)
    assert r["rounds_measured"] == 2 and len(r["history"]) == 3
    assert 0 < r["mfu"] <= 1 and 0 < r["overhead_share"] < 1
    assert sum(r["phase_shares"].values()) == pytest.approx(1.0)
    assert r["phase_shares"]["checkpoint"] > 0  # checkpoints are written and timed
    assert r["peak_rss_mb"] > 0 and r["peak_gpu_mb"] is None
    assert r["train_samples_per_round"] == 300


def test_gpu_workload_is_skipped_without_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    r = run_workload({"backbone": "cnn_simple", "img_size": 32, "device": "cuda"}, 1)
    assert "no CUDA device" in r["skipped"]


def test_matmul_rate_is_positive():
    assert matmul_flops(torch.device("cpu"), torch.float32, 128, seconds=0.05) > 1e6


def test_vit_b16_flops_match_its_known_forward_cost():
    # ViT-B/16 at 224: 17.56 GMAC per image forward (timm/fvcore), i.e. 35.1 GFLOP
    full = per_sample_flops(VIT_B, 10, 224, {"tuning": "full"}, {"name": "fedavg"})
    assert full["eval"] == pytest.approx(35.13e9, rel=0.005)
    assert full["train"] == pytest.approx(3 * full["eval"], rel=0.01)  # forward + 2× backward
    ssf = per_sample_flops(VIT_B, 10, 224, {"tuning": "ssf"}, {"name": "fedavg"})
    assert full["eval"] * 1.9 < ssf["train"] < full["train"]  # no weight gradients
    moon = per_sample_flops(VIT_B, 10, 224, {"tuning": "full"},
                            {"name": "moon", "mu": 1.0, "projection": "none"})  # fmt: skip
    assert moon["train"] == pytest.approx(full["train"] + 2 * full["eval"], rel=0.01)


def test_run_flops_counts_rounds_epochs_participation_and_evaluations():
    run = {
        "paper": "t", "seed": 0, "dataset": "cifar10", "eval_every": 2,
        "algorithm": {"name": "fedavg"},
        "partition": {"scheme": "iid", "clients": 10, "test_mode": "global"},
        "model": {"backbone": "cnn_simple", "img_size": 32, "tuning": "full"},
        "train": {"rounds": 5, "local_epochs": 3, "fraction": 0.5, "batch_size": 32},
    }  # fmt: skip
    sizes = {"cifar10": {"train": 1000, "test": 200}}
    memo: dict = {}
    f = run_flops(run, sizes, memo)
    per = per_sample_flops("cnn_simple", 10, 32, run["model"], run["algorithm"])
    assert f["train_samples"] == 5 * 0.5 * 3 * 1000
    assert f["eval_samples"] == 3 * 200  # rounds 2, 4 and the last
    assert f["flops"] == pytest.approx(f["train_samples"] * per["train"] + 600 * per["eval"])
    personal = run_flops({**run, "algorithm": {"name": "local"}}, sizes, memo)
    assert personal["eval_samples"] == 3 * 10 * 200  # each client its own model, global test
    assert math.isfinite(personal["flops"])


def test_every_paper_dataset_has_split_sizes_and_each_adaptation_is_costed():
    """The cost job reads split sizes for every dataset of the paper plan (a missing one
    failed the default's ``bench_cost`` once FedPCE's Digits came in)."""
    sizes = known_sizes(load_yaml(REPO / "config/config.yaml")["bench"]["cost"]["split_sizes"])
    plan = paper_plan(REPO)
    for name in {r["dataset"] for r in plan.runs.values()}:
        assert name in sizes, name
        per = sizes[name].get("domains")
        if per is not None:
            assert set(per) == set(DATASETS[name].domains), name
    pce = [r for r in plan.runs.values() if r["paper"] == "fedpce" and r["dataset"] == "digits"]
    run = next(r for r in pce if r["partition"]["clients"] == 40)
    memo: dict = {}
    counts = partition_counts(run, sizes)
    assert counts["clients"] == 32  # the collaborative 80 %
    t = run["train"]
    f = run_flops(run, sizes, memo)
    assert f["train_samples"] == t["rounds"] * 32 * t["local_steps"] * t["batch_size"]
    pooled = partition_counts({**run, "cv": None}, sizes)
    # the folds re-cut each client's pooled train and test shares
    assert counts["train"] + counts["own_test"] == pooled["train"] + pooled["own_test"]
    aid, entry = next((a, e) for a, e in plan.adapts.items() if e["run"] in plan.runs)
    engine = adapt_method(entry["adapt"]).run_config(plan.runs[entry["run"]], entry["adapt"])
    assert run_flops(engine, sizes, memo)["flops"] > 0, aid


def test_split_sizes_come_from_the_registry_and_the_config_holds_assumptions_only():
    """FedPCE's Digits are counted from the registry (SYN: Roy et al.'s 10,000 / 2,000 of
    §4.1), not from a second copy in the config; a dataset in both is refused."""
    assumed = load_yaml(REPO / "config/config.yaml")["bench"]["cost"]["split_sizes"]
    sizes = known_sizes(assumed)
    assert "digits" not in assumed and "cifar10" not in assumed
    assert sizes["digits"]["domains"]["syn"] == {"train": 10_000, "test": 2_000}
    assert sizes["digits"]["domains"]["usps"] == {"train": 7_291, "test": 2_007}
    assert sizes["cifar100"] == {"train": 50_000, "test": 10_000}
    with pytest.raises(ValueError, match=r"\['cifar10'\] recorded in the data registry"):
        known_sizes({**assumed, "cifar10": {"train": 1, "test": 1}})


def test_a_composites_domains_come_from_the_registry_where_it_records_them():
    """Digit-5's MNIST, SVHN and USPS were a second copy in the config (and its SynthDigits
    FedPCE's SYN counts): the registry's counts now, the config only for the releases without
    published counts; a domain given twice is refused."""
    assumed = load_yaml(REPO / "config/config.yaml")["bench"]["cost"]["split_sizes"]
    digit5 = known_sizes(assumed)["digit5"]["domains"]
    assert set(assumed["digit5"]["domains"]) == {"synthdigits", "mnistm"}
    assert digit5["svhn"] == {"train": 73_257, "test": 26_032}
    assert digit5["synthdigits"]["train"] > 400_000  # Ganin & Lempitsky's, not Roy et al.'s
    twice = {"digit5": {"domains": {**assumed["digit5"]["domains"], "usps": {"train": 1}}}}
    with pytest.raises(ValueError, match=r"digit5\.domains\.usps"):
        known_sizes({**assumed, **twice})


def test_every_fedicon_algorithm_and_test_time_method_is_costed():
    """FedTHE's first round read the client's labels, which a counted client does not have:
    the default's ``bench_cost`` failed once FedTHE entered the paper plan."""
    sizes = known_sizes(load_yaml(REPO / "config/config.yaml")["bench"]["cost"]["split_sizes"])
    plan = paper_plan(REPO)
    configs = {}
    for run in plan.runs.values():
        if run["paper"] == "fedicon":
            configs.setdefault(run["algorithm"]["name"], run)
    for entry in plan.adapts.values():
        run = plan.runs[entry["run"]]
        if run["paper"] == "fedicon":
            engine = adapt_method(entry["adapt"]).run_config(run, entry["adapt"])
            configs.setdefault(engine["algorithm"]["name"], engine)
    assert {"fedthe", "fedthe_test", "fedicon", "fedicon_test", "eata", "t3a"} <= set(configs)
    memo: dict = {}
    for name, cfg in configs.items():
        assert run_flops(cfg, sizes, memo)["flops"] > 0, name
