"""Scalars a method sends and adds at paper scale, counted on the meta device.

Every row's model is built from its run config on the paper-scale backbone (shapes only,
no memory, no weights), its algorithm is set up as in a run, and one client round is
played without training steps, so the payload is the one the engine would send.
"""

from __future__ import annotations

from typing import Any

import torch

from fedrepro.models.registry import head_keys
from fedrepro.models.server_models import server_model
from fedrepro.models.tuning import new_at_inference
from fedrepro.structure.payload import begin_client, sender

__all__ = ["QUANTITIES", "count_federation", "count_parameters", "count_rows"]


# what a row can count; a structure spec's ``quantities`` picks (default: FedIns's three)
QUANTITIES = (
    "com_cost",
    "aux",
    "new_params",
    "total",
    "local",
    "trainable",
    "server",
    "backbone",
    "head",
    "per_prompt",
    "uploaded",
)
# the default of a structure job without ``quantities`` (FedIns's three; the plan's
# ``experiments.items.DEFAULT_QUANTITIES`` is the same tuple, tested)
DEFAULT_QUANTITIES = ("com_cost", "aux", "new_params")


def count_parameters(
    config: dict[str, Any],
    backbone: str,
    num_classes: int,
    quantities: tuple[str, ...] = DEFAULT_QUANTITIES,
) -> dict[str, int]:
    """Scalars of one row (``config``: a run's model, algorithm, clients): ``com_cost`` the
    model tensors a client sends, ``aux`` the algorithm's extra ones, ``new_params`` what a
    deployed model adds, ``total`` every parameter of the model, ``local`` the parameters that
    stay on a client (what FedPCE's client training trains), ``trainable`` those a client
    trains (sent or kept; FedBABU's frozen head and a prompt-tuned backbone excluded) and
    those the server trains (``server``: pFedPG's prompt generator); ``backbone`` every
    parameter outside the classifier, ``head`` the classifier's, ``per_prompt`` the scalars
    one prompt token adds (over every layer it is inserted in; 0 without prompts);
    ``uploaded`` all a client sends up in a round, model tensors and extra payload together
    (FedHPL's logits, for a client of one correctly classified image: App. Table 9).
    A config's ``server_model`` (``{"name", **options}``, ``models.server_models``) is a model
    the server trains beside the algorithm's own (FedGen's generator, FedTGP's prototypes):
    it counts in ``server`` and ``trainable``."""
    unknown = sorted(set(quantities) - set(QUANTITIES))
    if unknown:
        raise ValueError(f"parameters: unknown quantities {unknown} (allowed: {QUANTITIES})")
    clients = int(config.get("clients", 1))
    with torch.device("meta"):
        model, algorithm = sender(
            backbone, num_classes, config["model"], config["algorithm"], clients
        )
        ctx = begin_client(model, algorithm)
        payload = algorithm.client_end(ctx)
        spec = config.get("server_model")
        extra = sum(p.numel() for p in server_model(spec, num_classes).parameters()) if spec else 0
    named = dict(model.named_parameters())
    server = algorithm.server_parameters() + extra
    counts = {
        "com_cost": sum(t.numel() for t in payload.tensors.values()),
        "aux": sum(t.numel() for t in payload.extra.values()),
        "new_params": new_at_inference(model),
        "total": sum(p.numel() for p in named.values()),
        "local": sum(named[k].numel() for k in algorithm.local if k in named),
        "trainable": server
        + sum(
            named[k].numel()
            for k in set(algorithm.shared) | set(algorithm.local)
            if k in named and named[k].requires_grad
        ),
        "server": server,
        "head": sum(named[k].numel() for k in head_keys(model) if k in named),
        "per_prompt": _per_prompt(model),
    }
    counts["backbone"] = counts["total"] - counts["head"]
    counts["uploaded"] = counts["com_cost"] + counts["aux"]
    return {q: counts[q] for q in quantities}


def _per_prompt(model: torch.nn.Module) -> int:
    """Scalars of one prompt token (a prompt-tuned ViT's ``prompts`` over its layers)."""
    prompts, n = getattr(model, "prompts", None), getattr(model, "num_prompts", 0)
    return prompts.numel() // n if prompts is not None and n else 0


def count_federation(
    config: dict[str, Any],
    backbones: list[str],
    num_classes: int,
    quantities: tuple[str, ...] = DEFAULT_QUANTITIES,
) -> dict[str, int]:
    """The counts of one client per backbone in ``backbones``, summed over the clients
    (heterogeneous clients: FedHPL Table 2's Param (M), "the sum over the five clients"); what
    the server trains counts once."""
    each = [count_parameters(config, b, num_classes, QUANTITIES) for b in backbones]
    counts = {q: sum(c[q] for c in each) for q in QUANTITIES}
    server = each[0]["server"]
    counts.update(server=server, trainable=counts["trainable"] - server * (len(each) - 1))
    return {q: counts[q] for q in quantities}


def count_rows(
    configs: list[dict[str, Any]],
    backbone: str,
    num_classes: int,
    quantities: tuple[str, ...] = DEFAULT_QUANTITIES,
) -> list[dict]:
    """One row per source config: its row label (and variant, FedHPL's Tables 5 and 6) and
    its counts, on the config's own ``backbone`` and ``num_classes`` where it names them
    (FedPCE(62), a variant), else on ``backbone`` and ``num_classes``; a config naming
    ``client_backbones`` counts a federation of those clients (``count_federation``)."""
    with_variants = any("variant" in c for c in configs)
    rows = []
    for c in configs:
        classes = int(c.get("num_classes", num_classes))
        backbones = c.get("client_backbones") or [c.get("backbone", backbone)]
        counts = count_federation(c, backbones, classes, quantities)
        variant = {"variant": c.get("variant", "")} if with_variants else {}
        rows.append({"row": c["row"], "label": c["label"], **variant, **counts})
    return rows
