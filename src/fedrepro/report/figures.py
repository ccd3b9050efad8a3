"""Paper figures from result files (matplotlib Agg → png + pdf), dispatched on ``spec.figure``.

``curves``
    a history.csv column per round (``metric``, default ``acc``). ``panels``: a label, or
    two labels for a grid (rows, columns); ``lines``: label(s) giving one coloured line
    each; ``style``: optional label drawn as line style. Each line is the mean over seeds
    with a ±std band. Non-finite rounds (diverged aggregates) are drawn as 0 and marked ×,
    so the drops the papers describe stay visible.
``partition_hist``
    stacked bars of per-client class counts, one panel per entry of the manifest's
    ``partitions`` (each names its JSON, ``file``); ``split``: ``train`` (default)
    or ``test``.
``bars``
    a metrics.json key (``metric``) per ``groups`` label (x axis), one bar per ``bars``
    label, mean over seeds with std error bars; optional ``panels`` label; ``per_client``
    as for tables (a per-client or per-group metric, each client or group a label value).
``sweep``
    a metrics.json key (``metric``) against the values of one label (``x``: numeric
    labels are placed at their value, others evenly), one line per ``lines`` label, mean
    over seeds with a ±std band; optional ``panels`` label and ``xlabel``. Values the
    paper prints for the item (its reported CSV) are drawn as hollow diamonds.
``embeddings``
    each client's local tensors of one trained run (its state.safetensors) by PCA and t-SNE,
    coloured by group and sized by level (FedPCE Figs. 1, 3; ``fedrepro.report.embeddings``).

Every figure carries the manifest title and, in a corner, the scale it was made at.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from fedrepro.report import results
from fedrepro.report.embeddings import plot_embeddings
from fedrepro.report.output import save_figure
from fedrepro.report.panels import empty_panel, finish, panel_grid
from fedrepro.report.templates import metric_name

LINESTYLES = ("-", "--", ":", "-.")


def _labels(spec: dict[str, Any], key: str, where: str, required: bool = False) -> list[str]:
    value = spec.get(key)
    if value is None and not required:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: spec key {key!r} must be a label name or a list of them")
    return value


def _key_text(key: tuple) -> str:
    return " · ".join(str(k) for k in key)


def _layout_panels(
    frame: pd.DataFrame, panels: list[str]
) -> tuple[list[tuple], dict[tuple, tuple[int, int]], int, int]:
    """Panel keys and their (row, col) positions: a grid for two labels, wrapped otherwise."""
    if frame.empty:
        return [], {}, 1, 1
    keys = results.unique_keys(frame, panels)
    if len(panels) == 2:
        row_vals = list(dict.fromkeys(k[0] for k in keys))
        col_vals = list(dict.fromkeys(k[1] for k in keys))
        pos = {k: (row_vals.index(k[0]), col_vals.index(k[1])) for k in keys}
        return keys, pos, len(row_vals), len(col_vals)
    n_cols = min(len(keys), 3) or 1
    pos = {k: divmod(i, n_cols) for i, k in enumerate(keys)}
    return keys, pos, math.ceil(len(keys) / n_cols) or 1, n_cols


def _select(frame: pd.DataFrame, labels: list[str], key: tuple) -> pd.DataFrame:
    if not labels:
        return frame
    mask = np.ones(len(frame), bool)
    for name, value in zip(labels, key, strict=True):
        mask &= (frame[name].astype(str) == str(value)).to_numpy()
    return frame[mask]


def plot_curves(manifest: dict[str, Any]) -> plt.Figure:
    """Metric per round: mean over seeds with a ±std band; diverged rounds shown as × at 0."""
    where = f"{manifest.get('paper')}/{manifest.get('item')}"
    spec = manifest.get("spec", {})
    metric = spec.get("metric", "acc")
    x = spec.get("x", "round")
    panels = _labels(spec, "panels", where)
    lines = _labels(spec, "lines", where, required=True)
    style = _labels(spec, "style", where)
    results.check_cells_unique(
        results.runs_frame(manifest, "final_acc"), panels + lines + style, where
    )
    hist = results.history_frame(manifest)
    if not hist.empty and metric not in hist:
        raise ValueError(f"{where}: spec key 'metric': {metric!r} is not a history.csv column")
    keys, pos, n_rows, n_cols = _layout_panels(hist, panels)
    fig, axes = panel_grid(n_rows, n_cols)
    line_keys = results.unique_keys(hist, lines) if not hist.empty else []
    colors = {k: f"C{i % 10}" for i, k in enumerate(line_keys)}
    style_keys = results.unique_keys(hist, style) if style and not hist.empty else [()]
    styles = {k: LINESTYLES[i % len(LINESTYLES)] for i, k in enumerate(style_keys)}
    marked = False
    for key in keys:
        ax = axes[pos[key]]
        sub = _select(hist, panels, key)
        if sub.empty:
            empty_panel(ax, "no finished runs")
            continue
        for lkey in line_keys:
            for skey in style_keys:
                part = _select(_select(sub, lines, lkey), style, skey)
                if part.empty:
                    continue
                raw = part.pivot(index=x, columns="run_id", values=metric)
                present = part.assign(_p=1.0).pivot(index=x, columns="run_id", values="_p")
                present = present.notna().to_numpy()
                vals = raw.to_numpy(float)
                bad = present & ~np.isfinite(vals)
                if "diverged" in part:
                    flags = part.pivot(index=x, columns="run_id", values="diverged")
                    bad |= np.nan_to_num(flags.astype(float).to_numpy()) > 0
                # a diverged round reads as 0; a round a run never reached stays out of the mean
                vals = np.where(present & ~np.isfinite(vals), 0.0, vals)
                counts = present.sum(axis=1)
                mean = np.nanmean(vals, axis=1)
                rounds = raw.index.to_numpy()
                label = _key_text(lkey + skey)
                ax.plot(rounds, mean, color=colors[lkey], ls=styles[skey], lw=1.4, label=label)
                if counts.max() > 1:
                    with np.errstate(invalid="ignore", divide="ignore"):
                        std = np.nanstd(vals, axis=1, ddof=results.DDOF)
                    std = np.where(counts > 1, std, 0.0)
                    ax.fill_between(rounds, mean - std, mean + std, color=colors[lkey], alpha=0.18)
                drop = bad.any(axis=1)
                if drop.any():
                    marked = True
                    ax.plot(rounds[drop], mean[drop], "x", color=colors[lkey], ms=7, mew=1.8)
        ax.set_title(_key_text(key) if key else "", fontsize=9)
        ax.set_xlabel(x)
        ax.set_ylabel(metric_name(metric, spec.get("ylabel")))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    if not keys:
        empty_panel(axes[0, 0], "no finished runs")
    note = "× = non-finite / diverged round, drawn as 0" if marked else ""
    finish(fig, axes, set(pos.values()) or {(0, 0)}, manifest, note)
    return fig


def plot_partition_hist(manifest: dict[str, Any]) -> plt.Figure:
    """Stacked per-client class counts, one panel per partition in the manifest (each entry
    names its partition JSON, ``file``)."""
    spec = manifest.get("spec", {})
    split = spec.get("split", "train")
    parts = manifest.get("partitions", [])
    n_cols = min(len(parts), 3) or 1
    n_rows = math.ceil(len(parts) / n_cols) or 1
    fig, axes = panel_grid(n_rows, n_cols)
    used = set()
    for i, part in enumerate(parts):
        ax = axes[divmod(i, n_cols)]
        used.add(divmod(i, n_cols))
        title = _key_text(tuple(part.get("labels", {}).values())) or part["id"]
        ax.set_title(title, fontsize=9)
        try:
            data = json.loads(Path(part["file"]).read_text())
            counts = np.asarray(data["histogram"][split], dtype=float)
        except (OSError, ValueError, KeyError):
            empty_panel(ax, "partition file missing")
            continue
        if counts.ndim != 2 or counts.size == 0:
            empty_panel(ax, f"no {split} histogram")
            continue
        n_clients, n_classes = counts.shape
        cmap = plt.get_cmap(
            "tab10" if n_classes <= 10 else "tab20" if n_classes <= 20 else "viridis"
        )
        colors = cmap(np.linspace(0, 1, n_classes)) if n_classes > 20 else cmap.colors[:n_classes]
        bottoms = np.zeros(n_clients)
        clients = np.arange(n_clients)
        for c in range(n_classes):
            ax.bar(clients, counts[:, c], bottom=bottoms, color=colors[c], width=0.85, label=str(c))
            bottoms += counts[:, c]
        ax.set_xlabel("client")
        ax.set_ylabel(f"{split} samples per class")
        if n_clients <= 20:
            ax.set_xticks(clients)
        if n_classes <= 20:
            ax.legend(title="class", fontsize=6, title_fontsize=7, ncol=2, loc="upper right")
    if not parts:
        empty_panel(axes[0, 0], "no partitions listed")
    finish(fig, axes, used or {(0, 0)}, manifest)
    return fig


def _cell_panels(
    manifest: dict[str, Any],
    metric: str,
    panels: list[str],
    labels: list[str],
):
    """Per-cell stats over seeds of a metrics.json value, and the panel grid they fill."""
    where = f"{manifest.get('paper')}/{manifest.get('item')}"
    runs = results.item_frame(manifest, metric)
    results.check_cells_unique(runs, panels + labels, where)
    stats = results.cell_stats(runs, panels + labels) if not runs.empty else runs
    keys, pos, n_rows, n_cols = _layout_panels(stats, panels)
    fig, axes = panel_grid(n_rows, n_cols)
    return stats, keys, pos, fig, axes


def plot_bars(manifest: dict[str, Any]) -> plt.Figure:
    """A metrics.json value per group with std error bars; missing cells are labelled n/a."""
    where = f"{manifest.get('paper')}/{manifest.get('item')}"
    spec = manifest.get("spec", {})
    metric = spec.get("metric", "final_acc")
    groups = _labels(spec, "groups", where, required=True)
    bars = _labels(spec, "bars", where)
    panels = _labels(spec, "panels", where)
    stats, keys, pos, fig, axes = _cell_panels(manifest, metric, panels, groups + bars)
    group_keys = results.unique_keys(stats, groups) if not stats.empty else []
    bar_keys = results.unique_keys(stats, bars) if not stats.empty else [()]
    width = 0.8 / max(len(bar_keys), 1)
    x = np.arange(len(group_keys))
    for key in keys:
        ax = axes[pos[key]]
        sub = _select(stats, panels, key)
        if sub.empty:
            empty_panel(ax, "no finished runs")
            continue
        for j, bkey in enumerate(bar_keys):
            cells = _select(sub, bars, bkey)
            means, stds, flags = [], [], []
            for gkey in group_keys:
                cell = _select(cells, groups, gkey)
                means.append(float(cell["mean"].iloc[0]) if len(cell) else math.nan)
                stds.append(float(cell["std"].iloc[0]) if len(cell) else math.nan)
                flags.append(bool(cell["diverged"].iloc[0]) if len(cell) else False)
            xs = x + (j - (len(bar_keys) - 1) / 2) * width
            heights = np.nan_to_num(means)
            ax.bar(
                xs,
                heights,
                width,
                yerr=np.nan_to_num(stds),
                capsize=2,
                color=f"C{j % 10}",
                label=_key_text(bkey) or None,
            )
            for xi, m, flag in zip(xs, means, flags, strict=True):
                if not math.isfinite(m):
                    ax.text(xi, 0, "n/a", ha="center", va="bottom", fontsize=6, rotation=90)
                elif flag:
                    ax.text(xi, m, "†", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(x, [_key_text(g) for g in group_keys], rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(metric_name(metric, spec.get("ylabel")))
        ax.set_title(_key_text(key) if key else "", fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    if bars and group_keys:
        handles, names = axes[pos[keys[0]]].get_legend_handles_labels()
        fig.legend(handles, names, loc="outside lower center", ncol=min(len(names), 4), fontsize=7)
    if not keys:
        empty_panel(axes[0, 0], "no finished runs")
    finish(fig, axes, set(pos.values()) or {(0, 0)}, manifest)
    return fig


def _positions(values: list[str]) -> tuple[np.ndarray, bool]:
    """x positions of label values: the numbers themselves when all are numeric."""
    try:
        return np.array([float(v) for v in values]), True
    except ValueError:
        return np.arange(len(values), dtype=float), False


def plot_sweep(manifest: dict[str, Any]) -> plt.Figure:
    """A metrics.json value against a swept label, one line per method, ±std band."""
    where = f"{manifest.get('paper')}/{manifest.get('item')}"
    spec = manifest.get("spec", {})
    metric = spec.get("metric", "final_acc")
    x_label = _labels(spec, "x", where, required=True)
    if len(x_label) != 1:
        raise ValueError(f"{where}: spec key 'x' must name one label")
    lines = _labels(spec, "lines", where, required=True)
    panels = _labels(spec, "panels", where)
    stats, keys, pos, fig, axes = _cell_panels(manifest, metric, panels, x_label + lines)
    x_values = [k[0] for k in results.unique_keys(stats, x_label)] if not stats.empty else []
    xs, numeric = _positions([str(v) for v in x_values])
    line_keys = results.unique_keys(stats, lines) if not stats.empty else []
    reported = results.read_reported(manifest.get("reported"))
    for key in keys:
        ax = axes[pos[key]]
        sub = _select(stats, panels, key)
        paper_ax = None
        for i, lkey in enumerate(line_keys):
            cells = _select(sub, lines, lkey)
            mean, std = np.full(len(xs), np.nan), np.full(len(xs), np.nan)
            for j, value in enumerate(x_values):
                cell = _select(cells, x_label, (value,))
                if len(cell):
                    mean[j], std[j] = float(cell["mean"].iloc[0]), float(cell["std"].iloc[0])
            color = f"C{i % 10}"
            ax.plot(xs, mean, "o-", color=color, ms=3, lw=1.3, label=_key_text(lkey))
            band = np.nan_to_num(std)
            ax.fill_between(xs, mean - band, mean + band, color=color, alpha=0.15)
            labels = dict(zip(panels + lines, key + lkey, strict=True))
            item = str(manifest.get("item", ""))
            px, py = _paper_points(reported, item, labels, x_label[0], x_values, xs)
            if px:
                if paper_ax is None:  # mini numbers sit far below the paper's: own axis
                    mini = manifest.get("scale", "mini") == "mini"
                    paper_ax = ax.twinx() if mini else ax
                    if mini:
                        paper_ax.set_ylabel("paper's printed values (◇, right axis)", fontsize=7)
                paper_ax.plot(px, py, "D", mfc="none", color=color, ms=6)
        if not numeric:
            ax.set_xticks(xs, [str(v) for v in x_values], fontsize=7)
        elif spec.get("xscale") == "log":  # values spanning decades (FedPCE Fig. 4: 2–1,600)
            ax.set_xscale("log")
        ax.set_xlabel(spec.get("xlabel", x_label[0]))
        ax.set_ylabel(metric_name(metric, spec.get("ylabel")))
        ax.set_title(_key_text(key) if key else "", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    if not keys:
        empty_panel(axes[0, 0], "no finished runs")
    finish(fig, axes, set(pos.values()) or {(0, 0)}, manifest)
    return fig


def _paper_points(
    reported: pd.DataFrame | None,
    item: str,
    labels: dict[str, Any],
    x_label: str,
    x_values: list,
    xs: np.ndarray,
) -> tuple[list[float], list[float]]:
    """The paper's printed values on one line of a sweep (the few a text gives)."""
    if reported is None or x_label not in reported:
        return [], []
    points = []
    for value, x in zip(x_values, xs, strict=True):
        hit = results.lookup_reported(reported, item, {**labels, x_label: value})
        if hit is not None:
            points.append((float(x), hit[0]))
    return [p[0] for p in points], [p[1] for p in points]


PLOTTERS: dict[str, Callable[..., plt.Figure]] = {
    "curves": plot_curves,
    "partition_hist": plot_partition_hist,
    "bars": plot_bars,
    "sweep": plot_sweep,
    "embeddings": plot_embeddings,
}


def make_figure(manifest: dict[str, Any], out_prefix: str | Path) -> list[Path]:
    """Draw the figure item ``spec.figure`` names and write ``<out_prefix>.{png,pdf}``."""
    kind = manifest.get("spec", {}).get("figure")
    if kind not in PLOTTERS:
        raise ValueError(
            f"{manifest.get('paper')}/{manifest.get('item')}: spec key 'figure' must be one of "
            f"{sorted(PLOTTERS)}, got {kind!r}"
        )
    fig = PLOTTERS[kind](manifest)
    try:
        return save_figure(fig, out_prefix)
    finally:
        plt.close(fig)
