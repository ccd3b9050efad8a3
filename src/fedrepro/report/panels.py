"""The panel grid every report figure draws on (matplotlib Agg): the grid, an empty panel's
note, and the title with the scale beneath it. Shared by ``figures`` and ``embeddings``."""

from __future__ import annotations

import textwrap

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from fedrepro.report.templates import short_scale_note  # noqa: E402

__all__ = ["PANEL_SIZE", "empty_panel", "finish", "panel_grid"]

PANEL_SIZE = (4.2, 3.0)


def panel_grid(n_rows: int, n_cols: int) -> tuple[plt.Figure, np.ndarray]:
    fig, axes = plt.subplots(
        n_rows,
        n_cols,
        figsize=(PANEL_SIZE[0] * n_cols, PANEL_SIZE[1] * n_rows + 0.6),
        squeeze=False,
        layout="constrained",
    )
    return fig, axes


def empty_panel(ax: plt.Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.5")
    ax.set_xticks([])
    ax.set_yticks([])


def finish(
    fig: plt.Figure, axes: np.ndarray, used: set[tuple[int, int]], manifest: dict, note: str = ""
) -> None:
    """Title with the scale (and any marker legend) beneath it; hide grid cells no panel uses."""
    for (r, c), ax in np.ndenumerate(axes):
        if (r, c) not in used:
            ax.set_visible(False)
    width = max(int(fig.get_figwidth() * 11), 40)
    title = str(manifest.get("title", manifest.get("item", "")))
    sub = "; ".join(filter(None, [short_scale_note(manifest.get("scale", "mini")), note]))
    lines = [
        textwrap.fill(title, width, break_on_hyphens=False),
        textwrap.fill(sub, int(width * 1.3), break_on_hyphens=False),
    ]
    fig.suptitle("\n".join(lines), fontsize=9.5)
