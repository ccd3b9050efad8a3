"""Whether the embedded default learns, per paper: its table cells against chance and its
claims against the paper's (the time budget's page shows both beside the minutes).

A table cell of an accuracy has a chance level (``chance`` in the item's CSV: 100 over the
classes its runs tell apart, ``report.tables``). Per paper, from ``tables/<paper>/*.csv``:
the accuracy cells measured, those at least twice chance, and, of the cells the paper reports
at three times chance or more, those at least twice chance on ours (the failing ones are
listed). From ``claims/<paper>.csv``: the claims that hold on ours, and of those that hold on
the paper's own numbers, the ones that hold on ours too; each of the others owes its reason to
the paper's method notes (``docs/methods/<paper>.md``), and the ones those notes never name
are listed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

TWICE, THRICE = 2.0, 3.0
CELL_COLUMNS = ("mean", "chance", "paper_value")


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path, keep_default_na=False, na_values=[""])
    except (OSError, pd.errors.EmptyDataError):
        return pd.DataFrame()


def _cell_name(row: pd.Series, labels: list[str]) -> str:
    return " · ".join(str(row[c]) for c in labels if str(row[c]) not in ("", "nan"))


def accuracy_cells(root: str | Path, paper: str) -> pd.DataFrame:
    """Every measured accuracy cell of the paper's tables: ``item``, ``cell`` (its labels),
    ``mean``, ``chance``, ``paper_value`` (NaN where the paper prints none)."""
    frames = []
    for path in sorted(Path(root, "tables", paper).glob("*.csv")):
        table = _read_csv(path)
        if table.empty or not {"chance", "kind", "column"} <= set(table.columns):
            continue
        table = table[(table["kind"] == "measured") & table["chance"].notna()]
        labels = list(table.columns[: list(table.columns).index("column")])
        frames.append(pd.DataFrame({
            "item": path.stem,
            "cell": [_cell_name(r, labels) for _, r in table.iterrows()],
            **{c: pd.to_numeric(table[c], errors="coerce") for c in CELL_COLUMNS},
        }))  # fmt: skip
    if not frames:
        return pd.DataFrame(columns=["item", "cell", *CELL_COLUMNS])
    return pd.concat(frames, ignore_index=True)


def _claims(root: str | Path, paper: str) -> pd.DataFrame:
    claims = _read_csv(Path(root, "claims", f"{paper}.csv"))
    if claims.empty or "holds_ours" not in claims:
        return pd.DataFrame(columns=["claim", "holds_paper", "holds_ours"])
    return claims


def _true(column: pd.Series) -> pd.Series:
    return column.astype(str).str.lower() == "true"


def unexplained(claim_ids: list[str], notes: Path) -> list[str]:
    """The claims of ``claim_ids`` that the method notes ``notes`` never name (as a whole
    word: ``a_b`` does not name ``a_b_c``); every one when the notes are missing."""
    try:
        text = notes.read_text()
    except OSError:
        return list(claim_ids)
    return [c for c in claim_ids if not re.search(rf"(?<!\w){re.escape(c)}(?!\w)", text)]


def paper_learning(root: str | Path, paper: str, docs: str | Path | None = None) -> dict:
    """The paper's counts (see the module's docstring), its failing reported cells and, with
    the method notes' folder ``docs``, the paper's holding claims that fail on ours and have
    no reason there."""
    cells = accuracy_cells(root, paper).dropna(subset=["mean"])
    above = cells["mean"] >= TWICE * cells["chance"]
    reported = cells["paper_value"] >= THRICE * cells["chance"]
    claims = _claims(root, paper)
    ours, theirs = _true(claims["holds_ours"]), _true(claims["holds_paper"])
    failing = cells[reported & ~above]
    lost = claims.loc[theirs & ~ours, "claim"].astype(str).tolist()
    return {
        "cells": len(cells),
        "cells_twice_chance": int(above.sum()),
        "reported_thrice": int(reported.sum()),
        "reported_thrice_ours_twice": int((reported & above).sum()),
        "claims": len(claims),
        "claims_hold": int(ours.sum()),
        "paper_claims": int(theirs.sum()),
        "paper_claims_hold": int((theirs & ours).sum()),
        "no_reason": None if docs is None else unexplained(lost, Path(docs, f"{paper}.md")),
        "below": [
            {
                "item": r.item,
                "cell": r.cell,
                "mean": r.mean,
                "chance": r.chance,
                "paper_value": r.paper_value,
            }
            for r in failing.itertuples()
        ],  # fmt: skip
    }


def share(k: int, n: int) -> str:
    """``k/n (p %)``, or a dash for nothing counted."""
    return f"{k}/{n} ({k / n:.0%})" if n else "—"
