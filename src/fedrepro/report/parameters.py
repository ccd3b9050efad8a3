"""Parameter counts per method at paper scale, beside the paper's printed "M" values.

FedIns prints two structural columns: "# Com.cost" (Table 1) and "#New.Param." (Table 2),
in millions, without saying what is counted. Both come out of the engine, in a structure job
(``structure.parameters``) whose JSON this table reads: every row's
model is built from its run config on the paper-scale backbone (on PyTorch's meta device:
shapes only, no memory, no weights), its algorithm is set up as in a run, and one client
round is played without training steps, so the payload is the one the engine would send.

- com_cost: scalars of the model tensors a client sends per round and direction
  (``Payload.tensors``). The algorithm's auxiliary tensors (SCAFFOLD's control variates,
  FedDC's gradient-state correction) are reported apart, as ``aux``: the paper's 85.80 M for
  SCAFFOLD counts the model alone.
- new_params: ``models.tuning.new_at_inference``: what a deployed model holds beyond the
  pretrained backbone and its classifier(s).

A printed value matches when it agrees to its last printed digit (|ours − printed| < one
unit of that digit, as for the adapters paper's payload); whether the paper truncated or
rounded is reported per value.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from fedrepro.report.payload import matches_printed
from fedrepro.report.results import structure_frame
from fedrepro.report.tables import header_rows, row_entries, write_table

__all__ = ["make_parameter_table", "printed_convention"]

QUANTITIES = ("com_cost", "new_params")
HEADINGS = {"com_cost": "# Com.cost", "new_params": "#New.Param."}


def printed_convention(value_m: float, printed: str) -> str:
    """How ``printed`` relates to ``value_m``: truncated, rounded (or both), or neither."""
    decimals = len(printed.partition(".")[2])
    scale = 10**decimals
    truncated = math.floor(value_m * scale + 1e-9) / scale == float(printed)
    rounded = round(value_m, decimals) == float(printed)
    return {
        (True, True): "truncated = rounded",
        (True, False): "truncated",
        (False, True): "rounded",
    }.get((truncated, rounded), "neither")


def _reported(path: str | Path | None) -> dict[tuple[str, str, str], str]:
    if not path:
        return {}
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    return {(r.row, r.label, r.quantity): r.value for r in table.itertuples()}


def measure_parameters(manifest: dict[str, Any]) -> pd.DataFrame:
    """One row per configured method: counts (from the structure job), the paper's value,
    match and convention."""
    paper = _reported(manifest.get("spec", {}).get("reported"))
    records = []
    for counts in structure_frame(manifest["structure"]["file"]).to_dict("records"):
        record = dict(counts)
        for q in QUANTITIES:
            printed = paper.get((counts["row"], counts["label"], q), "")
            value = counts[q] / 1e6
            record[f"{q}_M"] = value
            record[f"{q}_paper"] = printed
            record[f"{q}_matches"] = matches_printed(value, printed) if printed else None
            record[f"{q}_convention"] = printed_convention(value, printed) if printed else ""
        records.append(record)
    return pd.DataFrame(records)


def make_parameter_table(manifest: dict[str, Any], out_prefix: str | Path) -> list[Path]:
    """Write the parameters item (md, tex, html, csv) from its structure job's counts."""
    spec = manifest.get("spec", {})
    frame = measure_parameters(manifest)
    columns = ["sent scalars", "aux. sent", "# Com.cost (M)", "new scalars", "#New.Param. (M)"]
    rows = []
    for r in frame.to_dict("records"):
        texts = [f"{r['com_cost']:,}", f"{r['aux']:,}", f"{r['com_cost_M']:.3f}"]
        texts += [f"{r['new_params']:,}", f"{r['new_params_M']:.3f}"]
        papers = ["", "", r["com_cost_paper"], "", r["new_params_paper"]]
        cells = [
            {"text": t, "paper": p, "missing": False, "is_diff": False}
            for t, p in zip(texts, papers, strict=True)
        ]
        rows.append({"cells": cells})
    keys = list(zip(frame["row"], frame["label"], strict=True))
    for entry, labels in zip(rows, row_entries(keys), strict=True):
        entry["labels"] = labels
    write_table_kwargs = {
        "title": manifest.get("title", "parameters"),
        "label": f"{manifest.get('paper', '')}-{manifest.get('item', 'parameters')}",
        "scale": "paper",
        "caption_lines": _caption(frame, spec),
        "row_label_names": ["Row of", "Method"],
        "header": header_rows([(c,) for c in columns], []),
        "column_names": columns,
        "rows": rows,
        "footnotes": [],
        "note": "structural numbers, computed from the paper-scale architecture at every scale.",
    }
    return write_table(out_prefix, frame, **write_table_kwargs)


def _caption(frame: pd.DataFrame, spec: dict[str, Any]) -> list[str]:
    lines = [
        f"{spec.get('backbone')}, {spec.get('num_classes', 10)} classes, built on the meta "
        "device (shapes only). Sent scalars: model tensors one client sends per round and "
        "direction, as the engine sends them; aux.: the algorithm's extra tensors (control "
        "variates), which the paper's # Com.cost leaves out. New scalars: what a deployed "
        "model keeps beyond the pretrained backbone and its classifier(s): SSF merges into "
        "the weights (0); prompts, SSF pools and keys stay. M = 10⁶ scalars.",
    ]
    for q in QUANTITIES:
        printed = frame[frame[f"{q}_paper"] != ""]
        if printed.empty:
            continue
        matched = int(printed[f"{q}_matches"].sum())
        conventions = ", ".join(
            f"{label}: {conv}"
            for label, conv in zip(printed["label"], printed[f"{q}_convention"], strict=True)
        )
        lines.append(
            f"{HEADINGS[q]}: {matched}/{len(printed)} printed values match to their last "
            f"digit. How each printed value relates to ours: {conventions}."
        )
    return lines
