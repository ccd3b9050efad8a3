"""Paper tables in the paper's layout: mean ± spread over seeds (``spread``), difference
columns, and the paper's reported value beside every measured cell. Written as md, tex, csv
and html; ``report_caption`` is a table's caption in the Snakemake report.

Item spec keys (``manifest["spec"]``):

``rows`` / ``columns``
    label names (a string or a list); their distinct values, in the manifest's run
    order, give the table's rows and (nested) column headers.
``metric``
    metrics.json key or dotted path (``final_acc``, ``best_acc``, ``comm.total_bytes``).
``per_client``
    optional label name (e.g. ``client``): the metric is a per-client list
    (``final_acc_per_client``) and every client index becomes a value of that label.
``statistics``
    optional ``{label, values: {name: metrics.json key}}``: several metrics of each run,
    each a value of the new label ``label`` (FedHPL's lowest / average / highest client as
    columns; ``results.item_frame``).
``fmt``
    Python format for numbers, default ``"{:.2f}"``.
``multiply``
    optional factor applied to every measured value (1e-6: scalars in the paper's M).
``spread``
    ``std`` (default: the sample standard deviation over seeds) or ``se`` (its standard
    error, std/√n, as FedICON prints "mean (standard error)").
``metric_label`` / ``accuracy`` / ``caption``
    optional wording: how the metric is named, which accuracy it is (e.g.
    ``final-round``), extra caption text.
``diff``
    optional list of difference columns ``{name, label, minuend, subtrahend, pm,
    reported}``: for each row, the mean over the other column labels of
    (cell[label=minuend] − cell[label=subtrahend]). ``pm: std_diff`` (default) prints
    ``± mean std(minuend) − mean std(subtrahend)``, the formula that reproduces the
    Adapters paper's "Average difference" column (hence its negative ±); ``pm: none``
    prints no ±. ``reported`` names the labels that find the paper's value for the
    column (default: every other column label set to ``name``). ``inline: true`` keeps the
    difference per value of the other column labels instead of averaging over them: a
    column with ``label = name`` after each group's last column (FedICON's Δ per
    partition, looked up in the paper's values as that label value).
``versus``
    optional ``{label, value}`` (``label`` one of ``rows``): every measured cell also shows
    ``(|Δ|) ↑/↓``, its difference to the row with ``label = value`` in the same column
    (FedIns's arrows against FedAvg).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fedrepro.report import results
from fedrepro.report.output import write_text
from fedrepro.report.templates import metric_name, render, scale_note, tex_escape

MISSING = "—"
DAGGER = "†"
PARTIAL = "‡"
PM_KINDS = ("std_diff", "none")
# metrics that are accuracies in %: their cells get a chance level, 100 over the classes the
# runs tell apart (a difference, a count or a round has none)
ACCURACY = re.compile(r"^(final_|best_)?acc")


@dataclass(frozen=True)
class Table:
    """A computed table: the tidy cell frame plus the layout it is drawn in."""

    frame: pd.DataFrame  # one row per cell (row-major), incl. difference columns
    rows: list[str]
    columns: list[str]
    row_keys: list[tuple]
    col_keys: list[tuple]
    diffs: list[DiffSpec]


@dataclass(frozen=True)
class DiffSpec:
    """A parsed difference-column definition."""

    name: str
    label: str
    minuend: str
    subtrahend: str
    pm: str
    reported: dict[str, str]
    inline: bool = False


def _context(manifest: dict[str, Any]) -> str:
    return f"{manifest.get('paper', '?')}/{manifest.get('item', '?')}"


def _label_list(spec: dict[str, Any], key: str, where: str) -> list[str]:
    value = spec.get(key)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: spec key {key!r} must be a label name or a list of them")
    return value


def _parse_fmt(spec: dict[str, Any], where: str) -> str:
    fmt = spec.get("fmt", "{:.2f}")
    try:
        fmt.format(1.0)
    except (AttributeError, ValueError, IndexError, KeyError) as err:
        raise ValueError(f"{where}: spec key 'fmt' is not a number format: {fmt!r}") from err
    return fmt


def _parse_diffs(spec: dict[str, Any], columns: list[str], where: str) -> list[DiffSpec]:
    diffs = spec.get("diff") or []
    if isinstance(diffs, dict):
        diffs = [diffs]
    parsed = []
    for i, d in enumerate(diffs):
        at = f"{where}: spec key 'diff[{i}]'"
        if not isinstance(d, dict):
            raise ValueError(f"{at} must be a mapping")
        for key in ("name", "label", "minuend", "subtrahend"):
            if not isinstance(d.get(key), str):
                raise ValueError(f"{at}.{key} is required (a string)")
        if d["label"] not in columns:
            raise ValueError(f"{at}.label {d['label']!r} is not one of the columns {columns}")
        pm = d.get("pm", "std_diff")
        if pm not in PM_KINDS:
            raise ValueError(f"{at}.pm must be one of {PM_KINDS}, got {pm!r}")
        others = [c for c in columns if c != d["label"]]
        reported = d.get("reported") or {c: d["name"] for c in others}
        inline = d.get("inline", False)
        if not isinstance(inline, bool):
            raise ValueError(f"{at}.inline must be true or false, got {inline!r}")
        parsed.append(
            DiffSpec(d["name"], d["label"], d["minuend"], d["subtrahend"], pm, reported, inline)
        )
    return parsed


# spec key ``spread`` -> (what a cell's ± is, its short name in a difference column's ±)
SPREADS = {
    "std": ("sample standard deviation (ddof=1)", "std"),
    "se": ("standard error (sample standard deviation, ddof=1, over √n)", "se"),
}
# the marks a measured or difference cell may carry, and what each means
MARKS = {
    DAGGER: "at least one seed diverged (non-finite aggregate or loss); the cell summarises "
    "its finite seeds.",
    PARTIAL: "not every run (or algorithm pair) of the cell is available; partial summary.",
    MISSING: "no finished run for this cell.",
}


def _spread(spec: dict[str, Any], where: str) -> str:
    spread = spec.get("spread", "std")
    if spread not in SPREADS:
        raise ValueError(f"{where}: spec key 'spread' is {spread!r} (allowed: std, se)")
    return spread


def cells_note(spec: dict[str, Any]) -> str:
    """What every measured cell of a table item is: the mean ± its ``spread`` over seeds."""
    return f"each cell is the mean ± {SPREADS[_spread(spec, '')][0]} over seeds"


def diff_lines(spec: dict[str, Any], diffs: list[DiffSpec]) -> list[str]:
    """What each difference column is and what its ± is."""
    short = SPREADS[_spread(spec, "")][1]
    lines = []
    for d in diffs:
        pm = (
            f"its ± is mean {short}({d.minuend}) − mean {short}({d.subtrahend}) over the same "
            "pairs (the formula that reproduces the paper's printed values; it can be negative)"
            if d.pm == "std_diff"
            else "no ± is given"
        )
        what = (
            f"{d.minuend} − {d.subtrahend} in each column group"
            if d.inline
            else f"mean of ({d.minuend} − {d.subtrahend}) over the row's pairs"
        )
        lines.append(f"{d.name} = {what}; {pm}.")
    return lines


def report_caption(kind: str, spec: dict[str, Any]) -> str:
    """An item's cells and marks for its caption in the Snakemake report (``report/
    table.rst``): which ± this table prints (its ``spread``, its difference columns') and
    what each mark means (the table's own files note only the marks they print)."""
    if kind in ("payload", "parameters"):  # counts of paper-scale architectures
        return (
            "Each cell is a count computed from the paper-scale architecture (no seeds, no ±); "
            "the paper's printed value stands beside it where the paper prints one."
        )
    if kind != "table":
        return ""
    columns = _label_list(spec, "columns", "caption")
    note = cells_note(spec)
    lines = [
        f"{note[0].upper()}{note[1:]}, in the paper's layout. The value the paper reports for "
        "the same cell is given in brackets beside ours ([paper …], with the ± the paper "
        "prints).",
        *diff_lines(spec, _parse_diffs(spec, columns, "caption")),
        *(f"{mark} {meaning}" for mark, meaning in MARKS.items()),
    ]
    return " ".join(lines)


def _fmt_pm(mean: float, std: float, fmt: str) -> str:
    """``mean ± std``; a dash for a missing mean; no ± when std is undefined."""
    if not math.isfinite(mean):
        return MISSING
    text = fmt.format(mean)
    if math.isfinite(std):
        text += " ± " + fmt.format(std)
    return text


def _diff_cell(
    stats: dict[tuple, dict[str, Any]],
    row_key: tuple,
    col_keys: list[tuple],
    columns: list[str],
    diff: DiffSpec,
) -> dict[str, Any]:
    """Mean over matched pairs of (minuend − subtrahend), and its ± per ``diff.pm``."""
    at = columns.index(diff.label)
    lefts = [k for k in col_keys if str(k[at]) == diff.minuend]
    pairs = []
    for left in lefts:
        right = (*left[:at], diff.subtrahend, *left[at + 1 :])
        a, b = stats.get((*row_key, *left)), stats.get((*row_key, *right))
        if a and b and math.isfinite(a["mean"]) and math.isfinite(b["mean"]):
            pairs.append((a, b))
    if not pairs:
        return {"mean": math.nan, "std": math.nan, "n": 0, "expected": len(lefts)}
    n = len(pairs)
    mean = sum(a["mean"] - b["mean"] for a, b in pairs) / n
    std = math.nan
    if diff.pm == "std_diff":
        std = sum(a["std"] for a, _ in pairs) / n - sum(b["std"] for _, b in pairs) / n
    return {"mean": mean, "std": std, "n": len(pairs), "expected": len(lefts)}


def _inline_columns(
    col_keys: list[tuple], columns: list[str], diffs: list[DiffSpec]
) -> tuple[list[tuple], dict[tuple, tuple[DiffSpec, list[tuple]]]]:
    """The column keys with each inline difference column placed after the last column of
    its group (the other labels' values), and for each such column its spec and the
    group's measured keys."""
    layout = list(col_keys)
    inline: dict[tuple, tuple[DiffSpec, list[tuple]]] = {}
    for diff in (d for d in diffs if d.inline):
        at = columns.index(diff.label)
        groups: dict[tuple, list[tuple]] = {}
        for key in col_keys:
            groups.setdefault((*key[:at], *key[at + 1 :]), []).append(key)
        for group, keys in groups.items():
            virtual = (*group[:at], diff.name, *group[at:])
            last = max(i for i, k in enumerate(layout) if k in keys)
            layout.insert(last + 1, virtual)
            inline[virtual] = (diff, keys)
    return layout, inline


def _versus_text(
    stats: dict[tuple, dict[str, Any]],
    rows: list[str],
    row_key: tuple,
    col_key: tuple,
    versus: dict[str, Any],
    mean: float,
    fmt: str,
) -> str:
    """`` (|Δ|) ↑`` / ``↓`` against the reference row; empty when either side is missing."""
    at = rows.index(versus["label"])
    ref_key = (*row_key[:at], str(versus["value"]), *row_key[at + 1 :])
    ref = stats.get((*ref_key, *col_key))
    if ref is None or not (math.isfinite(mean) and math.isfinite(ref["mean"])):
        return ""
    delta = mean - ref["mean"]
    shown = fmt.format(abs(delta))
    # no arrow for a gap that prints as zero
    arrow = "" if float(shown) == 0 else "↑" if delta > 0 else "↓"
    return f" ({shown}){' ' + arrow if arrow else ''}"


def build_table(manifest: dict[str, Any], reported: pd.DataFrame | None) -> Table:
    """Compute every cell (mean ± std over seeds, difference columns, paper values)."""
    where = _context(manifest)
    spec = manifest.get("spec", {})
    rows = _label_list(spec, "rows", where)
    columns = _label_list(spec, "columns", where)
    metric = spec.get("metric", "final_acc")
    fmt = _parse_fmt(spec, where)
    diffs = _parse_diffs(spec, columns, where)
    versus = spec.get("versus")
    if versus is not None and (not isinstance(versus, dict) or versus.get("label") not in rows):
        raise ValueError(f"{where}: spec key 'versus' must be {{label: <one of {rows}>, value}}")

    runs = results.item_frame(manifest, metric)
    runs["value"] = runs["value"] * float(spec.get("multiply", 1.0))
    results.check_cells_unique(runs, rows + columns, where)
    if runs.empty:
        runs = runs.reindex(columns=[*rows, *columns, *runs.columns])
    stats_frame = results.cell_stats(runs, rows + columns)
    if _spread(spec, where) == "se":  # the standard error of the mean, as FedICON prints
        stats_frame["std"] = stats_frame["std"] / np.sqrt(stats_frame["n_finite"].clip(lower=1))
    stats = {
        tuple(rec[: len(rows + columns)]): dict(zip(stats_frame.columns, rec, strict=True))
        for rec in stats_frame.itertuples(index=False, name=None)
    }
    row_keys = results.unique_keys(runs, rows) if not runs.empty else []
    col_keys = results.unique_keys(runs, columns) if not runs.empty else []
    col_keys, inline = _inline_columns(col_keys, columns, diffs)
    item = manifest.get("item", "")
    accuracy = ACCURACY.match(metric) is not None and not spec.get("multiply")

    def record(labels: dict[str, Any], column: str, kind: str, cell: dict[str, Any], text: str,
               paper: tuple[float, float] | None) -> dict[str, Any]:  # fmt: skip
        return {
            **labels,
            "column": column,
            "kind": kind,
            "n": cell["n"],
            "n_finite": cell["n_finite"],
            "mean": cell["mean"],
            "std": cell["std"],
            "diverged": bool(cell["diverged"]),
            "chance": 100.0 / cell["classes"] if accuracy and kind == "measured" else math.nan,
            "text": text,
            "paper_value": paper[0] if paper else math.nan,
            "paper_std": paper[1] if paper else math.nan,
            "paper_text": _fmt_pm(*paper, fmt) if paper else "",
        }

    def diff_record(row_key: tuple, keys: list[tuple], diff: DiffSpec, labels: dict[str, Any],
                    paper_labels: dict[str, Any], column: str) -> dict[str, Any]:  # fmt: skip
        d = _diff_cell(stats, row_key, keys, columns, diff)
        text = _fmt_pm(d["mean"], d["std"], fmt)
        if 0 < d["n"] < d["expected"]:
            text += PARTIAL
        paper = results.lookup_reported(reported, item, paper_labels)
        cell = {**d, "n_finite": d["n"], "diverged": False, "classes": math.nan}
        return record(labels, column, "diff", cell, text, paper)

    empty = {"n": 0, "n_finite": 0, "mean": math.nan, "std": math.nan, "diverged": False,
             "classes": math.nan}  # fmt: skip
    records = []
    for row_key in row_keys:
        row_labels = dict(zip(rows, row_key, strict=True))
        for col_key in col_keys:
            col_labels = {c: str(v) for c, v in zip(columns, col_key, strict=True)}
            if col_key in inline:
                diff, keys = inline[col_key]
                labels = {**row_labels, **col_labels}
                records.append(
                    diff_record(
                        row_key, keys, diff, labels, labels, " / ".join(col_labels.values())
                    )
                )
                continue
            st = stats.get((*row_key, *col_key))
            text = MISSING if st is None else _fmt_pm(st["mean"], st["std"], fmt)
            if st is not None and st["diverged"]:
                text += DAGGER
            if st is not None and 0 < st["n_present"] < st["n"]:
                text += PARTIAL
            if versus is not None and st is not None:
                text += _versus_text(stats, rows, row_key, col_key, versus, st["mean"], fmt)
            paper = results.lookup_reported(reported, item, {**row_labels, **col_labels})
            column = " / ".join(col_labels.values())
            labels = {**row_labels, **col_labels}
            records.append(record(labels, column, "measured", st or empty, text, paper))
        for diff in trailing(diffs):
            labels = {**row_labels, **dict.fromkeys(columns, "")}
            paper_labels = {**row_labels, **diff.reported}
            records.append(diff_record(row_key, col_keys, diff, labels, paper_labels, diff.name))
    frame = pd.DataFrame.from_records(
        records,
        columns=[*rows, *columns, "column", "kind", "n", "n_finite", "mean", "std", "diverged"]
        + ["chance", "text", "paper_value", "paper_std", "paper_text"],
    )
    return Table(frame, rows, columns, row_keys, col_keys, diffs)


def trailing(diffs: list[DiffSpec]) -> list[DiffSpec]:
    """The difference columns drawn after every measured column (not inline)."""
    return [d for d in diffs if not d.inline]


def header_rows(col_keys: list[tuple], diff_names: list[str]) -> list[list[dict[str, Any]]]:
    """Nested html header rows: consecutive columns sharing a label prefix are merged."""
    levels = len(col_keys[0]) if col_keys else 1
    header: list[list[dict[str, Any]]] = []
    for level in range(levels):
        entries: list[dict[str, Any]] = []
        for key in col_keys:
            prefix = key[: level + 1]
            if entries and entries[-1]["prefix"] == prefix:
                entries[-1]["colspan"] += 1
            else:
                entries.append(
                    {"text": str(key[level]), "colspan": 1, "rowspan": 1, "prefix": prefix}
                )
        header.append(entries)
    header[0] += [{"text": n, "colspan": 1, "rowspan": levels, "prefix": ()} for n in diff_names]
    return header


def _tex_header_rows(
    header: list[list[dict[str, Any]]], row_label_names: list[str]
) -> list[list[str]]:
    """LaTeX header lines: multicolumn for spans, blanks under row-spanning cells."""
    lines = []
    for level, entries in enumerate(header):
        last = level == len(header) - 1
        cells = [tex_escape(n) if last else "" for n in row_label_names]
        for e in entries:
            text = tex_escape(e["text"])
            cells.append(
                rf"\multicolumn{{{e['colspan']}}}{{c}}{{{text}}}" if e["colspan"] > 1 else text
            )
        if level > 0:
            cells += [""] * sum(1 for e in header[0] if e["rowspan"] > 1)
        lines.append(cells)
    return lines


def row_entries(row_keys: list[tuple]) -> list[list[dict[str, Any]]]:
    """Row-label cells: shown on the first row of a run of equal prefixes, with its rowspan."""
    out = []
    for i, key in enumerate(row_keys):
        labels = []
        for level in range(len(key)):
            prefix = key[: level + 1]
            show = i == 0 or row_keys[i - 1][: level + 1] != prefix
            span = 1
            while show and i + span < len(row_keys) and row_keys[i + span][: level + 1] == prefix:
                span += 1
            labels.append({"text": str(key[level]), "show": show, "rowspan": span})
        out.append(labels)
    return out


def _caption_lines(
    manifest: dict[str, Any], frame: pd.DataFrame, diffs: list[DiffSpec], reported: bool
) -> list[str]:
    spec = manifest.get("spec", {})
    metric = spec.get("metric", "final_acc")
    measured = frame[frame["kind"] == "measured"]
    seeds = sorted(set(measured["n"].tolist()) - {0})
    n_text = "–".join(str(s) for s in (seeds[:1] + seeds[-1:] if len(seeds) > 1 else seeds))
    accuracy = f" — {spec['accuracy']} accuracy" if spec.get("accuracy") else ""
    lines = [
        f"Metric: {metric_name(metric, spec.get('metric_label'))} (`{metric}`){accuracy}; "
        f"{cells_note(spec)} (n = {n_text or 0} per cell)."
    ]
    if reported:
        lines.append("[paper …] is the value the paper reports for the same cell.")
    lines += diff_lines(spec, diffs)
    if spec.get("caption"):
        lines.append(str(spec["caption"]))
    return lines


def _footnotes(frame: pd.DataFrame) -> list[str]:
    printed = {
        DAGGER: frame["text"].str.contains(DAGGER, regex=False).any(),
        PARTIAL: frame["text"].str.contains(PARTIAL, regex=False).any(),
        MISSING: frame["text"].str.startswith(MISSING).any(),
    }
    return [f"{mark} {meaning}" for mark, meaning in MARKS.items() if printed[mark]]


def make_table(
    manifest: dict[str, Any],
    out_prefix: str | Path,
    reported_csv: str | Path | None = None,
) -> list[Path]:
    """Write ``<out_prefix>.{md,tex,csv,html}`` for one table item; returns the paths."""
    where = _context(manifest)
    reported = results.read_reported(reported_csv or manifest.get("reported"))
    table = build_table(manifest, reported)
    frame, diffs = table.frame, table.diffs
    column_names = [" / ".join(str(v) for v in k) for k in table.col_keys]
    column_names += [d.name for d in trailing(diffs)]
    cells = frame.to_dict("records")
    width = len(column_names)
    labels = row_entries(table.row_keys)
    table_rows = [
        {
            "labels": labels[i],
            "cells": [
                {
                    "text": c["text"],
                    "paper": c["paper_text"],
                    "missing": c["text"].startswith(MISSING),
                    "is_diff": c["kind"] == "diff",
                }
                for c in cells[i * width : (i + 1) * width]
            ],
        }
        for i in range(len(table.row_keys))
    ]
    return write_table(
        out_prefix,
        frame,
        title=manifest.get("title", where),
        label=where.replace("/", "-"),
        scale=manifest.get("scale", "mini"),
        caption_lines=_caption_lines(manifest, frame, diffs, reported is not None),
        row_label_names=[r.capitalize() for r in table.rows],
        header=header_rows(table.col_keys, [d.name for d in trailing(diffs)]),
        column_names=column_names,
        rows=table_rows,
        footnotes=_footnotes(frame),
    )


def write_table(
    out_prefix: str | Path,
    frame: pd.DataFrame,
    *,
    title: str,
    label: str,
    scale: str,
    caption_lines: list[str],
    row_label_names: list[str],
    header: list[list[dict[str, Any]]],
    column_names: list[str],
    rows: list[dict[str, Any]],
    footnotes: list[str],
    note: str | None = None,
) -> list[Path]:
    """Render one table as ``<out_prefix>.{md,tex,html}`` plus its tidy ``frame`` as csv.

    ``rows``: ``{"labels": row-label cells, "cells": [{"text", "paper", "missing",
    "is_diff"}]}``; ``note`` replaces the scale sentence (structural tables)."""
    context = {
        "title": title,
        "label": label,
        "scale": scale,
        "is_mini": scale == "mini" and note is None,
        "scale_note": note or scale_note(scale),
        "caption_lines": caption_lines,
        "row_label_names": row_label_names,
        "header_rows": header,
        "tex_header_rows": _tex_header_rows(header, row_label_names),
        "md_headers": column_names,
        "ncols": len(column_names),
        "rows": rows,
        "footnotes": footnotes,
    }
    out = Path(out_prefix)
    return [
        write_text(f"{out}.md", render("table.md", **context)),
        write_text(f"{out}.tex", render("table.tex", **context)),
        write_text(f"{out}.html", render("table.html", **context)),
        write_text(f"{out}.csv", frame.to_csv(index=False)),
    ]
