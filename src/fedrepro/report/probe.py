"""The linear-probe table: each pretrained tiny backbone, frozen, on each mini analog."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from fedrepro.report.tables import header_rows, row_entries, write_table

COLUMNS = ["random init", "pretrained", "gain"]


def probe_frame(paths: list[str | Path]) -> pd.DataFrame:
    rows = [row for p in paths for row in json.loads(Path(p).read_text())["rows"]]
    return pd.DataFrame(rows).sort_values(["backbone", "dataset"], ignore_index=True)


def make_probe_table(paths: list[str | Path], out_prefix: str | Path) -> list[Path]:
    """Write ``<out_prefix>.{md,tex,html,csv}`` from the probe jobs' JSON files."""
    frame = probe_frame(paths)
    rows = []
    keys = list(zip(frame["backbone"], frame["dataset"], strict=True))
    for r, labels in zip(frame.to_dict("records"), row_entries(keys), strict=True):
        texts = [f"{r['random']:.1f}", f"{r['pretrained']:.1f}", f"{r['gain']:+.1f}"]
        cells = [{"text": t, "paper": "", "missing": False, "is_diff": i == 2}
                 for i, t in enumerate(texts)]  # fmt: skip
        rows.append({"labels": labels, "cells": cells})
    caption = [
        "Test accuracy (%) of a linear probe (logistic regression, L-BFGS, on standardised "
        "pre-logit features) of each frozen tiny backbone, pretrained on the synthetic source "
        "set, against the same architecture with random weights, on each mini analog its runs "
        "use (the analog's full training and test splits).",
        "Chance is 100 / classes. A large gain is what lets the methods that freeze the "
        "backbone (adapters, SSF, prompts) stand in for their paper-scale selves.",
    ]
    header = header_rows([(c,) for c in COLUMNS], [])
    return write_table(
        out_prefix,
        frame,
        title="Linear probe of the pretrained tiny backbones",
        label="backbones-probe",
        scale="mini",
        caption_lines=caption,
        row_label_names=["backbone", "dataset"],
        header=header,
        column_names=COLUMNS,
        rows=rows,
        footnotes=[],
    )
