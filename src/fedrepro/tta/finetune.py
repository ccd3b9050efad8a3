"""FedAvg-FT: every client fine-tunes the trained global model on its own training data for
E epochs and is evaluated on its own test set (a baseline of FedICON; docs/methods/baselines.md).

As an engine run: the ``local`` algorithm (every tensor stays on its client, nothing is
sent), all clients every round, one local epoch per round and ``epochs`` rounds, so the job
checkpoints after every epoch and a killed job resumes to the same numbers. The parameters
that were trainable in the run (its tuning) are the ones fine-tuned. The optimiser restarts
each epoch, as in every FL round of the engine (identical for plain SGD).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class AdaptMethod:
    name: str
    engine_config: Callable[[dict, dict], dict]  # (run config, resolved options) -> config
    # option -> default (None: taken from the trained run's ``train`` block)
    options: dict[str, Any] = field(default_factory=dict)
    # "global": start from the run's global model and refuse runs with client-local tensors;
    # "client0": global tensors plus the first client's local ones (FedPCE's client training);
    # "own": global tensors plus each client's own local ones (test-time methods)
    start: str = "global"
    # which tensors train, given the model and the engine's algorithm (None: the run's own)
    trains: Callable[[Any, Any], set[str]] | None = None

    def resolve(self, adapt: dict) -> dict:
        """The adapt block with every option present (defaults filled in)."""
        unknown = sorted(set(adapt) - {"method", *self.options})
        if unknown:
            allowed = ", ".join(self.options)
            raise ValueError(
                f"adapt ({self.name}): unknown option(s) {unknown} (allowed: {allowed})"
            )
        return {"method": self.name, **self.options, **adapt}

    def run_config(self, run: dict, adapt: dict) -> dict:
        """The engine config of this adaptation of ``run`` (a trained run's config)."""
        return self.engine_config(run, self.resolve(adapt))


def local_engine_config(run: dict, adapt: dict, algorithm: dict, rounds: int) -> dict:
    """The engine config of a per-client adaptation of ``run``: ``algorithm`` (one that keeps
    every tensor on its client), all clients every round, one local epoch per round for
    ``rounds`` rounds at a constant rate, a checkpoint after every round; the adapt block's
    ``lr``, ``batch_size``, ``momentum`` and ``weight_decay`` where given, its ``shift`` as
    the test-time shift of the clients' test images."""
    cfg = copy.deepcopy(run)
    train = cfg["train"]
    for key in ("lr", "batch_size", "momentum", "weight_decay"):
        if adapt.get(key) is not None:
            train[key] = adapt[key]
    train.update(rounds=int(rounds), local_epochs=1, fraction=1.0, replacement=False)
    train["schedule"] = {"kind": "constant"}
    cfg["algorithm"] = algorithm
    cfg["eval_every"] = int(adapt["eval_every"] or rounds)  # None: once, at the end
    cfg["checkpoint_every"] = 1
    if adapt.get("shift") is not None:
        cfg["test_shift"] = adapt["shift"]
    return cfg


def _finetune_config(run: dict, adapt: dict) -> dict:
    return local_engine_config(run, adapt, {"name": "local"}, adapt["epochs"])


FINETUNE = AdaptMethod(
    name="finetune",
    engine_config=_finetune_config,
    options={
        "epochs": 1,
        "lr": None,
        "batch_size": None,
        "momentum": None,
        "weight_decay": None,
        "eval_every": 1,
        "shift": None,
    },
)
