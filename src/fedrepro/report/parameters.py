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

# quantity -> (the paper's heading, exact-count columns [(name, count key)], caption words)
COLUMNS: dict[str, tuple[str, list[tuple[str, str]], str]] = {
    "com_cost": (
        "# Com.cost",
        [("sent scalars", "com_cost"), ("aux. sent", "aux")],
        "Sent scalars: model tensors one client sends per round and direction, as the engine "
        "sends them; aux.: the algorithm's extra tensors (control variates), which the "
        "paper's # Com.cost leaves out. ",
    ),
    "new_params": (
        "#New.Param.",
        [("new scalars", "new_params")],
        "New scalars: what a deployed model keeps beyond the pretrained backbone and its "
        "classifier(s): SSF merges into the weights (0); prompts, SSF pools and keys stay. ",
    ),
    "total": (
        "# params, collaborative",
        [("parameters", "total")],
        "Parameters: every scalar of the model, all trained in collaborative training. ",
    ),
    "trainable": (
        "Param (M)",
        [("trainable", "trainable")],
        "Trainable: the parameters a client trains (FedBABU's frozen head and a prompt-tuned "
        "model's frozen backbone excluded) and those the server trains (pFedPG's prompt "
        "generator). ",
    ),
    "server": (
        "Server (M)",
        [("server", "server")],
        "Server: the parameters the server trains (pFedPG's prompt generator). ",
    ),
    "local": (
        "# params, client training",
        [("client-local", "local")],
        "Client-local: the parameters a client keeps to itself, the ones client training "
        "trains (FedAvg and FedProx keep none). ",
    ),
}
DEFAULT_SHOWN = ("com_cost", "new_params")
SCALES = {"": 1.0, "K": 1e3, "M": 1e6}
# what a bare printed number counts in, per the item's ``unit`` (FedHPL's "M" is 2^20)
BARE = {"M": 1e6, "Mi": float(2**20), "printed": 1.0}
HEADINGS = {q: c[0] for q, c in COLUMNS.items()}


def printed_number(printed: str, unit: str) -> tuple[str, float]:
    """The number of a printed value and its scale: "5.1K" → ("5.1", 1e3); without a suffix
    the item's ``unit`` (``M``: FedIns prints millions bare; ``Mi``: FedHPL's 2^20;
    ``printed``: plain scalars)."""
    suffix = printed[-1:] if printed[-1:] in ("K", "M") else ""
    if suffix:
        return printed[:-1], SCALES[suffix]
    return printed, bare_scale(unit)


def bare_scale(unit: str) -> float:
    """What a number without a suffix counts in, per the item's ``unit``."""
    if unit not in BARE:
        raise ValueError(f"parameters item: unit {unit!r} (allowed: {', '.join(BARE)})")
    return BARE[unit]


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
    spec = manifest.get("spec", {})
    paper = _reported(spec.get("reported"))
    unit = spec.get("unit", "M")
    records = []
    for counts in structure_frame(manifest["structure"]["file"]).to_dict("records"):
        record = dict(counts)
        for q in spec.get("quantities", DEFAULT_SHOWN):
            printed = paper.get((counts["row"], counts["label"], q), "")
            number, scale = printed_number(printed, unit) if printed else ("", bare_scale(unit))
            value = counts[q] / scale
            record[f"{q}_M"] = value  # in the printed unit (M unless the paper says K or none)
            if unit == "printed":  # the unit differs from cell to cell
                record[f"{q}_unit"] = {v: k for k, v in SCALES.items()}[scale]
            record[f"{q}_paper"] = printed
            record[f"{q}_matches"] = matches_printed(value, number) if printed else None
            record[f"{q}_convention"] = printed_convention(value, number) if printed else ""
        records.append(record)
    return pd.DataFrame(records)


def make_parameter_table(manifest: dict[str, Any], out_prefix: str | Path) -> list[Path]:
    """Write the parameters item (md, tex, html, csv) from its structure job's counts."""
    spec = manifest.get("spec", {})
    frame = measure_parameters(manifest)
    shown = spec.get("quantities", DEFAULT_SHOWN)
    unit = "(M)" if spec.get("unit", "M") == "M" else "(as printed)"
    columns = [
        name for q in shown for name in [*(c for c, _ in COLUMNS[q][1]), f"{HEADINGS[q]} {unit}"]
    ]
    rows = []
    for r in frame.to_dict("records"):
        texts, papers = [], []
        for q in shown:
            texts += [f"{r[key]:,}" for _, key in COLUMNS[q][1]]
            texts.append(_in_unit(r[f"{q}_M"], r.get(f"{q}_unit", "M"), unit != "(M)"))
            papers += [""] * len(COLUMNS[q][1]) + [r[f"{q}_paper"]]
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


def _in_unit(value: float, suffix: str, show_suffix: bool) -> str:
    """Our count in the paper's unit: millions/thousands to 3 decimals (with the suffix where
    the paper prints one), plain scalars whole."""
    return f"{value:.3f}{suffix if show_suffix else ''}" if suffix else f"{value:,.0f}"


def _caption(frame: pd.DataFrame, spec: dict[str, Any]) -> list[str]:
    shown = spec.get("quantities", DEFAULT_SHOWN)
    words = "".join(COLUMNS[q][2] for q in shown)
    units = {
        "M": "M = 10⁶ scalars.",
        "Mi": "M = 2^20 = 1,048,576 scalars, the paper's unit.",
    }.get(spec.get("unit", "M"), "Ours are shown in the unit the paper prints (K = 10³, M = 10⁶).")
    lines = [
        f"{spec.get('backbone')}, {spec.get('num_classes', 10)} classes, built on the meta "
        f"device (shapes only). {words}{units}",
    ]
    for q in shown:
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
