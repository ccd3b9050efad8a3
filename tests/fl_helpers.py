"""A tiny federated problem on random tensors, shared by the engine and algorithm tests."""

from __future__ import annotations

import torch
from torch import nn

from fedrepro.algorithms import make_algorithm
from fedrepro.fl.data import DeviceData
from fedrepro.fl.engine import Clients, run_rounds


class TinyNet(nn.Module):
    """Conv + batch norm + linear head: enough to exercise every tensor role."""

    def __init__(self, num_classes: int = 3):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, num_classes)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean((2, 3)))

    def get_classifier(self):
        return self.fc


def problem(num_clients=4, per_client=24, seed=0, sizes=None):
    gen = torch.Generator().manual_seed(seed)
    sizes = sizes or [per_client] * num_clients
    n = sum(sizes)
    labels = torch.randint(0, 3, (n,), generator=gen)
    images = torch.rand(n, 6, 6, 3, generator=gen) * 80 + labels[:, None, None, None] * 60
    data = DeviceData(images.to(torch.uint8), labels)
    bounds = torch.tensor([0, *sizes]).cumsum(0).tolist()
    idx = [torch.arange(bounds[i], bounds[i + 1]) for i in range(num_clients)]
    clients = Clients(idx, idx, [None] * num_clients)
    return data, clients


def spy_client_end(alg, seen: list) -> None:
    """Record ``(round, client, what it downloaded, its payload)`` of every client update."""
    client_end = alg.client_end

    def spy_end(ctx):
        payload = client_end(ctx)
        seen.append((ctx.round, ctx.client, dict(ctx.downloaded), payload))
        return payload

    alg.client_end = spy_end


def train_cfg(**over):
    cfg = {
        "seed": 0,
        "train": {"rounds": 3, "local_epochs": 1, "batch_size": 8, "optimizer": "sgd",
                  "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4, "fraction": 1.0},
    }  # fmt: skip
    for k, v in over.items():
        if k in cfg["train"] or k in ("rounds", "fraction", "momentum", "local_epochs"):
            cfg["train"][k] = v
        else:
            cfg[k] = v
    return cfg


def run(algorithm: dict, cfg=None, data=None, clients=None, model_seed=0, **kw):
    data_, clients_ = problem()
    data = data or data_
    clients = clients or clients_
    torch.manual_seed(model_seed)
    model = TinyNet()
    alg = make_algorithm(algorithm)
    kw.setdefault("log", lambda _: None)
    state = run_rounds(cfg or train_cfg(), model, alg, data, data, clients, **kw)
    return state, alg, model


def federate(cfg: dict, model: nn.Module, rounds: int = 3, data=None, clients=None, **kw):
    """``model``'s federation of 3 clients under algorithm ``cfg`` for ``rounds``:
    (state, the algorithm, every client update as ``spy_client_end`` records it)."""
    if data is None:
        data, clients = problem(num_clients=3, per_client=24)
    alg = make_algorithm(cfg)
    seen: list = []
    spy_client_end(alg, seen)
    kw.setdefault("log", lambda _: None)
    state = run_rounds(train_cfg(rounds=rounds), model, alg, data, data, clients, **kw)
    return state, alg, seen


class Killed(Exception):
    """Stands for a job killed mid-run."""


def dies_at(round_idx: int):
    """A run's ``log`` that dies, as a killed job does, when the engine logs round ``round_idx``."""

    def die(msg: str) -> None:
        if msg.startswith(f"round {round_idx}/"):
            raise Killed

    return die


def run_killed_at(round_idx: int, algorithm: dict, cfg: dict, checkpoint) -> None:
    """Run until the engine logs round ``round_idx``, then die as a killed job does."""
    try:
        run(algorithm, cfg, checkpoint=checkpoint, log=dies_at(round_idx))
    except Killed:
        return
    raise AssertionError(f"the run never reached round {round_idx}")


def untimed(rows: list[dict]) -> list[dict]:
    """History rows without their wall times (what differs between identical runs)."""
    return [{k: v for k, v in r.items() if k not in ("seconds", "eval_seconds")} for r in rows]
