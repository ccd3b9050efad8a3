"""Clients of different models in one run (FedHPL's heterogeneous clients, App. C.1.2).

A run's clients fall into architecture groups, one per distinct backbone of
``model.client_backbones`` (in order of first appearance; one group without it). Each group
has one module, whose frozen weights are held once, and its own algorithm object, set up on
that module: the tensor roles, the parameter aggregation and any per-model state are the
group's, and each client's trainable tensors are swapped into its group's module as the engine
swaps them into the one module of a homogeneous run. The server state that crosses models
(FedHPL's global logits) comes from ``Algorithm.exchange``, which the first group's algorithm
runs on every client's payload; the others take its ``exchange_state`` (``share_exchange``).

The shared tensors of several groups live in one flat dict (a checkpoint's and a run's
``state.safetensors`` layout), group ``g``'s names prefixed with ``model<g>.``; a run of one
group keeps its names as they are.
"""

from __future__ import annotations

from typing import TypeVar

import torch

from fedrepro.fl.algorithm import Algorithm

T = TypeVar("T")

__all__ = ["architectures", "join_shared", "listed", "share_exchange", "split_shared"]


def listed(x: T | list[T]) -> list[T]:
    """``x`` as a list of one per group (a homogeneous run's one model or algorithm)."""
    return list(x) if isinstance(x, list | tuple) else [x]


def architectures(model_cfg: dict, num_clients: int) -> tuple[list[str], list[int]]:
    """The run's distinct backbones in order of first appearance, and each client's group:
    ``model.client_backbones`` (one a client), else ``model.backbone`` for every client."""
    names = model_cfg.get("client_backbones")
    if names is None:
        return [model_cfg["backbone"]], [0] * num_clients
    if len(names) != num_clients:
        raise ValueError(
            f"model.client_backbones: {len(names)} backbones for {num_clients} clients"
        )
    if model_cfg["backbone"] not in names:
        raise ValueError(
            f"model.backbone: {model_cfg['backbone']!r} is none of model.client_backbones"
        )
    distinct = list(dict.fromkeys(names))
    return distinct, [distinct.index(n) for n in names]


def _prefix(g: int) -> str:
    return f"model{g}."


def split_shared(shared: dict[str, torch.Tensor], count: int) -> list[dict[str, torch.Tensor]]:
    """One dict of shared tensors per group from the run's flat dict."""
    if count == 1:
        return [shared]
    return [
        {k.removeprefix(_prefix(g)): v for k, v in shared.items() if k.startswith(_prefix(g))}
        for g in range(count)
    ]


def join_shared(parts: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The run's flat dict of shared tensors from one dict per group."""
    if len(parts) == 1:
        return parts[0]
    return {f"{_prefix(g)}{k}": v for g, part in enumerate(parts) for k, v in part.items()}


def share_exchange(algorithms: list[Algorithm]) -> None:
    """Every group's algorithm takes the first one's ``exchange_state`` (after set-up, a
    resume and each exchange). An algorithm that exchanges without saying what it keeps
    cannot run across models."""
    lead, *others = algorithms
    if not others:
        return
    own = type(lead)
    if own.exchange is not Algorithm.exchange and not lead.exchange_state():
        raise ValueError(
            f"algorithm {lead.name}: exchanges without naming what it keeps (exchanged), so "
            "it cannot run "
            "clients of different models (model.client_backbones)"
        )
    state = lead.exchange_state()
    for a in others:
        a.load_exchange_state(state)
