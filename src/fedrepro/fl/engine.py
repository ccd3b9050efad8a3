"""The one federated round loop that every algorithm runs in.

Determinism: every random draw derives from (seed, round, client), so a job
resumed from a checkpoint ends with exactly the numbers of an uninterrupted one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch import nn

from fedrepro.data.partitions.folds import kfold
from fedrepro.data.transforms.clients import apply_transform
from fedrepro.fl.algorithm import Algorithm, ClientCtx, Payload
from fedrepro.fl.checkpoint import load_checkpoint, save_checkpoint
from fedrepro.fl.data import DeviceData
from fedrepro.fl.local import EVAL_BATCH, predict, train_epochs
from fedrepro.fl.optim import (
    load_optimizer_state,
    lr_at,
    make_optimizer,
    optimizer_state,
    param_groups,
)
from fedrepro.fl.sampling import derive_seed, sample_clients
from fedrepro.fl.tensors import all_finite, named_state, nbytes, put, take
from fedrepro.fl.timing import NULL_CLOCK

COHORTS = ("all", "collaborative", "new")


def in_cohort(client: dict, cohort: str) -> bool:
    """Whether a partition's client record belongs to ``cohort``."""
    return cohort == "all" or bool(client.get("new", False)) == (cohort == "new")


@dataclass
class Clients:
    """Per-client index tensors (on the device) and input transforms."""

    train: list[torch.Tensor]
    test: list[torch.Tensor]
    transforms: list[Callable | None]
    groups: list[str | None] = field(default_factory=list)  # per client: reported under

    @classmethod
    def from_partition(
        cls,
        partition: dict,
        num_test: int,
        device,
        cohort: str = "all",
        cv: dict | None = None,
        num_train: int = 0,
        images: int | None = None,
    ) -> Clients:
        """The clients of ``cohort`` (``all``; FedPCE's ``collaborative`` or ``new`` ones).

        With ``cv`` (``{"folds": K, "fold": k}``) each client's train and test shares are
        pooled and cut into K folds (``fedrepro.data.partitions.folds``): the indices then
        point into the pooled data, train split first (test index i is ``num_train + i``).
        ``images`` keeps the first that many of each client's training images (FedPCE's Fig. 4)."""
        if cohort not in COHORTS:
            raise ValueError(f"cohort: {cohort!r} (allowed: {', '.join(COHORTS)})")
        as_idx = partial(torch.as_tensor, dtype=torch.long, device=device)
        everything = torch.arange(num_test, device=device)
        glob = partition.get("test_mode") == "global"
        if cv is not None and glob:
            raise ValueError("cv: folds need each client's own test share (test_mode split)")
        train, test, transforms, groups = [], [], [], []
        for c in partition["clients"]:
            if not in_cohort(c, cohort):
                continue
            if cv is None:
                train.append(as_idx(c["train"]))
                test.append(everything if glob else as_idx(c["test"]))
            else:
                pool = np.concatenate(
                    [c["train"], np.asarray(c["test"], dtype=np.int64) + num_train]
                )
                fit, val = kfold(len(pool), int(cv["folds"]), int(cv["fold"]))
                train.append(as_idx(pool[fit]))
                test.append(as_idx(pool[val]))
            spec = c.get("transform")
            transforms.append(None if spec is None else partial(_transform, spec=spec))
            groups.append(c.get("group"))
        if not train:
            raise ValueError(f"cohort {cohort!r}: the partition has no such clients")
        if images is not None:
            train = [t[:images] for t in train]
        return cls(train, test, transforms, groups)

    def __len__(self) -> int:
        return len(self.train)


def _transform(x: torch.Tensor, generator: torch.Generator, spec: dict) -> torch.Tensor:
    return apply_transform(x, spec, generator)


@dataclass
class RunState:
    """Everything a checkpoint restores."""

    round: int = 0
    shared: dict = field(default_factory=dict)
    local: dict = field(default_factory=dict)  # client -> {key: tensor}
    history: list = field(default_factory=list)
    optim: dict = field(default_factory=dict)  # client -> optimiser state (optimizer_state)


def _generator(device, *parts: int) -> torch.Generator:
    gen = torch.Generator(device="cpu")
    gen.manual_seed(derive_seed(*parts))
    return gen


def run_rounds(
    cfg: dict,
    model: nn.Module,
    algorithm: Algorithm,
    train: DeviceData,
    test: DeviceData,
    clients: Clients,
    checkpoint: Path | None = None,
    log: Callable[[str], None] = print,
    clock=NULL_CLOCK,
    start_local: dict[int, dict] | None = None,
) -> RunState:
    """Train `cfg["train"]["rounds"]` rounds; resume from `checkpoint` when it exists.

    A ``fedrepro.fl.timing.PhaseClock`` as ``clock`` adds each round's seconds per phase
    to its history row (``phases``); the default clock times nothing. ``start_local``
    (client -> tensors) gives clients their own starting local tensors (an adaptation of a
    run whose clients kept some).
    """
    tcfg = cfg["train"]
    seed = int(cfg["seed"])
    rounds = int(tcfg["rounds"])
    every = int(cfg.get("checkpoint_every", 1))
    algorithm.configure([len(t) for t in clients.train], tcfg, train, clients.train)
    algorithm.setup(model, len(clients))
    if start_local:  # a client's own tensors are its own even where they no longer train
        present = set(named_state(model)) - set(algorithm.shared)
        own = {n for v in start_local.values() for n in v if n in present}
        algorithm.local = sorted(set(algorithm.local) | own)
    init_local = take(model, algorithm.local)
    own = {  # complete per client: the model's local tensors, then the client's own ones
        k: {**init_local, **{n: t for n, t in v.items() if n in init_local}}
        for k, v in (start_local or {}).items()
    }
    state = RunState(shared=take(model, algorithm.shared), local=own)
    saved = load_checkpoint(checkpoint) if checkpoint else None
    if saved is not None:
        state = RunState(
            saved["round"],
            saved["shared"],
            saved["local"],
            saved["history"],
            saved.get("optim", {}),
        )
        algorithm.load_state_dict(saved["algorithm"])
        log(f"resumed from round {state.round}")
    device = next(model.parameters()).device
    state.shared = {k: v.to(device) for k, v in state.shared.items()}
    keep_optim = tcfg.get("optimizer_state", "fresh") == "client"
    unlabeled = replace(train, images=test.images, labels=torch.full_like(test.labels, -1))

    first, started = state.round + 1, time.perf_counter()
    for r in range(first, rounds + 1):
        t0 = time.perf_counter()
        lr = lr_at(tcfg, r)
        picked = sample_clients(
            len(clients), float(tcfg.get("fraction", 1.0)), r, seed, tcfg.get("replacement", False)
        )
        down = algorithm.downlink(state.shared, r)
        payloads: list[Payload] = []
        down_bytes = 0
        for pos, k in enumerate(picked):
            received = algorithm.downlink_to(k, down)
            down_bytes += nbytes(received)
            put(model, state.shared)
            put(model, client_local(algorithm, state, k, init_local, device))
            ctx = ClientCtx(
                k,
                model,
                state.shared,
                lr,
                float(tcfg.get("momentum", 0.0)),
                len(clients.train[k]),
                round=r,
                data=train,
                idx=clients.train[k],
                downloaded=received,
            )
            epochs = int(tcfg.get("local_epochs", 1))
            phases = algorithm.local_phases(r, epochs)
            if phases is not None and keep_optim:
                raise ValueError("train.optimizer_state: client cannot keep phased optimisers")
            opt = None
            if phases is None:
                opt = client_optimizer(
                    model, tcfg, r, lr, state.optim.get(k) if keep_optim else None
                )
            algorithm.client_begin(ctx)
            torch.manual_seed(derive_seed(seed, r, k, pos, 1))
            gen = _generator(device, seed, r, k, pos)
            on_test = algorithm.fit_split(r) == "test"
            batch = algorithm.batch_size(r)
            fit = partial(
                train_epochs,
                model,
                unlabeled if on_test else train,
                clients.test[k] if on_test else clients.train[k],
                tcfg if batch is None else {**tcfg, "batch_size": batch},
                lr,
                generator=gen,
                transform=clients.transforms[k],
                correct_gradients=lambda ctx=ctx: algorithm.correct_gradients(ctx),
                objective=partial(algorithm.objective, ctx),
                clock=clock,
                views=algorithm.views(r),
            )
            if phases is None:
                ctx.steps, _ = fit(epochs=epochs, optimizer=opt)
            else:
                for keys, phase_epochs in phases:
                    with trainable_only(model, keys):
                        phase_opt = client_optimizer(model, tcfg, r, lr, None)
                        ctx.steps += fit(epochs=phase_epochs, optimizer=phase_opt)[0]
            if keep_optim and opt is not None:
                state.optim[k] = optimizer_state(opt)
            payloads.append(algorithm.client_end(ctx))
            if algorithm.local:
                state.local[k] = take(model, algorithm.local)
        with clock.phase("aggregate"):
            finite = [p for p in payloads if all_finite(p.all_tensors())]
            keep = finite if cfg.get("nonfinite", "exclude") == "exclude" else payloads
            if keep and algorithm.exchanges():
                state.shared = algorithm.aggregate(state.shared, keep)
            diverged = len(finite) < len(payloads) or not all_finite(state.shared)
        row = {
            "round": r,
            "lr": lr,
            "clients": len(picked),
            "up_bytes": sum(nbytes(p.all_tensors()) for p in payloads),
            "up_scalars": sum(t.numel() for p in payloads for t in p.all_tensors().values()),
            "down_bytes": down_bytes,
            "diverged": diverged,
            "excluded": len(payloads) - len(keep),
        }
        if r == rounds or r % int(cfg.get("eval_every", 1)) == 0:
            t_eval = time.perf_counter()
            with clock.phase("evaluate"):
                row.update(
                    evaluate(model, algorithm, state, test, clients, init_local, seed, r, tcfg)
                )
            row["eval_seconds"] = time.perf_counter() - t_eval  # metrics.json `seconds`
            # finite weights can still give non-finite outputs (a negative BN running variance
            # from FedNova's normalised buffers): the round is recorded as diverged too
            row["diverged"] = diverged = diverged or not math.isfinite(row["loss"])
        row["seconds"] = time.perf_counter() - t0
        state.history.append(row)
        state.round = r
        if checkpoint and (r % every == 0) and r < rounds:
            with clock.phase("checkpoint"):
                _save(checkpoint, r, state, algorithm)
            row["seconds"] = time.perf_counter() - t0  # the saved copy has the time before it
        if phases := clock.take():
            row["phases"] = phases
        eta = (time.perf_counter() - started) / (r - first + 1) * (rounds - r)
        log(
            f"round {r}/{rounds} acc={row.get('acc', math.nan):.2f} lr={lr:.4g} "
            f"clients={len(picked)}{' DIVERGED' if diverged else ''} {row['seconds']:.1f}s "
            f"eta {_duration(eta)}"
        )
    return state


def _duration(seconds: float) -> str:
    """``1h02m``, ``3m05s`` or ``12s``: a run's remaining time at a glance."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def _save(checkpoint: Path, r: int, state: RunState, algorithm: Algorithm) -> None:
    save_checkpoint(
        checkpoint,
        {
            "round": r,
            "shared": {k: v.cpu() for k, v in state.shared.items()},
            "local": state.local,
            "history": state.history,
            "algorithm": algorithm.state_dict(),
            "optim": state.optim,
        },
    )


def client_optimizer(model: nn.Module, tcfg: dict, r: int, lr: float, saved: list | None):
    """Client's optimiser for round ``r`` (its kept state restored when given); None when
    nothing trains (a client that is only evaluated, as FedAvg's in FedPCE's client training)."""
    groups = param_groups(model, tcfg, r)
    if not groups:
        return None
    opt = make_optimizer(groups, tcfg, lr)
    if saved is not None:
        load_optimizer_state(opt, saved)
    return opt


@contextmanager
def trainable_only(model: nn.Module, keys: set[str]):
    """Only ``keys`` among the trainable parameters train inside the block."""
    frozen = [p for n, p in model.named_parameters() if p.requires_grad and n not in keys]
    for p in frozen:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in frozen:
            p.requires_grad_(True)


def client_local(algorithm: Algorithm, state: RunState, k: int, init_local: dict, device) -> dict:
    """Client ``k``'s local tensors: its own once it has trained, else the algorithm's initial
    ones for it (the model's, or per client as FedPCE's one-hot embeddings)."""
    local = state.local[k] if k in state.local else algorithm.initial_local(k, init_local)
    return {n: t.to(device) for n, t in local.items()}


def evaluate(model, algorithm, state, test, clients, init_local, seed, r, tcfg: dict) -> dict:
    """Per-client test accuracy; one pass for a shared model without client transforms.
    ``tcfg`` (the run's ``train`` block) sets the evaluation batch and precision."""
    opts = {
        "batch_size": int(tcfg.get("eval_batch_size", EVAL_BATCH)),
        "precision": tcfg.get("precision", "fp32"),
        "cache_query": bool(tcfg.get("cache_query", True)),
    }
    device = next(model.parameters()).device
    put(model, state.shared)
    per_client = []
    if not algorithm.personalized and not any(clients.transforms):
        everything = torch.arange(len(test.labels), device=device)
        correct, losses = predict(model, test, everything, **opts)
        for idx in clients.test:
            per_client.append((correct[idx], losses[idx]))
    else:
        for k, idx in enumerate(clients.test):
            if algorithm.personalized:
                put(model, client_local(algorithm, state, k, init_local, device))
            gen = _generator(device, seed, r, k, 0xE7A1)
            per_client.append(
                predict(
                    algorithm.predictor(model, k, gen),
                    test,
                    idx,
                    gen,
                    clients.transforms[k],
                    **opts,
                )
            )
    n = sum(len(c) for c, _ in per_client)
    hits = sum(float(c.sum()) for c, _ in per_client)
    loss = sum(float(losses.sum()) for _, losses in per_client)
    accs = [100.0 * float(c.float().mean()) for c, _ in per_client if len(c)]
    row = {
        "acc": 100.0 * hits / max(n, 1),
        "acc_mean": sum(accs) / max(len(accs), 1),
        "loss": loss / max(n, 1),
        "acc_per_client": accs,
        "acc_per_class": class_accuracy([c for c, _ in per_client], clients.test, test.labels),
    }
    if any(g is not None for g in clients.groups):
        correct = [c for c, _ in per_client]
        row["acc_per_group"] = group_accuracy(correct, clients.groups)
        row["acc_per_group_mean"] = group_accuracy(correct, clients.groups, pooled=False)
    return row


def class_accuracy(
    correct: list[torch.Tensor], test_idx: list[torch.Tensor], labels: torch.Tensor
) -> dict[str, float]:
    """Per class some client is tested on (keyed by the class index, in order), the mean over
    those clients of each one's accuracy on its test images of that class (FedHPL Fig. 5)."""
    num_classes = int(labels.max()) + 1 if len(labels) else 0
    rows = []
    for c, idx in zip(correct, test_idx, strict=True):
        y = labels[idx]
        seen = torch.bincount(y, minlength=num_classes).double()
        hits = torch.bincount(y, weights=c.double(), minlength=num_classes)
        rows.append(torch.where(seen > 0, 100.0 * hits / seen.clamp(min=1), torch.nan))
    if not rows:
        return {}
    mean = torch.stack(rows).nanmean(0).tolist()
    return {str(k): v for k, v in enumerate(mean) if not math.isnan(v)}


def group_accuracy(
    correct: list[torch.Tensor], groups: list[str | None], pooled: bool = True
) -> dict[str, float]:
    """Accuracy per group of clients (FedPCE's Table 2: per degradation): pooled over the
    group's test images, or (``pooled`` False) the mean over its clients of each one's
    accuracy, as Table 2's caption says (a client without test images counts in neither)."""
    hits: dict[str, list[float]] = {}
    total: dict[str, list[int]] = {}
    for c, g in zip(correct, groups, strict=True):
        if g is not None and len(c):
            hits.setdefault(g, []).append(float(c.sum()))
            total.setdefault(g, []).append(len(c))
    if pooled:
        return {g: 100.0 * sum(hits[g]) / sum(total[g]) for g in hits}
    return {
        g: sum(100.0 * h / n for h, n in zip(hits[g], total[g], strict=True)) / len(hits[g])
        for g in hits
    }
