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

__all__ = ["make_parameter_table", "printed_convention", "printed_scalars"]

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
        "Server: the parameters the server trains (pFedPG's prompt generator; FedGen's "
        "generator, FedTGP's prototype generator, FedGH's global head). ",
    ),
    "local": (
        "# params, client training",
        [("client-local", "local")],
        "Client-local: the parameters a client keeps to itself, the ones client training "
        "trains (FedAvg and FedProx keep none). ",
    ),
    "backbone": (
        "Backbone",
        [("backbone", "backbone")],
        "Backbone: every parameter outside the classifier. ",
    ),
    "head": (
        "Head",
        [("head", "head")],
        "Head: the classifier's parameters. ",
    ),
    "per_prompt": (
        "per prompt",
        [("per prompt", "per_prompt")],
        "Per prompt: the scalars one more prompt token adds (one embedding per layer it is "
        "inserted in; Table 6's coefficient of n). ",
    ),
    "uploaded": (
        "Uploaded",
        [("uploaded scalars", "uploaded")],
        "Uploaded: the scalars one client sends up in a round, model tensors and extra "
        "payload together, counted for a client of one training image it classifies "
        "correctly (FedHPL's all-upload sends C + 1 per such image, average-upload C·C + C "
        "whatever the data). ",
    ),
}
DEFAULT_SHOWN = ("com_cost", "new_params")
SCALES = {"": 1.0, "K": 1e3, "M": 1e6}
# FedHPL's K and M are 2^10 and 2^20 (its Table 5 prints the pixel frame's 1,344 as 1.3125 K)
BINARY_SCALES = {"": 1.0, "K": float(2**10), "M": float(2**20)}
# what a bare printed number counts in, per the item's ``unit`` (``printed_binary``: plain
# scalars, and K and M binary where a value carries one: FedHPL's Table 9)
BARE = {"M": 1e6, "Mi": float(2**20), "Ki": float(2**10), "printed": 1.0, "printed_binary": 1.0}
DEFAULT_SUFFIX = {"M": "M", "Mi": "M", "Ki": "K", "printed": "", "printed_binary": ""}
HEADINGS = {q: c[0] for q, c in COLUMNS.items()}


def printed_number(printed: str, unit: str) -> tuple[str, float]:
    """The number of a printed value and its scale: "5.1K" → ("5.1", 1e3); without a suffix
    the item's ``unit`` (``M``: FedIns prints millions bare; ``Mi``: FedHPL's 2^20;
    ``printed``: plain scalars)."""
    suffix = printed[-1:] if printed[-1:] in ("K", "M") else ""
    if suffix:
        return printed[:-1], _scales(unit)[suffix]
    return printed, bare_scale(unit)


def _scales(unit: str) -> dict[str, float]:
    """What a printed suffix counts in: powers of 2 where the paper's unit is binary."""
    return BINARY_SCALES if unit in ("Mi", "Ki", "printed_binary") else SCALES


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


def _reported(path: str | Path | None) -> dict[tuple[str, str, str, str], str]:
    """Printed values by (row, label, variant, quantity); ``variant`` is optional."""
    if not path:
        return {}
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    variants = table["variant"] if "variant" in table else [""] * len(table)
    return {
        (r.row, r.label, v, r.quantity): r.value
        for r, v in zip(table.itertuples(), variants, strict=True)
    }


def printed_scalars(path: str | Path | None, unit: str, quantity: str) -> pd.DataFrame:
    """The printed values of one ``quantity`` in scalars (row, label, variant, value); an
    empty cell is no value, a cell that is not a number an error naming the file."""
    rows = []
    for (row, label, variant, q), printed in _reported(path).items():
        if q != quantity or not printed.strip():
            continue
        number, scale = printed_number(printed.strip(), unit)
        try:
            value = float(number) * scale
        except ValueError:
            raise ValueError(f"{path}: {row}/{label}/{q}: {printed!r} is not a number") from None
        rows.append({"row": row, "label": label, "variant": variant, "value": value})
    return pd.DataFrame(rows, columns=["row", "label", "variant", "value"])


def _key(counts: dict[str, Any]) -> tuple[str, ...]:
    """A structure row's label cells: row, label and (where the source has them) variant."""
    variant = counts.get("variant")
    return (counts["row"], counts["label"]) + (() if variant is None else (str(variant),))


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
            printed = paper.get((*_key(counts), "")[:3] + (q,), "")
            number, scale = printed_number(printed, unit) if printed else ("", bare_scale(unit))
            value = counts[q] / scale
            record[f"{q}_M"] = value  # in the printed unit (M unless the paper says K or none)
            if unit.startswith("printed") or printed[-1:] in ("K", "M"):  # a unit of its own
                record[f"{q}_unit"] = {v: k for k, v in _scales(unit).items()}[scale]
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
    default = DEFAULT_SUFFIX[spec.get("unit", "M")]
    columns = [
        name
        for q in shown
        for name in [*(c for c, _ in COLUMNS[q][1]), f"{_headings(spec)[q]} {unit}"]
    ]
    rows = []
    for r in frame.to_dict("records"):
        texts, papers = [], []
        for q in shown:
            texts += [f"{r[key]:,}" for _, key in COLUMNS[q][1]]
            places = max(3, len(r[f"{q}_paper"].rstrip("KM").partition(".")[2]))
            suffix = r.get(f"{q}_unit")
            suffix = default if not isinstance(suffix, str) else suffix  # NaN: not printed
            texts.append(_in_unit(r[f"{q}_M"], suffix, unit != "(M)", places))
            papers += [""] * len(COLUMNS[q][1]) + [r[f"{q}_paper"]]
        cells = [
            {"text": t, "paper": p, "missing": False, "is_diff": False}
            for t, p in zip(texts, papers, strict=True)
        ]
        rows.append({"cells": cells})
    keys = [_key(r) for r in frame.to_dict("records")]
    for entry, labels in zip(rows, row_entries(keys), strict=True):
        entry["labels"] = labels
    write_table_kwargs = {
        "title": manifest.get("title", "parameters"),
        "label": f"{manifest.get('paper', '')}-{manifest.get('item', 'parameters')}",
        "scale": "paper",
        "caption_lines": _caption(frame, spec),
        "row_label_names": ["Row of", "Method", "Variant"][: len(keys[0]) if keys else 2],
        "header": header_rows([(c,) for c in columns], []),
        "column_names": columns,
        "rows": rows,
        "footnotes": [],
        "note": "structural numbers, computed from the paper-scale architecture at every scale.",
    }
    return write_table(out_prefix, frame, **write_table_kwargs)


def _headings(spec: dict[str, Any]) -> dict[str, str]:
    """Each quantity's column heading: the paper's usual one, or the item's own (``headings``:
    the same quantity under another table's name, e.g. FedHPL Table 8's head + frame)."""
    return {**HEADINGS, **spec.get("headings", {})}


def _in_unit(value: float, suffix: str, show_suffix: bool, places: int = 3) -> str:
    """Our count in the paper's unit: millions/thousands to 3 decimals (more where the paper
    prints more; with the suffix where the paper prints one), plain scalars whole."""
    return f"{value:.{places}f}{suffix if show_suffix else ''}" if suffix else f"{value:,.0f}"


def _caption(frame: pd.DataFrame, spec: dict[str, Any]) -> list[str]:
    shown = spec.get("quantities", DEFAULT_SHOWN)
    words = "".join(COLUMNS[q][2] for q in shown)
    units = {
        "M": "M = 10⁶ scalars.",
        "Mi": "M = 2^20 = 1,048,576 scalars, the paper's unit (K = 2^10).",
        "Ki": "K = 2^10 = 1,024 scalars, the paper's unit.",
        "printed_binary": "Ours are shown in the unit the paper prints (K = 2^10, M = 2^20).",
    }.get(spec.get("unit", "M"), "Ours are shown in the unit the paper prints (K = 10³, M = 10⁶).")
    variants = " (a row with a variant: its own backbone and classes)" * ("variant" in frame)
    lines = [
        f"{spec.get('backbone')}, {spec.get('num_classes', 10)} classes{variants}, built on "
        f"the meta device (shapes only). {words}{units}",
    ]
    for q in shown:
        printed = frame[frame[f"{q}_paper"] != ""]
        if printed.empty:
            continue
        matched = int(printed[f"{q}_matches"].sum())
        conventions = ", ".join(
            f"{' · '.join(_key(r)[1:])}: {r[f'{q}_convention']}" for r in printed.to_dict("records")
        )
        lines.append(
            f"{_headings(spec)[q]}: {matched}/{len(printed)} printed values match to their last "
            f"digit. How each printed value relates to ours: {conventions}."
        )
    return lines
