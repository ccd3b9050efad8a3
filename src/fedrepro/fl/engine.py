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
from fedrepro.fl.evaluation import class_accuracy, client_local, evaluate, group_accuracy
from fedrepro.fl.groups import join_shared, listed, share_exchange, split_shared
from fedrepro.fl.local import train_epochs
from fedrepro.fl.optim import (
    load_optimizer_state,
    lr_at,
    make_optimizer,
    optimizer_state,
    param_groups,
)
from fedrepro.fl.sampling import derive_seed, sample_clients, seeded_generator
from fedrepro.fl.tensors import all_finite, named_state, nbytes, put, take
from fedrepro.fl.timing import NULL_CLOCK
from fedrepro.logs import Pace, duration

COHORTS = ("all", "collaborative", "new")
__all__ = [  # evaluation's names stay importable from the engine
    "COHORTS", "Clients", "RunState", "class_accuracy", "client_local", "evaluate",
    "group_accuracy", "in_cohort", "run_rounds",
]  # fmt: skip


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
    architecture: list[int] = field(default_factory=list)  # per client: its model (none: 0)

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
        test_images: int | None = None,
    ) -> Clients:
        """The clients of ``cohort`` (``all``; FedPCE's ``collaborative`` or ``new`` ones).

        With ``cv`` (``{"folds": K, "fold": k}``) each client's train and test shares are
        pooled and cut into K folds (``fedrepro.data.partitions.folds``): the indices then
        point into the pooled data, train split first (test index i is ``num_train + i``).
        ``images`` keeps the first that many of each client's training images (FedPCE's Fig. 4);
        ``test_images`` the first that many of its test images (the paper-shape smoke's)."""
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
        if test_images is not None:
            test = [t[:test_images] for t in test]
        return cls(train, test, transforms, groups)

    def __len__(self) -> int:
        return len(self.train)

    def model_of(self) -> list[int]:
        """Each client's architecture group (``fedrepro.fl.groups``): 0 for all by default."""
        return self.architecture or [0] * len(self)


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


def run_rounds(
    cfg: dict,
    model: nn.Module | list[nn.Module],
    algorithm: Algorithm | list[Algorithm],
    train: DeviceData,
    test: DeviceData,
    clients: Clients,
    checkpoint: Path | None = None,
    log: Callable[[str], None] = print,
    clock=NULL_CLOCK,
    start_local: dict[int, dict] | None = None,
    pace: Pace | None = None,
) -> RunState:
    """Train `cfg["train"]["rounds"]` rounds; resume from `checkpoint` when it exists.

    Clients of different models (``fedrepro.fl.groups``): ``model`` and ``algorithm`` are
    lists, one per architecture group, and ``clients.architecture`` gives each client's.
    A ``fedrepro.fl.timing.PhaseClock`` as ``clock`` adds each round's seconds per phase
    to its history row (``phases``); the default clock times nothing. ``start_local``
    (client -> tensors) gives clients their own starting local tensors (an adaptation of a
    run whose clients kept some).

    ``log`` gets one line per round: its mean training loss over the clients' steps (the
    loss each client's training already read once, weighted by its steps), the accuracy
    where the round is evaluated, and the time left of the job at ``pace`` (a job's
    ``fedrepro.logs.Pace`` over the rounds of all its runs; default: this run's rounds).
    """
    tcfg = cfg["train"]
    seed = int(cfg["seed"])
    rounds = int(tcfg["rounds"])
    every = int(cfg.get("checkpoint_every", 1))
    models, algorithms, arch = listed(model), listed(algorithm), clients.model_of()
    for g, (m, a) in enumerate(zip(models, algorithms, strict=True)):
        a.configure([len(t) for t in clients.train], tcfg, train, clients.train,
                    client_models=[models[arch[k]] for k in range(len(clients))])  # fmt: skip
        a.setup(m, len(clients))
        if start_local:  # a client's own tensors are its own even where they no longer train
            present = set(named_state(m)) - set(a.shared)
            own = {n for k, v in start_local.items() if arch[k] == g for n in v if n in present}
            a.local = sorted(set(a.local) | own)
    share_exchange(algorithms)  # one server state from the start (a server's initial head)
    init_local = [take(m, a.local) for m, a in zip(models, algorithms, strict=True)]
    own = {  # complete per client: the model's local tensors, then the client's own ones
        k: {**init_local[arch[k]], **{n: t for n, t in v.items() if n in init_local[arch[k]]}}
        for k, v in (start_local or {}).items()
    }
    shared = [take(m, a.shared) for m, a in zip(models, algorithms, strict=True)]
    state = RunState(shared=join_shared(shared), local=own)
    saved = load_checkpoint(checkpoint) if checkpoint else None
    if saved is not None:
        state = RunState(
            saved["round"],
            saved["shared"],
            saved["local"],
            saved["history"],
            saved.get("optim", {}),
        )
        load_algorithm_state(algorithms, saved["algorithm"])
        share_exchange(algorithms)
        log(f"resumed from round {state.round}")
    device = next(models[0].parameters()).device
    state.shared = {k: v.to(device) for k, v in state.shared.items()}
    shared = split_shared(state.shared, len(models))
    keep_optim = tcfg.get("optimizer_state", "fresh") == "client"
    unlabeled = replace(train, images=test.images, labels=torch.full_like(test.labels, -1))

    first = state.round + 1
    if pace is None:
        pace = Pace(rounds - state.round)
    else:
        pace.skip(state.round)  # resumed rounds took no time in this job
    for r in range(first, rounds + 1):
        t0 = time.perf_counter()
        lr = lr_at(tcfg, r)
        picked = sample_clients(
            len(clients), float(tcfg.get("fraction", 1.0)), r, seed, tcfg.get("replacement", False)
        )
        down = [a.downlink(s, r) for a, s in zip(algorithms, shared, strict=True)]
        payloads: list[Payload] = []
        down_bytes = 0
        fitted = [0.0, 0]  # the clients' training loss summed over their steps, the steps
        for pos, k in enumerate(picked):
            g = arch[k]
            model, algorithm = models[g], algorithms[g]  # the client's module and its roles
            received = algorithm.downlink_to(k, down[g])
            down_bytes += nbytes(received)
            put(model, shared[g])
            put(model, client_local(algorithm, state, k, init_local[g], device))
            ctx = ClientCtx(
                k,
                model,
                shared[g],
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
            gen = seeded_generator(seed, r, k, pos, device=device)
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
                correct_gradients=partial(algorithm.correct_gradients, ctx),
                objective=partial(algorithm.objective, ctx),
                clock=clock,
                views=algorithm.views(r),
            )
            if phases is None:
                ctx.steps, loss = fit(epochs=epochs, optimizer=opt)
                _fitted(fitted, ctx.steps, loss)
            else:
                for keys, phase_epochs in phases:
                    with trainable_only(model, keys):
                        phase_opt = client_optimizer(model, tcfg, r, lr, None)
                        steps, loss = fit(epochs=phase_epochs, optimizer=phase_opt)
                        ctx.steps += steps
                        _fitted(fitted, steps, loss)
            if keep_optim and opt is not None:
                state.optim[k] = optimizer_state(opt)
            with clock.phase("upload"):
                payloads.append(algorithm.client_end(ctx))
            if algorithm.local:
                state.local[k] = take(model, algorithm.local)
        with clock.phase("aggregate"):
            finite = [p for p in payloads if all_finite(p.all_tensors())]
            keep = finite if cfg.get("nonfinite", "exclude") == "exclude" else payloads
            if keep and algorithms[0].exchanges():  # the exchange crosses models ...
                algorithms[0].exchange(keep, r)
                share_exchange(algorithms)
            for g, a in enumerate(algorithms):  # ... each model averages its own clients
                mine = [p for p in keep if arch[p.client] == g]
                if mine and a.exchanges():
                    shared[g] = a.aggregate(shared[g], mine)
            state.shared = join_shared(shared)
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
                    evaluate(models, algorithms, state, test, clients, init_local, seed, r, tcfg)
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
                _save(checkpoint, r, state, algorithms)
            row["seconds"] = time.perf_counter() - t0  # the saved copy has the time before it
        if phases := clock.take():
            row["phases"] = phases
        pace.add(1)
        log(round_line(r, rounds, row, fitted, pace))
    return state


def _fitted(fitted: list, steps: int, loss: float) -> None:
    """Add a client's training (``train_epochs``' steps and mean loss, already read) to the
    round's sum; a client that took no step (or trains nothing: NaN) adds nothing."""
    if steps:
        fitted[0] += loss * steps
        fitted[1] += steps


def round_line(r: int, rounds: int, row: dict, fitted: list, pace: Pace) -> str:
    """A round's line, ``round 3/20 loss=1.2345 acc=45.67 lr=0.05 clients=5 1.2s eta 2m10s
    (job: 57 rounds left)``: the training loss where a client took a step, the accuracy only
    where the round was evaluated, the job's rounds left and their time."""
    loss = f" loss={fitted[0] / fitted[1]:.4f}" if fitted[1] else ""
    acc = f" acc={row['acc']:.2f}" if "acc" in row else ""
    eta, n = pace.eta(), round(pace.left())
    left = "" if eta is None else f" eta {duration(eta)} (job: {n} round{'s' * (n != 1)} left)"
    return (
        f"round {r}/{rounds}{loss}{acc} lr={row['lr']:.4g} clients={row['clients']}"
        f"{' DIVERGED' if row['diverged'] else ''} {row['seconds']:.1f}s{left}"
    )


def _save(checkpoint: Path, r: int, state: RunState, algorithms: list[Algorithm]) -> None:
    save_checkpoint(
        checkpoint,
        {
            "round": r,
            "shared": {k: v.cpu() for k, v in state.shared.items()},
            "local": state.local,
            "history": state.history,
            "algorithm": algorithm_state(algorithms),
            "optim": state.optim,
        },
    )


def algorithm_state(algorithms: list[Algorithm]) -> dict:
    """What a checkpoint keeps of the algorithms: one's state dict, or one per group."""
    if len(algorithms) == 1:
        return algorithms[0].state_dict()
    return {"groups": [a.state_dict() for a in algorithms]}


def load_algorithm_state(algorithms: list[Algorithm], saved: dict) -> None:
    """Restore what ``algorithm_state`` kept."""
    if len(algorithms) == 1:
        algorithms[0].load_state_dict(saved)
        return
    for a, part in zip(algorithms, saved["groups"], strict=True):
        a.load_state_dict(part)


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
