"""One benchmark workload: a federated run of the real engine on in-memory data, timed by
phase, its model FLOPs counted, beside the machine's own matmul rate and memory."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from fedrepro.algorithms import make_algorithm
from fedrepro.bench.machine import describe, matmul_flops
from fedrepro.cost.flops import per_sample_flops
from fedrepro.fl.build import build_model, pick_device
from fedrepro.fl.data import DeviceData
from fedrepro.fl.engine import Clients, run_rounds
from fedrepro.fl.timing import PHASES, PhaseClock
from fedrepro.memory import current_rss_mb, peak_gpu_mb, peak_rss_mb

DEFAULTS = {
    "tuning": "full",
    "algorithm": "fedavg",
    "clients": 10,
    "samples": 5000,
    "test": 1000,
    "classes": 10,
    "batch_size": 32,
    "rounds": 3,
    "local_epochs": 1,
    "lr": 0.05,
    "device": "cpu",
    "precision": "fp32",  # the papers' arithmetic; the paper-shape GPU workloads ask for bf16
    "matmul_n": 1024,
}


def synthetic_split(n: int, side: int, classes: int, seed: int, device) -> DeviceData:
    """Random uint8 images and labels held on the device, as prepared splits are."""
    gen = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, side, side, 3), generator=gen, dtype=torch.uint8)
    labels = torch.randint(0, classes, (n,), generator=gen)
    return DeviceData(images.to(device), labels.to(device), img_size=side)


def iid_clients(n: int, clients: int, n_test: int, device) -> Clients:
    """``clients`` contiguous equal shares of ``n`` samples; all evaluate on the test split."""
    bounds = torch.linspace(0, n, clients + 1).round().long().tolist()
    train = [torch.arange(a, b, device=device) for a, b in zip(bounds, bounds[1:], strict=False)]
    everything = torch.arange(n_test, device=device)
    return Clients(train, [everything] * clients, [None] * clients)


def stepped_samples(sizes: list[int], batch_size: int) -> int:
    """Samples one local epoch trains on (the engine drops a last batch of one)."""
    return sum(n - (1 if n % batch_size == 1 else 0) for n in sizes)


def run_workload(spec: dict, threads: int) -> dict:
    """Run ``spec`` (see DEFAULTS; ``backbone`` and ``img_size`` required); a dict of numbers.

    Round 1 is a warm-up and left out of the rates when there is more than one round.
    Each history row gets the resident memory sampled after its round (``rss_mb``).
    """
    spec = {**DEFAULTS, **spec}
    if spec["device"] == "cuda" and not torch.cuda.is_available():
        return {"spec": spec, "skipped": "no CUDA device on this machine"}
    device = pick_device(spec["device"], threads)
    side, classes = int(spec["img_size"]), int(spec["classes"])
    train = synthetic_split(int(spec["samples"]), side, classes, 0, device)
    test = synthetic_split(int(spec["test"]), side, classes, 1, device)
    clients = iid_clients(len(train.labels), int(spec["clients"]), len(test.labels), device)
    model_cfg = {"backbone": spec["backbone"], "img_size": side, "tuning": spec["tuning"]}
    algorithm_cfg = {"name": spec["algorithm"]}
    model = build_model(model_cfg, classes, 0, None, device)
    cfg = {
        "seed": 0,
        "checkpoint_every": 1,
        "train": {"rounds": int(spec["rounds"]), "local_epochs": int(spec["local_epochs"]),
                  "batch_size": int(spec["batch_size"]), "optimizer": "sgd",
                  "lr": float(spec["lr"]), "momentum": 0.9, "weight_decay": 5e-4,
                  "fraction": 1.0, "precision": spec["precision"]},
    }  # fmt: skip
    clock = PhaseClock(device)
    rss = []

    def log(_line: str) -> None:
        rss.append(current_rss_mb())

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp) / "checkpoint.pt"
        algorithm = make_algorithm(algorithm_cfg)
        state = run_rounds(cfg, model, algorithm, train, test, clients, ckpt, log, clock)
    rows = state.history
    for row, mb in zip(rows, rss, strict=True):
        row["rss_mb"] = mb
    measured = rows[1:] if len(rows) > 1 else rows
    flops = per_sample_flops(spec["backbone"], classes, side, model_cfg, algorithm_cfg)
    bf16 = device.type == "cuda" and spec["precision"] == "bf16"
    dtype = torch.bfloat16 if bf16 else torch.float32
    peak = matmul_flops(device, dtype, int(spec["matmul_n"]))
    per_round_train = stepped_samples([len(t) for t in clients.train], int(spec["batch_size"]))
    per_round_train *= int(spec["local_epochs"])
    return summarize_rounds(measured, per_round_train, len(test.labels), flops, peak) | {
        "spec": spec,
        "machine": describe(device),
        "matmul_dtype": str(dtype).removeprefix("torch."),
        "precision": "bf16" if bf16 else "fp32",  # what the engine ran
        "flops_per_sample": flops,
        "peak_rss_mb": peak_rss_mb(),
        "peak_gpu_mb": peak_gpu_mb(device),
        "rounds_measured": len(measured),
        "history": [{k: r[k] for k in ("round", "seconds", "phases", "rss_mb")} for r in rows],
    }


def summarize_rounds(
    rows: list[dict], train_samples: int, eval_samples: int, flops: dict, peak: float
) -> dict:
    """Rates and shares over ``rows`` (history rows with ``seconds`` and ``phases``)."""
    seconds = sum(r["seconds"] for r in rows)
    phase = {p: sum(r["phases"].get(p, 0.0) for r in rows) for p in PHASES}
    n = len(rows)
    model_flops = n * (train_samples * flops["train"] + eval_samples * flops["eval"])
    train_flops = n * train_samples * flops["train"]
    shares = {p: phase[p] / seconds for p in PHASES}
    shares["other"] = max(0.0, 1.0 - sum(shares.values()))
    return {
        "round_seconds": seconds / n,
        "train_samples_per_round": train_samples,
        "samples_per_s": n * train_samples / seconds,
        "step_samples_per_s": n * train_samples / phase["step"],
        "model_flops_per_s": model_flops / seconds,
        "step_flops_per_s": train_flops / phase["step"],
        "matmul_flops_per_s": peak,
        "mfu": model_flops / seconds / peak,
        "step_mfu": train_flops / phase["step"] / peak,
        "overhead_share": 1.0 - shares["step"],
        "phase_shares": shares,
    }
