"""Bytes per round for full fine-tuning and for adapters, beside the paper's printed sizes.

Computed from the paper-scale architecture with random weights (sizes do not depend on the
values): the model is built with each tuning variant, the engine's algorithm fixes what is
sent, and the sent state dict is serialised the way the paper measured it (§IV-A4). The same
bytes are given in MiB (2**20) and MB (10**6); a printed value matches when it agrees to its
last printed digit (|ours − printed| < one unit of that digit), which tells the unit apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from fedrepro.algorithms import make_algorithm
from fedrepro.fl.algorithm import Algorithm, ClientCtx
from fedrepro.fl.payload import sent_state_dict, serialized_bytes
from fedrepro.fl.tensors import nbytes, take
from fedrepro.models.registry import create_backbone
from fedrepro.models.tuning import apply_tuning
from fedrepro.report.tables import header_rows, row_entries, write_table

__all__ = ["make_payload_table", "matches_printed", "measure_payload", "sender", "begin_client"]

# (quantity as the paper words it, variant, tuning, what is serialised)
QUANTITIES = (
    ("full model", "w/o adapter", "full", "sent"),
    ("full model with adapters", "w/ adapter", "adapters", "state_dict"),
    ("adapters + domain-specific", "w/ adapter", "adapters", "sent"),
)


def matches_printed(value: float, printed: str) -> bool:
    """True when ``value`` agrees with ``printed`` to its last printed digit."""
    decimals = len(printed.partition(".")[2])
    return abs(value - float(printed)) < 10.0**-decimals


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
    algorithm.configure([1] * clients, {"batch_size": 1, "local_epochs": 1, "lr": 1.0})
    algorithm.setup(model, clients)
    return model, algorithm


def begin_client(model: nn.Module, algorithm: Algorithm) -> ClientCtx:
    """Client 0 of ``sender``'s setup, begun on what the server sent (no local steps)."""
    ctx = ClientCtx(0, model, take(model, algorithm.shared), 1.0, 0.0, 1)
    algorithm.client_begin(ctx)
    return ctx


def measure_payload(backbone: str, num_classes: int, algorithm: str = "fedavg") -> pd.DataFrame:
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
    return pd.DataFrame(rows)


def _paper_values(reported_csv: str | Path | None) -> dict[str, str]:
    if not reported_csv:
        return {}
    table = pd.read_csv(reported_csv, dtype=str, keep_default_na=False)
    return dict(zip(table["quantity"], table["value"], strict=True))


def make_payload_table(manifest: dict[str, Any], out_prefix: str | Path) -> list[Path]:
    """Write the payload item (md, tex, html, csv) from the real architecture."""
    spec = manifest.get("spec", {})
    backbone = spec.get("backbone", "resnet26")
    frame = measure_payload(backbone, int(spec.get("num_classes", 10)))
    paper = _paper_values(spec.get("reported"))
    frame["paper_MB"] = [paper.get(q, "") for q in frame["quantity"]]
    for unit in ("MiB", "MB"):
        frame[f"matches_{unit}"] = [
            matches_printed(v, p) if p else None
            for v, p in zip(frame[unit], frame["paper_MB"], strict=True)
        ]
    columns = ["scalars", "engine bytes / client-round", "torch.save bytes", "MiB", "MB (10⁶)"]
    rows = []
    for r in frame.to_dict("records"):
        engine = "—" if pd.isna(r["engine_bytes"]) else f"{int(r['engine_bytes']):,}"
        texts = [f"{r['scalars']:,}", engine, f"{r['file_bytes']:,}"]
        texts += [f"{r['MiB']:.3f}", f"{r['MB']:.3f}"]
        paper_cells = ["", "", "", r["paper_MB"], r["paper_MB"]]
        cells = [
            {"text": t, "paper": p, "missing": False, "is_diff": False}
            for t, p in zip(texts, paper_cells, strict=True)
        ]
        rows.append({"cells": cells})
    for entry, labels in zip(
        rows, row_entries(list(zip(frame["quantity"], frame["variant"], strict=True))), strict=True
    ):
        entry["labels"] = labels
    verdict = {
        unit: "all match" if frame[f"matches_{unit}"].all() else "do not all match"
        for unit in ("MiB", "MB")
    }
    caption = [
        f"{backbone}, {spec.get('num_classes', 10)} classes, built with random weights: sizes "
        "depend on shapes only. 'Sent' state dicts are the model's state_dict minus frozen "
        "parameters and client-local tensors (what the engine sends, plus BN batch counters a "
        "state_dict carries), serialised with torch.save as the paper did (§IV-A4).",
        "Engine bytes are the raw tensor bytes the engine counts per client and round.",
        "The paper prints 'MB'. Read as MiB (2**20 bytes) the printed values "
        f"{verdict['MiB']}; read as MB (10**6 bytes) they {verdict['MB']} "
        "(match = agreement to the last printed digit).",
    ]
    return write_table(
        out_prefix,
        frame,
        title=manifest.get("title", "payload"),
        label=f"{manifest.get('paper', '')}-{manifest.get('item', 'payload')}",
        scale="paper",
        caption_lines=caption,
        row_label_names=["Quantity", "Variant"],
        header=header_rows([(c,) for c in columns], []),
        column_names=columns,
        rows=rows,
        footnotes=[],
        note="structural numbers, computed from the paper-scale architecture at every scale.",
    )
