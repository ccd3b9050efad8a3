"""Evaluation of a run's clients, each on its own model (``fedrepro.fl.engine`` calls it)."""

from __future__ import annotations

import math

import torch

from fedrepro.fl.algorithm import Algorithm
from fedrepro.fl.eval_batch import eval_batch_size
from fedrepro.fl.groups import listed, split_shared
from fedrepro.fl.local import predict
from fedrepro.fl.sampling import seeded_generator
from fedrepro.fl.tensors import put

__all__ = ["class_accuracy", "client_local", "evaluate", "group_accuracy"]


def client_local(algorithm: Algorithm, state, k: int, init_local: dict, device) -> dict:
    """Client ``k``'s local tensors: its own once it has trained, else the algorithm's initial
    ones for it (the model's, or per client as FedPCE's one-hot embeddings)."""
    local = state.local[k] if k in state.local else algorithm.initial_local(k, init_local)
    return {n: t.to(device) for n, t in local.items()}


def evaluate(model, algorithm, state, test, clients, init_local, seed, r, tcfg: dict) -> dict:
    """Per-client test accuracy, every client on its own model: one pass per model shared by
    its clients, over the images they test on, where they keep no local tensors and have no
    transforms. Clients of different models (``fedrepro.fl.groups``): ``model``,
    ``algorithm`` and ``init_local`` are lists, one per group. ``tcfg`` (the run's ``train``
    block) sets the evaluation batch and precision."""
    opts = {
        "batch_size": eval_batch_size(tcfg, test.side),
        "precision": tcfg.get("precision", "fp32"),
        "cache_query": bool(tcfg.get("cache_query", True)),
    }
    models, algorithms, inits = listed(model), listed(algorithm), listed(init_local)
    device = next(models[0].parameters()).device
    arch = clients.model_of()
    per_client: list = [None] * len(clients.test)
    for g, shared in enumerate(split_shared(state.shared, len(models))):
        model, algorithm = models[g], algorithms[g]
        members = [k for k in range(len(clients.test)) if arch[k] == g]
        put(model, shared)
        if not algorithm.personalized and not any(clients.transforms[k] for k in members):
            # the images these clients test on, each once (a cohort may cover part of the split)
            tests = [clients.test[k] for k in members]
            wanted, inverse = torch.unique(torch.cat(tests), return_inverse=True)
            correct, losses = predict(model, test, wanted, **opts)
            for k, at in zip(members, inverse.split([len(t) for t in tests]), strict=True):
                per_client[k] = (correct[at], losses[at])
            continue
        for k in members:
            if algorithm.personalized:
                put(model, client_local(algorithm, state, k, inits[g], device))
            gen = seeded_generator(seed, r, k, 0xE7A1, device=device)
            per_client[k] = predict(
                algorithm.predictor(model, k, gen),
                test,
                clients.test[k],
                gen,
                clients.transforms[k],
                **opts,
            )
    # every client's hits, loss sum and accuracy in one read (no wait per client)
    sizes = [len(c) for c, _ in per_client]
    sums = torch.stack(
        [
            torch.stack(
                [c.sum().double(), losses.sum().double(), c.float().mean().double() * 100.0]
            )
            for c, losses in per_client
        ]  # fmt: skip
    ).tolist()
    n = sum(sizes)
    hits = sum(s[0] for s in sums)
    accs = [s[2] for s, size in zip(sums, sizes, strict=True) if size]
    row = {
        "acc": 100.0 * hits / max(n, 1),
        "acc_mean": sum(accs) / max(len(accs), 1),
        "loss": sum(s[1] for s in sums) / max(n, 1),
        "acc_per_client": accs,
        "acc_per_class": class_accuracy(
            [c for c, _ in per_client], clients.test, test.labels, test.num_classes()
        ),
    }
    if any(g is not None for g in clients.groups):
        counted = [(s[0], size) for s, size in zip(sums, sizes, strict=True)]
        row["acc_per_group"] = group_accuracy(counted, clients.groups)
        row["acc_per_group_mean"] = group_accuracy(counted, clients.groups, pooled=False)
    return row


def class_accuracy(
    correct: list[torch.Tensor],
    test_idx: list[torch.Tensor],
    labels: torch.Tensor,
    num_classes: int | None = None,
) -> dict[str, float]:
    """Per class some client is tested on (keyed by the class index, in order), the mean over
    those clients of each one's accuracy on its test images of that class (FedHPL Fig. 5).
    The hits per class are a sum by index (``index_add_``: deterministic on CUDA, where a
    weighted ``bincount`` is not); ``num_classes`` defaults to the labels' largest + 1."""
    if num_classes is None:
        num_classes = int(labels.max()) + 1 if len(labels) else 0
    rows = []
    for c, idx in zip(correct, test_idx, strict=True):
        y = labels[idx]
        seen = torch.bincount(y, minlength=num_classes).double()
        hits = seen.new_zeros(num_classes).index_add_(0, y, c.double())
        rows.append(torch.where(seen > 0, 100.0 * hits / seen.clamp(min=1), torch.nan))
    if not rows:
        return {}
    mean = torch.stack(rows).nanmean(0).tolist()
    return {str(k): v for k, v in enumerate(mean) if not math.isnan(v)}


def group_accuracy(
    correct: list[torch.Tensor] | list[tuple[float, int]],
    groups: list[str | None],
    pooled: bool = True,
) -> dict[str, float]:
    """Accuracy per group of clients (FedPCE's Table 2: per degradation): pooled over the
    group's test images, or (``pooled`` False) the mean over its clients of each one's
    accuracy, as Table 2's caption says (a client without test images counts in neither).
    ``correct``: each client's per-sample correctness, or its (hits, test images) counted."""
    hits: dict[str, list[float]] = {}
    total: dict[str, list[int]] = {}
    for c, g in zip(correct, groups, strict=True):
        got, size = (float(c.sum()), len(c)) if isinstance(c, torch.Tensor) else c
        if g is not None and size:
            hits.setdefault(g, []).append(got)
            total.setdefault(g, []).append(size)
    if pooled:
        return {g: 100.0 * sum(hits[g]) / sum(total[g]) for g in hits}
    return {
        g: sum(100.0 * h / n for h, n in zip(hits[g], total[g], strict=True)) / len(hits[g])
        for g in hits
    }
