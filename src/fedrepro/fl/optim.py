"""Optimisers and per-round learning-rate schedules."""

from __future__ import annotations

import math

import torch


def lr_at(train: dict, round_idx: int) -> float:
    """Learning rate of round `round_idx` (1-based).

    Milestones follow MultiStepLR stepped once per round: milestone m decays the
    rate for every round after the first m rounds. Exponential multiplies by ``gamma`` once
    per round (FedDC: 0.998).
    """
    base = float(train["lr"])
    sched = train.get("schedule") or {"kind": "constant"}
    kind = sched.get("kind", "constant")
    done = round_idx - 1
    if kind == "constant":
        return base
    if kind == "milestones":
        passed = sum(1 for m in sched.get("milestones", []) if done >= m)
        return base * float(sched.get("gamma", 0.1)) ** passed
    if kind == "exponential":
        return base * float(sched["gamma"]) ** done
    if kind == "cosine":
        total = max(int(train["rounds"]), 1)
        floor = float(sched.get("min_lr", 0.0))
        return floor + (base - floor) * 0.5 * (1 + math.cos(math.pi * done / total))
    raise ValueError(
        f"train.schedule.kind: unknown '{kind}' "
        "(allowed: constant, milestones, exponential, cosine)"
    )


def make_optimizer(params: list[torch.nn.Parameter], train: dict, lr: float):
    """A fresh optimiser per client per round, as the papers' FL loops do."""
    name = train.get("optimizer", "sgd")
    wd = float(train.get("weight_decay", 0.0))
    fused = bool(params) and params[0].is_cuda
    if name == "sgd":
        return torch.optim.SGD(
            params, lr=lr, momentum=float(train.get("momentum", 0.0)), weight_decay=wd, fused=fused
        )
    if name == "adam":
        betas = tuple(train.get("betas", (0.9, 0.999)))
        return torch.optim.Adam(params, lr=lr, betas=betas, weight_decay=wd, fused=fused)
    raise ValueError(f"train.optimizer: unknown '{name}' (allowed: sgd, adam)")
