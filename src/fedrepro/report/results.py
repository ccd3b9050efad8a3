"""Read run results (metrics.json, history.csv) and reported numbers into pandas frames.

Everything the report layer knows about a run comes from its result files, so tables,
figures and claims agree on one definition of a cell: the runs of a manifest sharing all
labels but ``seed``, summarised as mean and sample standard deviation (``ddof=1``) over
the seeds whose value is finite.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

SEED_LABEL = "seed"
DDOF = 1  # sample std over seeds; with one finite seed the std is undefined (NaN)
REPORTED_VALUE_COLUMNS = ("value", "std", "source")


def read_metrics(path: str | Path | None) -> dict[str, Any] | None:
    """A result's metrics.json, or None when it has not finished (or is unreadable)."""
    if path is None:
        return None
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def structure_frame(path: str | Path) -> pd.DataFrame:
    """A structure job's rows (its JSON: ``{"spec", "columns", "rows"}``), columns in order."""
    doc = json.loads(Path(path).read_text())
    return pd.DataFrame(doc["rows"], columns=doc["columns"])


def result_files(manifest: dict[str, Any]) -> list[str]:
    """Every result file an item's manifest names (what its rule must list as input): a run's
    files, or the record of the job that built them (``built_by``: a training job writes its
    runs' directories and then its record, the one file the workflow tracks)."""
    files = [
        f
        for run in manifest.get("runs", [])
        for f in ([run["built_by"]] if "built_by" in run else run.get("files", {}).values())
    ]
    files += [p["file"] for p in manifest.get("partitions", []) if "file" in p]
    if "structure" in manifest:
        files.append(manifest["structure"]["file"])
    return files


def check_inputs(manifests: Iterable[dict[str, Any]], inputs: Iterable[str]) -> None:
    """Refuse to build from a file the job was not given: every file the manifests name
    must be an input of the rule (so the report reads ``snakemake.input`` and nothing else)."""
    missing = sorted({f for m in manifests for f in result_files(m)} - set(map(str, inputs)))
    if missing:
        raise RuntimeError(f"manifest names files the rule does not list as input: {missing}")


def _lookup(metrics: dict[str, Any], key: str) -> tuple[bool, Any]:
    """(found, value) for a dotted key such as ``comm.total_bytes``."""
    node: Any = metrics
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def metric_value(metrics: dict[str, Any], key: str) -> float:
    """Look up ``key`` (dotted path, e.g. ``comm.total_bytes``); missing/null/non-number → NaN."""
    _, node = _lookup(metrics, key)
    try:
        return float(node)
    except (TypeError, ValueError):
        return math.nan


def _label_names(manifest: dict[str, Any]) -> list[str]:
    """All label names used by the manifest's runs, in first-appearance order."""
    names: dict[str, None] = {}
    for run in manifest.get("runs", []):
        names.update(dict.fromkeys(run.get("labels", {})))
    return list(names)


def runs_frame(
    manifest: dict[str, Any], metric: str, per_client: str | None = None
) -> pd.DataFrame:
    """One row per manifest run: its labels, ``run_id``, ``present``, ``value``, ``diverged``.

    Each run entry names its result files (``files.metrics``, written by the train or adapt
    stage); the report reads those and nothing else. With ``per_client`` (a label name) the
    metric is a per-client list (``final_acc_per_client``) and each client gets its own row,
    labelled by its index, or a per-group mapping (``best_acc_per_group``) and each group
    gets its own row, labelled by its name.

    A run without metrics.json is kept (``present`` False, value NaN) so that a table
    shows a dash for it instead of failing. A recorded non-finite value counts as diverged.
    """
    names = _label_names(manifest) + ([per_client] if per_client else [])
    records = []
    for run in manifest.get("runs", []):
        labels = run.get("labels", {})
        metrics = read_metrics(run.get("files", {}).get("metrics"))
        values: list[tuple[Any, float, bool]] = []  # (client, value, recorded)
        if per_client and metrics is not None:
            found, node = _lookup(metrics, metric)
            # a list is per client (labelled by index), a mapping per group (by its name)
            items = node.items() if isinstance(node, dict) else enumerate(node or [])
            for k, v in items if found else []:
                values.append((str(k), metric_value({"v": v}, "v"), True))
        else:
            value = math.nan if metrics is None else metric_value(metrics, metric)
            # a recorded but non-finite value (NaN, or null in strict JSON) is a divergence;
            # a key the run does not report is just missing
            recorded = metrics is not None and _lookup(metrics, metric)[0]
            values.append((None, value, recorded))
        for client, value, recorded in values:
            diverged = metrics is not None and (
                bool(metrics.get("diverged", False)) or (recorded and not math.isfinite(value))
            )
            record = {name: labels.get(name) for name in names}
            if per_client:
                record[per_client] = client
            record.update(
                run_id=run["id"],
                present=metrics is not None,
                value=value,
                diverged=diverged,
                classes=run.get("classes", math.nan),
            )
            records.append(record)
    columns = [*names, "run_id", "present", "value", "diverged", "classes"]
    return pd.DataFrame.from_records(records, columns=columns)


def item_frame(manifest: dict[str, Any], metric: str | None = None) -> pd.DataFrame:
    """``runs_frame`` of an item's own metric as its spec reads it: per client where it says
    ``per_client``; with ``statistics`` (``{label, values: {name: metrics.json key}}``, as
    FedHPL's lowest / average / highest client) one row per run and statistic, the statistic's
    name under ``label`` (then ``metric`` is not used)."""
    spec = manifest.get("spec", {})
    per_client = spec.get("per_client")
    statistics = spec.get("statistics")
    if not statistics:
        return runs_frame(manifest, metric or spec.get("metric", "final_acc"), per_client)
    label, values = statistics.get("label"), statistics.get("values")
    if not isinstance(label, str) or not isinstance(values, dict) or not values:
        raise ValueError(
            f"{manifest.get('paper')}/{manifest.get('item')}: spec key 'statistics' must be "
            "{label: <name>, values: {<name>: <metrics.json key>, ...}}"
        )
    frames = []
    for order, (name, key) in enumerate(values.items()):
        frame = runs_frame(manifest, key, per_client)
        frame.insert(list(frame.columns).index("run_id"), label, name)
        frames.append(frame.assign(_run=range(len(frame)), _stat=order))
    every = pd.concat(frames, ignore_index=True).sort_values(["_run", "_stat"], kind="stable")
    return every.drop(columns=["_run", "_stat"]).reset_index(drop=True)


def cell_stats(runs: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Summarise runs per cell (``by`` labels), keeping first-appearance order.

    Columns: ``by``…, ``n`` (runs listed), ``n_present``, ``n_finite``, ``mean``, ``std``
    (ddof=1 over finite values), ``diverged`` (any run of the cell diverged).
    """
    by = list(by)
    if runs.empty:
        return pd.DataFrame(
            columns=[*by, "n", "n_present", "n_finite", "mean", "std", "diverged", "classes"]
        )
    finite = runs["value"].where(np.isfinite(runs["value"].astype(float)))
    frame = runs.assign(_finite=finite)
    grouped = frame.groupby(by, sort=False, dropna=False) if by else frame.groupby(lambda _: 0)
    out = grouped.agg(
        n=("value", "size"),
        n_present=("present", "sum"),
        n_finite=("_finite", "count"),
        mean=("_finite", "mean"),
        std=("_finite", lambda s: s.std(ddof=DDOF)),
        diverged=("diverged", "any"),
        classes=("classes", "max"),
    )
    out = out.reset_index(drop=not by)
    for col in ("n", "n_present", "n_finite"):
        out[col] = out[col].astype(int)
    return out


def check_cells_unique(runs: pd.DataFrame, by: Sequence[str], context: str) -> None:
    """Raise when ``by`` names a label the runs lack, or when runs of one cell differ in a
    label other than the seed (they would be silently pooled as if they were seeds)."""
    if runs.empty:
        return
    labels = list(runs.columns[: list(runs.columns).index("run_id")])
    for name in by:
        if name not in labels:
            raise ValueError(f"{context}: spec label {name!r} is not a label of the manifest runs")
    others = [c for c in labels if c not in by and c != SEED_LABEL]
    if not others:
        return
    grouped = runs.groupby(list(by), sort=False, dropna=False) if by else [(None, runs)]
    for _, group in grouped:
        for col in others:
            if group[col].astype(str).nunique() > 1:
                raise ValueError(
                    f"{context}: runs of one cell differ in label {col!r}; "
                    "add it to the item's rows/columns/panels/lines or drop it from the manifest"
                )


def history_frame(manifest: dict[str, Any]) -> pd.DataFrame:
    """history.csv of every finished run (``files.history``), concatenated, with the run's
    labels and ``run_id``."""
    names = _label_names(manifest)
    parts = []
    for run in manifest.get("runs", []):
        try:
            hist = pd.read_csv(run["files"]["history"])
        except (KeyError, OSError, ValueError, pd.errors.EmptyDataError):
            continue
        labels = run.get("labels", {})
        for name in names:
            hist[name] = labels.get(name)
        hist["run_id"] = run["id"]
        parts.append(hist)
    if not parts:
        return pd.DataFrame(columns=[*names, "run_id", "round"])
    return pd.concat(parts, ignore_index=True)


def read_reported(path: str | Path | None) -> pd.DataFrame | None:
    """The reported-numbers CSV with string labels (``#M=1`` stays a label, blanks stay ``""``)."""
    if path is None or not Path(path).is_file():
        return None
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    for col in ("value", "std"):
        if col in frame:
            frame[col] = pd.to_numeric(frame[col], errors="coerce")  # a blank is NaN
    return frame


def reported_label_columns(reported: pd.DataFrame) -> list[str]:
    """Label columns of a reported CSV (everything except item and the value columns)."""
    return [c for c in reported.columns if c not in ("item", *REPORTED_VALUE_COLUMNS)]


def lookup_reported(
    reported: pd.DataFrame | None, item: str, key: dict[str, Any]
) -> tuple[float, float] | None:
    """(value, std) reported for the cell whose labels are ``key``; None when absent.

    Only labels that are columns of the CSV are matched; more than one match is a
    transcription error and raises.
    """
    if reported is None:
        return None
    mask = reported["item"] == item if "item" in reported else np.ones(len(reported), bool)
    for name, value in key.items():
        if name in reported.columns:
            mask &= reported[name] == str(value)
    hits = reported[mask]
    if hits.empty:
        return None
    if len(hits) > 1:
        raise ValueError(f"reported CSV: {len(hits)} rows match item {item!r} and labels {key}")
    row = hits.iloc[0]
    return float(row["value"]), float(row.get("std", math.nan))


def unique_keys(frame: pd.DataFrame, labels: Iterable[str]) -> list[tuple]:
    """Distinct label tuples of ``frame`` in first-appearance order."""
    labels = list(labels)
    if not labels:
        return [()]
    rows = frame[labels].astype(object).itertuples(index=False, name=None)
    return list(dict.fromkeys(rows))
