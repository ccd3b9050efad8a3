"""Evaluate a paper's headline claims (data, see docs/claims.md) on its numbers and on ours.

A claim selects cells — the per-cell mean (or std) over seeds of one metric — from one or
more items and tests them: two selections paired on labels (``pairwise``), one selection
against a constant (``constant``), or a selection being the top/bottom of each group
(``rank``). The same claim runs on the paper's reported numbers and on our runs, so the
claims table shows at a glance what reproduces.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fedrepro.experiments.items import structure_quantities
from fedrepro.report import results
from fedrepro.report.output import write_text
from fedrepro.report.parameters import printed_scalars
from fedrepro.report.templates import render, scale_note

KINDS = ("pairwise", "constant", "rank")
COMMON_KEYS = ("id", "text", "kind", "item", "stat", "metric", "note")
KIND_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "pairwise": (("left", "right", "pair_on", "test"), ("quantifier", "contrast", "combine")),
    "constant": (("select", "test"), ("quantifier",)),
    "rank": (("select",), ("group_by", "among", "rank", "quantifier")),
}
QUANTIFIERS = {
    "pairwise": ("all", "any", "mean", "most"),
    "constant": ("all", "any", "mean", "most"),
    "rank": ("all", "any", "most"),
}
QUANTITIES = {"pairwise": ("diff", "abs_diff", "ratio"), "constant": ("value",)}
OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
    "==": operator.eq,
    "!=": operator.ne,
}
STATS = ("mean", "std")
COMBINES = ("mean", "min", "max")  # how a pairwise side's cells of one unit combine
# a history-derived metric: the first round from which <column> of history.csv stays
# within <tol> points of its last round's value (docs/claims.md, "Metrics from history")
SETTLE_RE = re.compile(r"^settle_round\(\s*([A-Za-z_]\w*)\s*,\s*(\d+(?:\.\d*)?)\s*\)$")
TEST_RE = re.compile(r"^\s*([a-z_]+)\s*(<=|>=|==|!=|<|>)\s*(-?\d+(?:\.\d*)?(?:e-?\d+)?)\s*$")
VALUE_COLUMNS = ("item", "mean", "std", "n")
RESULT_COLUMNS = ["claim", "text", "paper_value", "ours", "holds_paper", "holds_ours", "detail"]
MAX_LISTED = 4


@dataclass(frozen=True)
class Test:
    """``<quantity> <op> <number>``, parsed."""

    quantity: str
    op: str
    threshold: float

    def __call__(self, value: float) -> bool:
        return OPS[self.op](value, self.threshold)


@dataclass(frozen=True)
class Claim:
    """A validated claim (see docs/claims.md for the grammar)."""

    id: str
    text: str
    kind: str
    item: str | None
    stat: str
    metric: str | None
    quantifier: str
    test: Test | None = None
    left: dict[str, Any] = field(default_factory=dict)
    right: dict[str, Any] = field(default_factory=dict)
    pair_on: list[str] = field(default_factory=list)
    select: dict[str, Any] = field(default_factory=dict)
    group_by: list[str] = field(default_factory=list)
    among: dict[str, Any] = field(default_factory=dict)
    rank: str = "max"
    contrast: tuple[str, str, tuple[str, ...]] | None = None  # (label, first, others)
    combine: str = "mean"


def _fail(cid: str, key: str, why: str) -> ValueError:
    return ValueError(f"claim {cid!r}: key {key!r}: {why}")


def _selection(cid: str, key: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(cid, key, "must be a mapping of label -> value or list of values")
    for label, v in value.items():
        ok = isinstance(v, str | int | float) or (
            isinstance(v, list) and v and all(isinstance(x, str | int | float) for x in v)
        )
        if not isinstance(label, str) or not ok:
            raise _fail(cid, key, f"label {label!r} needs a value or a non-empty list of values")
    return value


def _label_names(cid: str, key: str, value: Any, allow_empty: bool) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(cid, key, "must be a label name or a list of label names")
    if not value and not allow_empty:
        raise _fail(cid, key, "must name at least one label")
    return value


def parse_claim(raw: Any, index: int) -> Claim:
    """Validate one claim; a bad spec raises a one-line ValueError naming the id and key."""
    if not isinstance(raw, dict):
        raise ValueError(f"claim #{index}: must be a mapping, got {type(raw).__name__}")
    cid = raw.get("id")
    if not isinstance(cid, str) or not cid:
        raise ValueError(f"claim #{index}: key 'id': required (a non-empty string)")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise _fail(cid, "kind", f"must be one of {KINDS}, got {kind!r}")
    required, optional = KIND_KEYS[kind]
    for key in raw:
        if key not in (*COMMON_KEYS, *required, *optional):
            raise _fail(cid, key, f"unknown key for kind {kind!r}")
    for key in ("text", *required):
        if key not in raw:
            raise _fail(cid, key, f"required for kind {kind!r}")
    if not isinstance(raw["text"], str):
        raise _fail(cid, "text", "must be a string")
    item = raw.get("item")
    if item is not None and not isinstance(item, str):
        raise _fail(cid, "item", "must be an item name")
    stat = raw.get("stat", "mean")
    if stat not in STATS:
        raise _fail(cid, "stat", f"must be one of {STATS}, got {stat!r}")
    metric = raw.get("metric")
    if metric is not None and not isinstance(metric, str):
        raise _fail(cid, "metric", "must be a metrics.json key")
    if metric is not None and metric.startswith("settle_round") and not SETTLE_RE.match(metric):
        raise _fail(cid, "metric", f"must read 'settle_round(<column>, <tol>)', got {metric!r}")
    quantifier = raw.get("quantifier", "all")
    if quantifier not in QUANTIFIERS[kind]:
        raise _fail(cid, "quantifier", f"must be one of {QUANTIFIERS[kind]}, got {quantifier!r}")
    test = None
    if "test" in raw:
        match = TEST_RE.match(str(raw["test"]))
        if not match or match.group(1) not in QUANTITIES[kind]:
            raise _fail(
                cid,
                "test",
                f"must read '<quantity> <op> <number>' with quantity in {QUANTITIES[kind]} "
                f"and op in {tuple(OPS)}, got {raw['test']!r}",
            )
        test = Test(match.group(1), match.group(2), float(match.group(3)))
    rank = raw.get("rank", "max")
    if rank not in ("max", "min"):
        raise _fail(cid, "rank", f"must be 'max' or 'min', got {rank!r}")
    pair_on = _label_names(cid, "pair_on", raw.get("pair_on", []), kind != "pairwise")
    combine = raw.get("combine", "mean")
    if combine not in COMBINES:
        raise _fail(cid, "combine", f"must be one of {COMBINES}, got {combine!r}")
    return Claim(
        id=cid,
        text=raw["text"],
        kind=kind,
        item=item,
        stat=stat,
        metric=metric,
        quantifier=quantifier,
        test=test,
        left=_selection(cid, "left", raw["left"]) if "left" in raw else {},
        right=_selection(cid, "right", raw["right"]) if "right" in raw else {},
        pair_on=pair_on,
        select=_selection(cid, "select", raw["select"]) if "select" in raw else {},
        group_by=_label_names(cid, "group_by", raw.get("group_by", []), True),
        among=_selection(cid, "among", raw.get("among", {})),
        rank=rank,
        contrast=_contrast(cid, raw["contrast"], pair_on) if "contrast" in raw else None,
        combine=combine,
    )


def _contrast(cid: str, value: Any, pair_on: list[str]) -> tuple[str, str, tuple[str, ...]]:
    """``{label: [first, second, …]}``: the claim tests quantity(first) − quantity(other)
    for each other value in turn."""
    ok = isinstance(value, dict) and len(value) == 1
    label, pair = next(iter(value.items())) if ok else (None, None)
    if not ok or label not in pair_on or not isinstance(pair, list) or len(pair) < 2:
        raise _fail(cid, "contrast", "must map one pair_on label to a list of two or more values")
    return str(label), str(pair[0]), tuple(str(v) for v in pair[1:])


# ---------------------------------------------------------------- cells (paper and ours)


def settle_round(rounds: Any, values: Any, tol: float) -> float:
    """The first round from which every value stays within ``tol`` of the last one (a
    non-finite value is never within); NaN when the last value is not finite."""
    rounds, values = np.asarray(rounds, float), np.asarray(values, float)
    if not len(values) or not np.isfinite(values[-1]):
        return math.nan
    outside = ~(np.abs(values - values[-1]) <= tol)
    return float(rounds[outside.nonzero()[0][-1] + 1] if outside.any() else rounds[0])


def _runs(manifest: dict[str, Any], metric: str) -> pd.DataFrame:
    """results.item_frame where the metric is the item's own, as its table reads it (per
    client or group, or per statistic, where the spec says so), else ``runs_frame``; or for
    ``settle_round(column, tol)`` the round from history.csv."""
    match = SETTLE_RE.match(metric)
    if not match:
        spec = manifest.get("spec", {})
        if metric == spec.get("metric"):
            return results.item_frame(manifest, metric)
        return results.runs_frame(manifest, metric)
    column, tol = match.group(1), float(match.group(2))
    runs = results.runs_frame(manifest, "rounds")
    settled = {
        rid: settle_round(hist["round"], hist[column], tol) if column in hist else math.nan
        for rid, hist in results.history_frame(manifest).groupby("run_id", sort=False)
    }
    runs["value"] = runs["run_id"].map(settled).astype(float)
    runs["present"] = runs["run_id"].isin(list(settled))
    return runs


def structure_cells(manifest: dict[str, Any], metric: str, printed: bool = False) -> pd.DataFrame:
    """Cells of a ``parameters`` item: one per row (its row label, variant and ``quantity``),
    the count of ``metric`` in scalars, ours from the structure job or (``printed``) the
    paper's printed values, converted to scalars."""
    spec = manifest.get("spec", {})
    if metric not in structure_quantities(spec):
        rows = pd.DataFrame()
    elif printed:
        rows = printed_scalars(spec.get("reported"), spec.get("unit", "M"), metric)
    else:
        frame = results.structure_frame(manifest["structure"]["file"])
        rows = frame.assign(value=frame[metric])
    records = [
        {
            r["row"]: r["label"],
            **({"variant": r["variant"]} if r.get("variant") else {}),
            "quantity": metric,
            "mean": float(r["value"]),
            "std": math.nan,
            "n": 1,
        }
        for r in rows.to_dict("records")
    ]
    out = pd.DataFrame.from_records(records) if records else pd.DataFrame(columns=["mean"])
    labels = [c for c in out.columns if c not in VALUE_COLUMNS]
    out[labels] = out[labels].fillna("").astype(str)
    return out.assign(item=manifest.get("item", ""))


def payload_cells(manifest: dict[str, Any], printed: bool = False) -> pd.DataFrame:
    """Cells of a ``payload`` item: one per row (``quantity``, ``variant``), its size in MiB
    (``fedrepro.report.payload``: the unit the paper's "MB" agree with), ours from the
    structure job or (``printed``) the paper's printed sizes. A ratio does not depend on the
    unit."""
    spec = manifest.get("spec", {})
    if printed:
        frame = pd.read_csv(spec["reported"], dtype=str, keep_default_na=False)
        values = frame["value"].astype(float)
    else:
        frame = results.structure_frame(manifest["structure"]["file"])
        values = frame["MiB"].astype(float)
    return pd.DataFrame({
        "quantity": frame["quantity"].astype(str), "variant": frame["variant"].astype(str),
        "mean": values.to_numpy(), "std": math.nan, "n": 1, "item": manifest.get("item", ""),
    })  # fmt: skip


def our_cells(manifest: dict[str, Any], metric: str) -> pd.DataFrame:
    """Our cells of one item: every label but the seed, with mean/std over seeds."""
    if manifest.get("kind") == "parameters":
        return structure_cells(manifest, metric)
    if manifest.get("kind") == "payload":
        return payload_cells(manifest)
    runs = _runs(manifest, metric)
    labels = [c for c in runs.columns[: list(runs.columns).index("run_id")]]
    labels = [c for c in labels if c != results.SEED_LABEL]
    stats = results.cell_stats(runs, labels)
    out = stats[[*labels, "mean", "std", "n_finite"]].rename(columns={"n_finite": "n"})
    out[labels] = out[labels].astype(str)
    return out.assign(item=manifest.get("item", ""))


def paper_cells(
    reported: pd.DataFrame | None, item: str, manifest: dict[str, Any] | None
) -> pd.DataFrame:
    """The paper's cells of one item. With the item's manifest, only label values its runs
    use are kept: both sides then speak about the same cells, and summary rows (such as an
    "Average difference" column) drop out."""
    if reported is None or "item" not in reported:
        return pd.DataFrame(columns=["item", "mean", "std", "n"])
    labels = results.reported_label_columns(reported)
    rows = reported[reported["item"] == item]
    used: dict[str, set[str]] = {}
    for run in (manifest or {}).get("runs", []):
        for name, value in run.get("labels", {}).items():
            used.setdefault(name, set()).add(str(value))
    for name, values in used.items():
        if name in labels:
            rows = rows[rows[name].isin(values)]
    out = rows[["item", *labels]].copy()
    out["mean"] = rows["value"].astype(float)
    out["std"] = rows["std"].astype(float) if "std" in rows else math.nan
    out["n"] = 1
    return out.reset_index(drop=True)


def _select(frame: pd.DataFrame, selection: dict[str, Any]) -> pd.DataFrame:
    """Rows matching every label of ``selection`` (value or list of values, compared as text)."""
    mask = np.ones(len(frame), bool)
    for label, wanted in selection.items():
        if label not in frame.columns:
            return frame.iloc[0:0]
        values = [str(v) for v in (wanted if isinstance(wanted, list) else [wanted])]
        mask &= frame[label].astype(str).isin(values).to_numpy()
    return frame[mask]


def _with_item(claim: Claim, selection: dict[str, Any]) -> dict[str, Any]:
    if claim.item is None or "item" in selection:
        return selection
    return {"item": claim.item, **selection}


def _label_cols(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c not in VALUE_COLUMNS]


def _names(cells: pd.DataFrame) -> list[str]:
    """A short name per cell: its labels that vary within ``cells``, joined by ``·``."""
    varying = [c for c in _label_cols(cells) if cells[c].astype(str).nunique() > 1]
    if not varying:
        return ["cell"] * len(cells)
    return ["·".join(map(str, r)) for r in cells[varying].itertuples(index=False, name=None)]


# ---------------------------------------------------------------- quantifiers and kinds

Outcome = tuple[bool | None, str, str]  # holds, value summary, detail


def _quantify(values: pd.Series, test: Test, quantifier: str, unit: str) -> Outcome:
    """Apply ``test`` to each value (all/any/most) or to their mean; summarise the result."""
    values = values[np.isfinite(values.to_numpy(float))]
    n = len(values)
    if n == 0:
        return None, "—", f"no {unit}s with data"
    arr = values.to_numpy(float)
    passed = np.array([test(float(v)) for v in arr], dtype=bool)
    k = int(passed.sum())
    if quantifier == "mean":
        mean = float(arr.mean())
        return bool(test(mean)), f"mean {test.quantity} = {mean:.2f} (n={n})", ""
    holds = {"all": k == n, "any": k > 0, "most": k > n / 2}[quantifier]
    worst_first = test.op in ("<=", "<")
    pick = int(arr.argmax() if worst_first == (quantifier == "all") else arr.argmin())
    label = "worst" if quantifier == "all" else "best"
    summary = f"{k}/{n} pass; {label} {test.quantity} = {arr[pick]:.2f}"
    failing = [
        f"{key}: {v:.2f}" for key, v, ok in zip(values.index, arr, passed, strict=True) if not ok
    ]
    detail = ""
    if failing:
        more = f" (+{len(failing) - MAX_LISTED} more)" if len(failing) > MAX_LISTED else ""
        detail = f"fail: {'; '.join(failing[:MAX_LISTED])}{more}"
    return holds, summary, detail


def _unit_values(
    frame: pd.DataFrame, keys: list[str], stat: str, combine: str = "mean"
) -> pd.Series:
    """Finite ``stat`` per unit (``keys``); several cells in one unit are combined by
    ``combine`` (averaged, or the lowest or highest of them)."""
    frame = frame[np.isfinite(frame[stat].to_numpy(float))]
    if frame.empty:
        return pd.Series(dtype=float)
    if not keys:
        return pd.Series([float(frame[stat].agg(combine))], index=["all"])
    grouped = frame.groupby(keys, sort=False)[stat].agg(combine)
    grouped.index = ["·".join(map(str, k if isinstance(k, tuple) else (k,))) for k in grouped.index]
    return grouped


def _eval_pairwise(claim: Claim, frame: pd.DataFrame) -> Outcome:
    assert claim.test is not None
    missing = [k for k in claim.pair_on if k not in frame.columns]
    if missing:
        return None, "—", f"labels {missing} absent"
    sides = [_select(frame, _with_item(claim, side)) for side in (claim.left, claim.right)]
    left, right = (_unit_values(s, claim.pair_on, claim.stat, claim.combine) for s in sides)
    both = left.index.intersection(right.index, sort=False)
    a, b = left[both], right[both]
    quantity = {"diff": a - b, "abs_diff": (a - b).abs(), "ratio": a / b}[claim.test.quantity]
    unit = "pair"
    if claim.contrast is not None:
        quantity, unit = _contrasted(quantity, claim.pair_on, claim.contrast), "contrast"
    holds, summary, detail = _quantify(quantity, claim.test, claim.quantifier, unit)
    unpaired = len(left.index.union(right.index)) - len(both)
    if unpaired:
        detail = "; ".join(filter(None, [detail, f"{unpaired} unpaired units ignored"]))
    return holds, summary, detail


def _contrasted(
    quantity: pd.Series, pair_on: list[str], contrast: tuple[str, str, tuple[str, ...]]
) -> pd.Series:
    """quantity(first) − quantity(other) for each other value and each setting of the other
    pair_on labels (with several others, a unit's name ends in ``vs <other>``)."""
    label, first, others = contrast
    at = pair_on.index(label)
    parts = {key: key.split("·") for key in quantity.index}
    out = {}
    for key, labels in parts.items():
        if len(labels) != len(pair_on) or labels[at] != first:
            continue
        rest = labels[:at] + labels[at + 1 :]
        for second in others:
            partner = "·".join(labels[:at] + [second] + labels[at + 1 :])
            if partner not in quantity.index:
                continue
            name = "·".join(rest) if len(others) == 1 else "·".join([*rest, f"vs {second}"])
            out[name or f"{first} vs {second}"] = quantity[key] - quantity[partner]
    return pd.Series(out, dtype=float)


def _eval_constant(claim: Claim, frame: pd.DataFrame) -> Outcome:
    assert claim.test is not None
    cells = _select(frame, _with_item(claim, claim.select))
    values = pd.Series(cells[claim.stat].to_numpy(float), index=_names(cells))
    return _quantify(values, claim.test, claim.quantifier, "cell")


def _eval_rank(claim: Claim, frame: pd.DataFrame) -> Outcome:
    scope = _select(frame, _with_item(claim, claim.among))
    scope = scope[np.isfinite(scope[claim.stat].to_numpy(float))]
    if any(k not in scope.columns for k in claim.group_by) or scope.empty:
        return None, "—", "no cells with data"
    groups = scope.groupby(claim.group_by, sort=False) if claim.group_by else [("all", scope)]
    better = operator.gt if claim.rank == "max" else operator.lt
    best = "idxmax" if claim.rank == "max" else "idxmin"
    verdicts, fails = [], []
    for key, group in groups:
        chosen = _select(group, claim.select)
        others = group.drop(index=chosen.index)
        if chosen.empty or others.empty:
            continue
        top_c = getattr(chosen[claim.stat], best)()
        top_o = getattr(others[claim.stat], best)()
        ok = bool(better(chosen.loc[top_c, claim.stat], others.loc[top_o, claim.stat]))
        verdicts.append(ok)
        if not ok:
            names = dict(zip(group.index, _names(group), strict=True))
            name = "·".join(map(str, key)) if isinstance(key, tuple) else str(key)
            fails.append(
                f"{name}: {names[top_o]} {others.loc[top_o, claim.stat]:.2f} vs "
                f"{names[top_c]} {chosen.loc[top_c, claim.stat]:.2f}"
            )
    if not verdicts:
        return None, "—", "no group holds both the selected cells and others"
    k, n = sum(verdicts), len(verdicts)
    holds = {"all": k == n, "any": k > 0, "most": k > n / 2}[claim.quantifier]
    detail = ("fail: " + "; ".join(fails[:MAX_LISTED])) if fails else ""
    return holds, f"{k}/{n} groups: selection is {claim.rank} ({claim.stat})", detail


EVALUATORS: dict[str, Callable[[Claim, pd.DataFrame], Outcome]] = {
    "pairwise": _eval_pairwise,
    "constant": _eval_constant,
    "rank": _eval_rank,
}


# ---------------------------------------------------------------- public entry points


def _check_labels(claim: Claim, known: set[str]) -> None:
    """Catch typos in label names (only when some cells exist to know the labels from)."""
    if not known:
        return
    known = known | {"item"}
    named = {
        "left": list(claim.left),
        "right": list(claim.right),
        "select": list(claim.select),
        "among": list(claim.among),
        "pair_on": claim.pair_on,
        "group_by": claim.group_by,
    }
    for key, labels in named.items():
        unknown = [lab for lab in labels if lab not in known]
        if unknown:
            raise _fail(claim.id, key, f"unknown label(s) {unknown}; known: {sorted(known)}")


def evaluate_claims(
    claims: list[dict[str, Any]],
    manifests: dict[str, dict[str, Any]],
    reported_csv: str | Path | None,
) -> pd.DataFrame:
    """Evaluate every claim on the paper's numbers and on ours.

    Returns one row per claim: ``claim`` (id), ``text``, ``paper_value``, ``ours``,
    ``holds_paper``, ``holds_ours`` (True/False, NA when not evaluable), ``detail``.
    """
    parsed = [parse_claim(raw, i) for i, raw in enumerate(claims)]
    reported = results.read_reported(reported_csv)
    paper_items = set(reported["item"]) if reported is not None and "item" in reported else set()
    paper = pd.concat(
        [paper_cells(reported, it, manifests.get(it)) for it in sorted(paper_items)]
        or [paper_cells(None, "", None)],
        ignore_index=True,
    )
    cache: dict[tuple[str, str], pd.DataFrame] = {}

    def paper_for(metric: str | None) -> pd.DataFrame:
        """The paper's cells, with the printed counts of ``metric`` of parameters items."""
        printed = [
            cells
            for it, m in manifests.items()
            if metric and m.get("kind") == "parameters" and m.get("spec", {}).get("reported")
            for cells in [structure_cells({**m, "item": it}, metric, printed=True)]
            if not cells.empty
        ] + [
            payload_cells({**m, "item": it}, printed=True)
            for it, m in manifests.items()
            if m.get("kind") == "payload" and m.get("spec", {}).get("reported")
        ]
        if not printed:
            return paper
        return pd.concat([*([paper] if not paper.empty else []), *printed], ignore_index=True)

    def ours_for(metric: str | None) -> pd.DataFrame:
        parts = []
        for item, manifest in manifests.items():
            m = metric or manifest.get("spec", {}).get("metric", "final_acc")
            if (item, m) not in cache:
                cache[item, m] = our_cells({**manifest, "item": item}, m)
            if manifest.get("kind") != "parameters" or not cache[item, m].empty:
                parts.append(cache[item, m])
        return pd.concat(parts, ignore_index=True) if parts else paper.iloc[0:0]

    records = []
    for claim in parsed:
        ours, theirs = ours_for(claim.metric), paper_for(claim.metric)
        _check_labels(claim, {*_label_cols(ours), *_label_cols(theirs)})
        p_holds, p_value, p_detail = EVALUATORS[claim.kind](claim, theirs)
        o_holds, o_value, o_detail = EVALUATORS[claim.kind](claim, ours)
        detail = "; ".join(
            f"{who}: {d}" for who, d in (("paper", p_detail), ("ours", o_detail)) if d
        )
        records.append([claim.id, claim.text, p_value, o_value, p_holds, o_holds, detail])
    frame = pd.DataFrame.from_records(records, columns=RESULT_COLUMNS)
    for col in ("holds_paper", "holds_ours"):
        frame[col] = frame[col].astype("boolean")
    return frame


def make_claims(
    claims: list[dict[str, Any]],
    manifests: dict[str, dict[str, Any]],
    reported_csv: str | Path | None,
    out_prefix: str | Path,
    title: str | None = None,
) -> list[Path]:
    """Evaluate the claims and write ``<out_prefix>.{csv,md,html}``."""
    frame = evaluate_claims(claims, manifests, reported_csv)
    scales = {m.get("scale", "mini") for m in manifests.values()} or {"mini"}
    scale = "mini" if "mini" in scales else sorted(scales)[0]
    papers = sorted({m.get("paper", "") for m in manifests.values()} - {""})
    rows = [
        {**r, "holds_paper": _plain(r["holds_paper"]), "holds_ours": _plain(r["holds_ours"])}
        for r in frame.to_dict("records")
    ]
    context = {
        "title": title or f"Claims: {', '.join(papers) or 'paper'}",
        "scale": scale,
        "is_mini": scale == "mini",
        "scale_note": scale_note(scale),
        "rows": rows,
    }
    out = Path(out_prefix)
    return [
        write_text(f"{out}.csv", frame.to_csv(index=False)),
        write_text(f"{out}.md", render("claims.md", **context)),
        write_text(f"{out}.html", render("claims.html", **context)),
    ]


def _plain(value: Any) -> bool | None:
    """pandas' NA → None so templates can tell True / False / not evaluable apart."""
    return None if value is pd.NA or value is None else bool(value)
