"""Optimisers and per-round learning-rate schedules."""

from __future__ import annotations

import math

import torch

from fedrepro.device import reads_are_free


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


def group_lr(train: dict, group: dict, round_idx: int) -> float:
    """The learning rate of one ``train.param_groups`` entry in round ``round_idx``: the run's
    schedule with the group's own start (``lr``) and floor (``min_lr``, default the run's)."""
    sched = dict(train.get("schedule") or {"kind": "constant"})
    if "min_lr" in group:
        sched["min_lr"] = group["min_lr"]
    return lr_at({**train, "lr": group["lr"], "schedule": sched}, round_idx)


def param_groups(model: torch.nn.Module, train: dict, round_idx: int) -> list:
    """What a client's optimiser trains in round ``round_idx``: the trainable parameters,
    split by ``train.param_groups`` (``[{match, lr, min_lr?}]``, the first entry whose
    ``match`` prefixes a parameter's name takes it; FedPCE's MLP and embedding rates) with
    the rest at the run's rate. Without groups, the plain parameter list."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    specs = train.get("param_groups") or []
    if not specs:
        return [p for _, p in named]
    groups = [{"params": [], "lr": group_lr(train, g, round_idx)} for g in specs]
    rest = {"params": [], "lr": lr_at(train, round_idx)}
    for name, p in named:
        hit = next((i for i, g in enumerate(specs) if name.startswith(g["match"])), None)
        (rest if hit is None else groups[hit])["params"].append(p)
    return [g for g in [*groups, rest] if g["params"]]


def optimizer_state(opt: torch.optim.Optimizer) -> list[dict]:
    """Per-parameter optimiser state (Adam's moments and step, momentum buffers), in the
    order of the optimiser's parameters; learning rates are not part of it. The tensors are
    handed over, not copied: the round's optimiser is dropped after it."""
    params = [p for g in opt.param_groups for p in g["params"]]
    return [dict(opt.state[p]) for p in params]


def load_optimizer_state(opt: torch.optim.Optimizer, saved: list[dict]) -> None:
    """Hand ``optimizer_state`` to a new optimiser over the same parameters: moments on the
    parameter's device, scalar steps where this optimiser keeps them (CPU unless fused);
    tensors already there are used as they are (a checkpoint's are moved)."""
    params = [p for g in opt.param_groups for p in g["params"]]
    if len(saved) != len(params):
        raise ValueError(f"optimizer state for {len(saved)} tensors; optimiser has {len(params)}")
    steps_on_device = bool(opt.defaults.get("fused") or opt.defaults.get("capturable"))
    for p, state in zip(params, saved, strict=True):
        if state:
            opt.state[p] = {
                k: _on(v, p.device if steps_on_device or getattr(v, "ndim", 0) else "cpu")
                for k, v in state.items()
            }


def _on(v, device):
    """A tensor on ``device`` (moved only when elsewhere); anything else (SGD's ``None``
    buffer) as is."""
    return v.to(device) if isinstance(v, torch.Tensor) else v


def make_optimizer(params: list, train: dict, lr: float):
    """A client's optimiser over ``params`` (tensors, or ``param_groups`` dicts with their own
    ``lr``). The engine makes a fresh one per client per round, as the papers' FL loops do,
    and restores a client's state into it where ``train.optimizer_state`` is ``client``."""
    name = train.get("optimizer", "sgd")
    wd = float(train.get("weight_decay", 0.0))
    tensors = [p for g in params for p in (g["params"] if isinstance(g, dict) else [g])]
    # fused on a GPU: the step count lives on the device, so a step reads nothing back (the
    # CPU's own, unfused, reads it on the host for nothing; the GPU's paths fuse it there too)
    fused = bool(tensors) and tensors[0].device.type != "meta" and not reads_are_free(tensors[0])
    if name == "sgd":
        return torch.optim.SGD(
            params, lr=lr, momentum=float(train.get("momentum", 0.0)), weight_decay=wd, fused=fused
        )
    if name == "adam":
        betas = tuple(train.get("betas", (0.9, 0.999)))
        return torch.optim.Adam(params, lr=lr, betas=betas, weight_decay=wd, fused=fused)
    raise ValueError(f"train.optimizer: unknown '{name}' (allowed: sgd, adam)")
