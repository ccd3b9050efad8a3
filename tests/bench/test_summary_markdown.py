"""The benchmark pages' Markdown tables (pandas' to_markdown): every cell read back as
written, columns aligned for a reader of the plain file."""

from __future__ import annotations

import pandas as pd

from fedrepro.bench.summary import md_table


def _read(text: str) -> tuple[list[str], list[list[str]]]:
    head, rule, *body = text.splitlines()
    assert set(rule) <= set("|:-") and rule.count("|") == head.count("|")
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in (head, *body)]
    return cells[0], cells[1:]


def test_a_table_reads_back_cell_for_cell_with_aligned_columns():
    frame = pd.DataFrame([
        {"target": "fedpce", "jobs": 176, "seconds": "0.300", "MFU": "12.5%", "note": ""},
        {"target": "all · mini", "jobs": 1_327, "seconds": "1,234.5", "MFU": "0.0%",
         "note": "n/a"},
    ])  # fmt: skip
    text = md_table(frame)
    header, rows = _read(text)
    assert header == list(frame.columns)
    assert rows == [[str(v) for v in row] for row in frame.itertuples(index=False)]
    assert len({len(line) for line in text.splitlines()}) == 1  # padded: one width per column
