"""The registry of item kinds: what an item of each kind is built from and what it writes.

One table for every use: the plan names each item's input files from ``reads`` and
``structure``; the workflow names its outputs from ``folder`` and ``outputs``; the
experiment schema's ``kind`` enum is these keys; the item script calls ``builder``
(``module:function`` in ``fedrepro.report``, resolved there, so this layer imports none of
it). A builder takes ``(manifest, out_prefix)`` and reads only the files the manifest names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TABLE_FILES = ("md", "tex", "csv", "html")
# what a parameters item's structure job counts unless its spec lists ``quantities`` (the
# structure layer's own default, which this layer may not import; a test keeps them equal)
DEFAULT_QUANTITIES = ("com_cost", "aux", "new_params")


def structure_quantities(spec: dict[str, Any]) -> list[str]:
    """What a parameters item's structure job counts: its ``quantities`` (or the default
    ones) and ``aux`` beside ``com_cost`` (a table shows the two together)."""
    shown = list(spec.get("quantities", DEFAULT_QUANTITIES))
    return list(dict.fromkeys([*shown, *(["aux"] if "com_cost" in shown else [])]))


FIGURE_FILES = ("png", "pdf")


@dataclass(frozen=True)
class ItemKind:
    folder: str  # results/<scale>/<folder>/<paper>/<item>.<ext>
    outputs: tuple[str, ...]  # file extensions, the first one names the output prefix
    builder: str  # "fedrepro.report.<module>:<function>"
    structure: bool = False  # built from a structure job's JSON instead of runs
    history_figures: tuple[str, ...] = ()  # figure types that also read history.csv
    state_figures: tuple[str, ...] = ()  # figure types that read a run's state and config

    def reads(self, spec: dict[str, Any]) -> tuple[str, ...]:
        """The result files each run entry of an item of this kind is read from."""
        if spec.get("figure") in self.history_figures:
            return ("metrics", "history")
        if spec.get("figure") in self.state_figures:
            return ("metrics", "state", "config")
        return () if self.structure else ("metrics",)


ITEM_KINDS: dict[str, ItemKind] = {
    "table": ItemKind("tables", TABLE_FILES, "fedrepro.report.tables:make_table"),
    "figure": ItemKind(
        "figures",
        FIGURE_FILES,
        "fedrepro.report.figures:make_figure",
        history_figures=("curves",),
        state_figures=("embeddings",),
    ),
    "payload": ItemKind(
        "tables", TABLE_FILES, "fedrepro.report.payload:make_payload_table", structure=True
    ),
    "parameters": ItemKind(
        "tables", TABLE_FILES, "fedrepro.report.parameters:make_parameter_table", structure=True
    ),
}
