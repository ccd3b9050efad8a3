"""The report's first page: per paper, how many of its result tables and figures were
regenerated, how close our cells are to the paper's, which claims hold on its numbers and on
ours, what the paper scale would cost; and one scatter of every accuracy cell that has a
paper value (ours against the paper's).

Reads only files other jobs wrote: each item's csv (``report.tables``: ``mean`` and
``paper_value`` per cell; ``report.parameters``: ``<q>_matches`` per structural count), each
paper's claims csv, the cost model's ``cost.json`` (``bench.cost``), and the hand-made list
of the papers' own tables and figures (``config/reported/contents.csv``).
"""

from __future__ import annotations

import base64
import io
import json
import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from markupsafe import Markup

from fedrepro.report.output import save_figure, write_text
from fedrepro.report.tables import ACCURACY
from fedrepro.report.templates import render, scale_note, short_scale_note

CONTENTS_COLUMNS = ["paper", "ref", "kind", "result", "items", "note"]
CELL_KINDS = ("measured", "diff")  # table rows that carry a number of ours
NEAR = 5.0  # points: a cell "near" the paper's


def read_contents(path: str | Path) -> pd.DataFrame:
    """The papers' own tables and figures, one row each; ``items``: our items regenerating it."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in CONTENTS_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}")
    bad = sorted(set(frame["result"]) - {"true", "false"})
    if bad:
        raise ValueError(f"{path}: column result must be true or false, not {bad}")
    frame["result"] = frame["result"] == "true"
    frame["items"] = frame["items"].map(lambda s: [i for i in s.split(";") if i])
    return frame


def check_contents(contents: pd.DataFrame, papers: dict[str, list[str]]) -> None:
    """Every item a row names is one of the paper's items; every result nobody regenerates says
    why (its note)."""
    for row in contents.itertuples():
        if row.paper not in papers:
            continue
        unknown = sorted(set(row.items) - set(papers[row.paper]))
        if unknown:
            raise ValueError(f"contents {row.paper} {row.ref}: unknown items {unknown}")
        if row.result and not row.items and not row.note:
            raise ValueError(f"contents {row.paper} {row.ref}: a result with no item and no note")


def table_cells(paper: str, item: str, csv: str | Path, metric: str | None) -> pd.DataFrame:
    """An item's cells that have both our number and the paper's (tables only)."""
    frame = pd.read_csv(csv)
    if not {"mean", "paper_value", "kind"} <= set(frame.columns):
        return pd.DataFrame(columns=["paper", "item", "column", "ours", "paper_value", "accuracy"])
    keep = frame["kind"].isin(CELL_KINDS) & frame["mean"].notna() & frame["paper_value"].notna()
    cells = frame.loc[keep, ["column", "mean", "paper_value"]].rename(columns={"mean": "ours"})
    cells.insert(0, "item", item)
    cells.insert(0, "paper", paper)
    cells["accuracy"] = bool(metric and ACCURACY.match(metric))
    return cells.reset_index(drop=True)


def structural_matches(csv: str | Path) -> tuple[int, int]:
    """(counts that match the printed value, counts with a printed value) of a parameters item."""
    frame = pd.read_csv(csv)
    cols = [c for c in frame.columns if c.endswith("_matches")]
    values = pd.concat([frame[c] for c in cols]) if cols else pd.Series(dtype=object)
    values = values.dropna().map(lambda v: str(v).strip().lower() == "true")
    return int(values.sum()), int(len(values))


def _holds(values: pd.Series) -> tuple[int, int]:
    """(claims that hold, claims that could be evaluated) of a claims csv column."""
    text = values.map(lambda v: "" if pd.isna(v) else str(v).strip().lower())
    return int((text == "true").sum()), int(text.isin(["true", "false"]).sum())


def closeness(cells: pd.DataFrame) -> dict[str, Any]:
    """How close our accuracy cells are to the paper's: count, median |ours − paper| in points,
    the share within ``NEAR`` points, Pearson's r (from three cells)."""
    acc = cells[cells["accuracy"]]
    gap = (acc["ours"] - acc["paper_value"]).abs()
    r = math.nan
    if len(acc) >= 3 and acc["ours"].std() > 0 and acc["paper_value"].std() > 0:
        r = float(np.corrcoef(acc["ours"], acc["paper_value"])[0, 1])
    return {
        "cells": len(acc),
        "other_cells": len(cells) - len(acc),
        "median_gap": float(gap.median()) if len(acc) else math.nan,
        "near": float((gap <= NEAR).mean()) if len(acc) else math.nan,
        "r": r,
    }


def summarise(spec: dict[str, Any], contents: pd.DataFrame, cost: dict[str, Any]) -> tuple:
    """One summary row per paper and every cell with a paper value (the scatter)."""
    rows, all_cells = [], []
    for paper, entry in spec["papers"].items():
        own = contents[contents["paper"] == paper]
        if own.empty:  # no paper's tables of its own (the shared baselines): no row
            continue
        results = own[own["result"]]
        built = results[results["items"].map(bool)]
        cells = [table_cells(paper, i, e["csv"], e.get("metric"))
                 for i, e in entry["items"].items() if e["kind"] == "table"]  # fmt: skip
        cells = pd.concat(cells, ignore_index=True) if cells else table_cells(paper, "", "", None)
        all_cells.append(cells)
        matched = [structural_matches(e["csv"]) for e in entry["items"].values()
                   if e["kind"] == "parameters"]  # fmt: skip
        claims = pd.read_csv(entry["claims"]) if entry.get("claims") else pd.DataFrame()
        paper_cost = cost.get("papers", {}).get(paper, {})
        rows.append(
            {
                "paper": paper,
                "title": entry.get("title", paper),
                "results": len(results),
                "regenerated": len(built),
                "not_regenerated": "; ".join(
                    f"{r.ref} ({r.note})" for r in results.itertuples() if not r.items
                ),
                "items": len(entry["items"]),
                **closeness(cells),
                "structural_match": sum(m for m, _ in matched),
                "structural": sum(n for _, n in matched),
                "claims": len(claims),
                "hold_paper": _holds(claims.get("holds_paper", pd.Series(dtype=object)))[0],
                "evaluable_paper": _holds(claims.get("holds_paper", pd.Series(dtype=object)))[1],
                "hold_ours": _holds(claims.get("holds_ours", pd.Series(dtype=object)))[0],
                "evaluable_ours": _holds(claims.get("holds_ours", pd.Series(dtype=object)))[1],
                "gpu_hours": paper_cost.get("gpu_hours", math.nan),
                "runs": paper_cost.get("runs", math.nan),
            }
        )
    frame = pd.DataFrame.from_records(rows)
    cells = pd.concat(all_cells, ignore_index=True) if all_cells else pd.DataFrame()
    return frame, cells


def plot_scatter(cells: pd.DataFrame, scale: str) -> plt.Figure:
    """Ours against the paper's, one colour per paper, the diagonal drawn."""
    fig, ax = plt.subplots(figsize=(6.4, 6.0), layout="constrained")
    acc = cells[cells["accuracy"]] if len(cells) else cells
    for paper, group in acc.groupby("paper", sort=False):
        ax.scatter(group["paper_value"], group["ours"], s=14, alpha=0.7,
                   label=f"{paper} ({len(group)})")  # fmt: skip
    ax.plot([0, 100], [0, 100], color="#555", lw=1, ls="--", label="ours = paper")
    ax.set(xlim=(0, 100), ylim=(0, 100), aspect="equal",
           xlabel="paper's value (%)", ylabel="our value (%)")  # fmt: skip
    # two lines: the scale's note alone is about as wide as the axes
    ax.set_title(f"Every accuracy cell with a paper value\n{short_scale_note(scale)}",
                 fontsize=9)  # fmt: skip
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def _png_data(fig: plt.Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _text(value: float, fmt: str) -> str:
    missing = value is None or (isinstance(value, float) and math.isnan(value))
    return "—" if missing else fmt.format(value)


def _of(part: int, whole: int) -> str:
    return f"{part} of {whole}" if whole else "—"


def _context(frame: pd.DataFrame, cost: dict[str, Any], scale: str) -> dict[str, Any]:
    rows = []
    for r in frame.to_dict("records"):
        other = f" (+{r['other_cells']} other)" if r["other_cells"] else ""
        rows.append(
            {
                **r,
                "regenerated_text": _of(r["regenerated"], r["results"]),
                "cells_text": f"{r['cells']}{other}",
                "gap_text": _text(r["median_gap"], "{:.1f}"),
                "near_text": _text(r["near"] * 100 if r["cells"] else math.nan, "{:.0f} %"),
                "r_text": _text(r["r"], "{:.2f}"),
                "structural_text": _of(r["structural_match"], r["structural"]),
                "claims_paper_text": _of(r["hold_paper"], r["evaluable_paper"]),
                "claims_ours_text": _of(r["hold_ours"], r["evaluable_ours"]),
                "cost_text": _text(r["gpu_hours"], "{:,.0f}"),
                "runs_text": _text(r["runs"], "{:,.0f}"),
            }
        )
    totals = {
        "results": int(frame["results"].sum()) if len(frame) else 0,
        "regenerated": int(frame["regenerated"].sum()) if len(frame) else 0,
        "cells": int(frame["cells"].sum()) if len(frame) else 0,
        "gpu_hours": _text(cost.get("total_gpu_hours", math.nan), "{:,.0f}"),
    }
    return {
        "scale": scale,
        "is_mini": scale != "paper",
        "scale_note": scale_note(scale),
        "rows": rows,
        "totals": totals,
        "near": NEAR,
        "cost_device": cost.get("device", "no cost model"),
        "cost_throughput": cost.get("throughput", ""),
    }


def make_overview(spec: dict[str, Any], contents_csv: str | Path, cost_json: str | Path,
                  out_prefix: str | Path) -> list[Path]:  # fmt: skip
    """Write ``<out>.{md,csv,html}``, ``<out>_fragment.html`` (the report's first page),
    ``<out>_cells.csv`` and the scatter ``<out>.{png,pdf}``."""
    contents = read_contents(contents_csv)
    check_contents(contents, {p: list(e["items"]) for p, e in spec["papers"].items()})
    cost = json.loads(Path(cost_json).read_text()) if cost_json else {}
    frame, cells = summarise(spec, contents, cost)
    scale = spec["scale"]
    fig = plot_scatter(cells, scale)
    out = Path(out_prefix)
    written = save_figure(fig, out)
    context = {**_context(frame, cost, scale), "png": Markup(_png_data(fig))}
    plt.close(fig)
    fragment = render("overview_fragment.html", **context)
    return written + [
        write_text(f"{out}.csv", frame.to_csv(index=False)),
        write_text(f"{out}_cells.csv", cells.to_csv(index=False)),
        write_text(f"{out}.md", render("overview.md", **context)),
        write_text(f"{out}_fragment.html", fragment),
        write_text(f"{out}.html", render("overview.html", fragment=Markup(fragment))),
    ]
