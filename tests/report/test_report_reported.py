"""The Adapters paper's transcribed Tables I/II, and the difference-column formula on them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fedrepro.report import results
from fedrepro.report.tables import build_table
from tests.report.test_report_results import make_manifest, with_files

CSV = Path(__file__).resolve().parents[2] / "config" / "reported" / "adapters.csv"
DATASETS = ["SVHN", "CIFAR-10", "FashionMNIST"]
PARTITIONS = ["Dir(0.5)", "#M=1", "#M=2", "#M=3", "Gau(0.1)"]
ALGORITHMS = ["FedAvg", "FedProx", "FedNova"]
VARIANTS = ["w/o adapter", "w/ adapter"]


@pytest.fixture(scope="module")
def reported() -> pd.DataFrame:
    frame = results.read_reported(CSV)
    assert frame is not None
    return frame


def test_shape_and_labels(reported: pd.DataFrame) -> None:
    assert list(reported.columns) == [
        "item", "setting", "dataset", "partition", "algorithm", "variant", "value", "std",
        "source",
    ]  # fmt: skip
    assert len(reported) == 2 * 15 * 7
    cells = reported[reported.algorithm != "Average difference"]
    for item, setting in (("table1", "cross-silo"), ("table2", "cross-device")):
        part = cells[cells.item == item]
        assert set(part.setting) == {setting}
        keys = set(part[["dataset", "partition", "algorithm", "variant"]].itertuples(index=False))
        assert keys == {
            (d, p, a, v) for d in DATASETS for p in PARTITIONS for a in ALGORITHMS for v in VARIANTS
        }
    assert cells["value"].between(0, 100).all() and (cells["std"] >= 0).all()
    diffs = reported[reported.algorithm == "Average difference"]
    assert len(diffs) == 30 and set(diffs.variant) == {""}


@pytest.mark.parametrize(
    ("item", "dataset", "partition", "algorithm", "variant", "value", "std"),
    [
        ("table1", "SVHN", "Dir(0.5)", "FedAvg", "w/o adapter", 96.00, 0.63),
        ("table1", "CIFAR-10", "#M=2", "FedNova", "w/ adapter", 61.72, 7.93),
        ("table1", "FashionMNIST", "Gau(0.1)", "FedProx", "w/ adapter", 93.56, 0.28),
        ("table2", "SVHN", "Dir(0.5)", "FedNova", "w/o adapter", 77.86, 39.78),
        ("table2", "CIFAR-10", "#M=3", "FedNova", "w/o adapter", 62.48, 29.87),
        ("table2", "FashionMNIST", "#M=2", "FedNova", "w/o adapter", 61.79, 28.7),
        ("table2", "FashionMNIST", "Gau(0.1)", "Average difference", "", 1.67, -0.20),
    ],
)
def test_spot_values(
    reported: pd.DataFrame, item, dataset, partition, algorithm, variant, value, std
):
    key = {"dataset": dataset, "partition": partition, "algorithm": algorithm, "variant": variant}
    assert results.lookup_reported(reported, item, key) == (value, std)


def test_diff_formula_reproduces_the_printed_average_difference(
    reported: pd.DataFrame, tmp_path: Path
) -> None:
    """Runs with exactly the paper's mean/std per cell: our diff column must match the printed
    one except in the rows the CSV annotates as disagreeing (misprints in the paper)."""
    spec = {
        "rows": ["dataset", "partition"],
        "columns": ["algorithm", "variant"],
        "diff": [{"name": "Average difference", "label": "variant", "minuend": "w/o adapter",
                  "subtrahend": "w/ adapter"}],
    }  # fmt: skip
    labels = ("dataset", "partition", "algorithm", "variant")
    for item in ("table1", "table2"):
        part = reported[(reported.item == item) & (reported.algorithm != "Average difference")]
        cells = {
            tuple(r[:4]): (r[4], r[5])
            for r in part[[*labels, "value", "std"]].itertuples(index=False, name=None)
        }
        manifest = make_manifest(cells, labels, tmp_path / item, spec=spec, item=item)
        frame = build_table(with_files(manifest, tmp_path / item), reported).frame
        diffs = frame[frame.kind == "diff"]
        assert len(diffs) == 15
        sources = reported[reported.algorithm == "Average difference"].set_index(
            ["item", "dataset", "partition"]
        )["source"]
        for row in diffs.itertuples():
            source = sources[(item, row.dataset, row.partition)]
            value_ok = abs(row.mean - row.paper_value) <= 0.015
            pm_ok = abs(row.std - row.paper_std) <= 0.015
            where = f"{item} {row.dataset} {row.partition}"
            assert value_ok != ("value disagrees" in source), where
            assert pm_ok != ("± disagrees" in source), where
