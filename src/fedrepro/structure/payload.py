"""Bytes a client sends per round, for full fine-tuning and for adapters (Adapters §IV-A4).

Computed from the paper-scale architecture with random weights (sizes do not depend on the
values): the model is built with each tuning variant, the engine's algorithm fixes what is
sent, and the sent state dict is serialised the way the paper measured it. The table
(``report.payload``) sets the paper's printed sizes beside these rows.
"""

from __future__ import annotations

import torch
from torch import nn

from fedrepro.algorithms import make_algorithm
from fedrepro.fl.algorithm import Algorithm, ClientCtx
from fedrepro.fl.payload import sent_state_dict, serialized_bytes
from fedrepro.fl.tensors import nbytes, take
from fedrepro.models.registry import create_backbone
from fedrepro.models.tuning import apply_tuning

__all__ = ["QUANTITIES", "begin_client", "measure_payload", "sender"]

# (quantity as the paper words it, variant, tuning, what is serialised)
QUANTITIES = (
    ("full model", "w/o adapter", "full", "sent"),
    ("full model with adapters", "w/ adapter", "adapters", "state_dict"),
    ("adapters + domain-specific", "w/ adapter", "adapters", "sent"),
)


def sender(
    backbone: str,
    num_classes: int,
    model_cfg: dict,
    algorithm_cfg: dict,
    clients: int = 1,
    img_size: int | None = None,
) -> tuple[nn.Module, Algorithm]:
    """A run's tuned model and its algorithm, set up as the engine sets them up (what is
    shared, what stays local) for ``clients`` clients of one sample each."""
    model = apply_tuning(
        create_backbone(backbone, num_classes, img_size=img_size),
        model_cfg.get("tuning", "full"),
        **model_cfg.get("tuning_options", {}),
    )
    algorithm = make_algorithm(algorithm_cfg)
    algorithm.prepare_model(model)  # as the engine's jobs do (FedTHE's personal head)
    algorithm.configure([1] * clients, {"batch_size": 1, "local_epochs": 1, "lr": 1.0})
    algorithm.setup(model, clients)
    return model, algorithm


def begin_client(model: nn.Module, algorithm: Algorithm) -> ClientCtx:
    """Client 0 of ``sender``'s setup, begun on what the server sent in round 1, as the
    engine begins it (no local steps; FedGH's client takes the global head it is sent)."""
    shared = take(model, algorithm.shared)
    sent = algorithm.downlink_to(0, algorithm.downlink(shared, 1))
    ctx = ClientCtx(0, model, shared, 1.0, 0.0, 1, round=1, downloaded=sent)
    algorithm.client_begin(ctx)
    return ctx


def measure_payload(backbone: str, num_classes: int, algorithm: str = "fedavg") -> list[dict]:
    """One row per quantity: scalars, engine bytes per client-round, torch.save bytes."""
    built = {}
    for tuning in dict.fromkeys(q[2] for q in QUANTITIES):  # each variant built once
        torch.manual_seed(0)
        built[tuning] = sender(backbone, num_classes, {"tuning": tuning}, {"name": algorithm})
    rows = []
    for quantity, variant, tuning, what in QUANTITIES:
        model, alg = built[tuning]
        state = sent_state_dict(model, alg) if what == "sent" else model.state_dict()
        file_bytes = serialized_bytes(state)
        rows.append(
            {
                "quantity": quantity,
                "variant": variant,
                "tuning": tuning,
                "serialised": what,
                "tensors": len(state),
                "scalars": sum(t.numel() for t in state.values()),
                "engine_bytes": nbytes(take(model, alg.shared)) if what == "sent" else None,
                "file_bytes": file_bytes,
                "MiB": file_bytes / 2**20,
                "MB": file_bytes / 1e6,
            }
        )
    return rows
