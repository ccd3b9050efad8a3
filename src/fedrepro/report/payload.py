"""The payload item: bytes per round beside the paper's printed sizes (Adapters §IV-A4).

The rows come from a structure job (``structure.payload``, JSON). The same bytes are given
in MiB (2**20) and MB (10**6); a printed value matches when it agrees to its last printed
digit (|ours − printed| < one unit of that digit), which tells the unit apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from fedrepro.report.results import structure_frame
from fedrepro.report.tables import header_rows, row_entries, write_table

__all__ = ["make_payload_table", "matches_printed"]


def matches_printed(value: float, printed: str) -> bool:
    """True when ``value`` agrees with ``printed`` to its last printed digit."""
    decimals = len(printed.partition(".")[2])
    return abs(value - float(printed)) < 10.0**-decimals


def _paper_values(reported_csv: str | Path | None) -> dict[str, str]:
    if not reported_csv:
        return {}
    table = pd.read_csv(reported_csv, dtype=str, keep_default_na=False)
    return dict(zip(table["quantity"], table["value"], strict=True))


def make_payload_table(manifest: dict[str, Any], out_prefix: str | Path) -> list[Path]:
    """Write the payload item (md, tex, html, csv) from its structure job's rows."""
    spec = manifest.get("spec", {})
    backbone = spec.get("backbone", "resnet26")
    frame = structure_frame(manifest["structure"]["file"])
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
