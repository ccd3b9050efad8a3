"""Scalars a method sends and adds at paper scale, counted on the meta device.

Every row's model is built from its run config on the paper-scale backbone (shapes only,
no memory, no weights), its algorithm is set up as in a run, and one client round is
played without training steps, so the payload is the one the engine would send.
"""

from __future__ import annotations

from typing import Any

import torch

from fedrepro.models.tuning import new_at_inference
from fedrepro.structure.payload import begin_client, sender

__all__ = ["count_parameters", "count_rows"]


def count_parameters(config: dict[str, Any], backbone: str, num_classes: int) -> dict[str, int]:
    """Sent and added scalars of one row (``config``: a run's model, algorithm, clients)."""
    clients = int(config.get("clients", 1))
    with torch.device("meta"):
        model, algorithm = sender(
            backbone, num_classes, config["model"], config["algorithm"], clients
        )
        ctx = begin_client(model, algorithm)
        payload = algorithm.client_end(ctx)
    return {
        "com_cost": sum(t.numel() for t in payload.tensors.values()),
        "aux": sum(t.numel() for t in payload.extra.values()),
        "new_params": new_at_inference(model),
    }


def count_rows(configs: list[dict[str, Any]], backbone: str, num_classes: int) -> list[dict]:
    """One row per source config: its row label and its counts."""
    return [
        {"row": c["row"], "label": c["label"], **count_parameters(c, backbone, num_classes)}
        for c in configs
    ]
