"""Tables: layout, mean ± std over seeds, paper values beside cells, dashes, daggers, diffs."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from fedrepro.report.tables import make_table, report_caption
from tests.report.test_report_results import make_manifest, with_files

LABELS = ("dataset", "partition", "algorithm", "variant")
SPEC = {
    "rows": ["dataset", "partition"],
    "columns": ["algorithm", "variant"],
    "metric": "final_acc",
    "fmt": "{:.2f}",
    "diff": [
        {
            "name": "Average difference",
            "label": "variant",
            "minuend": "w/o adapter",
            "subtrahend": "w/ adapter",
        }
    ],
}
# (dataset, partition) rows x (algorithm, variant) columns: (mean, std) per cell
CELLS = {
    ("SVHN", "Dir(0.5)", "FedAvg", "w/o adapter"): (80.0, 1.0),
    ("SVHN", "Dir(0.5)", "FedAvg", "w/ adapter"): (78.0, 2.0),
    ("SVHN", "Dir(0.5)", "FedProx", "w/o adapter"): (70.0, 3.0),
    ("SVHN", "Dir(0.5)", "FedProx", "w/ adapter"): (66.0, 0.5),
    ("SVHN", "#M=1", "FedAvg", "w/o adapter"): (20.0, 1.0),
    ("SVHN", "#M=1", "FedAvg", "w/ adapter"): (19.0, 1.0),
    ("SVHN", "#M=1", "FedProx", "w/o adapter"): (18.0, 1.0),
    ("SVHN", "#M=1", "FedProx", "w/ adapter"): (17.0, 1.0),
    ("CIFAR-10", "Dir(0.5)", "FedAvg", "w/o adapter"): (60.0, 1.0),
    ("CIFAR-10", "Dir(0.5)", "FedAvg", "w/ adapter"): (59.0, 1.0),
    ("CIFAR-10", "Dir(0.5)", "FedProx", "w/o adapter"): (58.0, 1.0),
    ("CIFAR-10", "Dir(0.5)", "FedProx", "w/ adapter"): (57.0, 1.0),
}
REPORTED = (
    "item,setting,dataset,partition,algorithm,variant,value,std,source\n"
    "table1,cross-silo,SVHN,#M=1,FedProx,w/ adapter,19.33,0.32,Table I\n"
    "table1,cross-silo,SVHN,Dir(0.5),Average difference,,0.91,0.01,Table I\n"
)


def md_table(path: Path) -> list[list[str]]:
    """The markdown table's rows (header first), cells stripped, separator dropped."""
    lines = [ln for ln in path.read_text().splitlines() if ln.startswith("|")]
    rows = [[c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in lines]
    return [rows[0], *rows[2:]]


@pytest.fixture
def table(tmp_path: Path) -> tuple[Path, dict]:
    runs = tmp_path / "runs"
    skip = {("CIFAR-10", "Dir(0.5)", "FedProx", "w/ adapter")}
    diverge = {("SVHN", "#M=1", "FedAvg", "w/o adapter")}
    manifest = make_manifest(CELLS, LABELS, runs, spec=SPEC, skip=skip, diverge=diverge)
    (tmp_path / "rep.csv").write_text(REPORTED)
    make_table(with_files(manifest, runs), tmp_path / "out" / "t1", tmp_path / "rep.csv")
    return tmp_path / "out" / "t1", manifest


def test_layout_and_mean_std(table: tuple[Path, dict]) -> None:
    prefix, _ = table
    rows = md_table(prefix.with_suffix(".md"))
    assert rows[0] == [
        "Dataset",
        "Partition",
        "FedAvg / w/o adapter",
        "FedAvg / w/ adapter",
        "FedProx / w/o adapter",
        "FedProx / w/ adapter",
        "Average difference",
    ]
    assert len(rows) == 1 + 3  # header + SVHN×2 + CIFAR-10×1, in manifest order
    assert rows[1][:2] == ["SVHN", "Dir(0.5)"]
    assert rows[2][:2] == ["", "#M=1"]  # repeated dataset label left blank
    assert rows[3][:2] == ["CIFAR-10", "Dir(0.5)"]
    assert rows[1][2] == "80.00 ± 1.00"
    assert rows[1][5] == "66.00 ± 0.50"
    csv = pd.read_csv(prefix.with_suffix(".csv"))
    cell = csv[(csv.partition == "Dir(0.5)") & (csv.column == "FedProx / w/o adapter")]
    assert cell["mean"].iloc[0] == pytest.approx(70.0) and cell["std"].iloc[0] == pytest.approx(3.0)


def test_reported_values_sit_beside_their_cells(table: tuple[Path, dict]) -> None:
    prefix, _ = table
    rows = md_table(prefix.with_suffix(".md"))
    assert rows[2][5] == "17.00 ± 1.00 [paper 19.33 ± 0.32]"  # SVHN #M=1 FedProx w/
    assert "[paper" not in " ".join(rows[1][2:6] + rows[3])
    assert rows[1][6].endswith("[paper 0.91 ± 0.01]")  # diff column, from its own CSV row
    csv = pd.read_csv(prefix.with_suffix(".csv"))
    hit = csv[csv.paper_value.notna()]
    assert sorted(hit.paper_value) == [0.91, 19.33]
    assert hit.set_index("paper_value").loc[19.33, "column"] == "FedProx / w/ adapter"
    html = prefix.with_suffix(".html").read_text()
    assert '<span class="paper">[paper 19.33 ± 0.32]</span>' in html


def test_missing_and_diverged_cells(table: tuple[Path, dict]) -> None:
    prefix, _ = table
    md = prefix.with_suffix(".md").read_text()
    rows = md_table(prefix.with_suffix(".md"))
    assert rows[3][5] == "—"  # CIFAR-10 Dir(0.5) FedProx w/ adapter: no run finished
    assert rows[2][2].endswith("†")  # one seed diverged
    assert "† at least one seed diverged" in md
    # the diff of a row with a missing partner averages the pairs it has, marked partial
    assert rows[3][6] == "1.00 ± 0.00‡"


def test_diff_column_formula(table: tuple[Path, dict]) -> None:
    prefix, _ = table
    rows = md_table(prefix.with_suffix(".md"))
    # mean over algorithms of (w/o − w/) = mean(2, 4) = 3;
    # ± = mean std(w/o) − mean std(w/) = mean(1, 3) − mean(2, 0.5) = 0.75
    assert rows[1][6].startswith("3.00 ± 0.75")


def test_mini_disclaimer_and_accuracy_kind(table: tuple[Path, dict]) -> None:
    prefix, _ = table
    first = prefix.with_suffix(".md").read_text().splitlines()[0]
    assert "mini" in first and "NOT a reproduction of the paper's numbers" in first
    assert "synthetic stand-in data" in first
    md = prefix.with_suffix(".md").read_text()
    assert "final-round test accuracy" in md
    html = prefix.with_suffix(".html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "<style>" in html and 'class="warn"' in html
    assert '<th colspan="2" rowspan="1">FedAvg</th>' in html
    tex = prefix.with_suffix(".tex").read_text()
    assert r"\#M=1" in tex and r"\multicolumn{2}{c}{FedAvg}" in tex and "NOT a reproduction" in tex


def test_paper_scale_and_best_accuracy(tmp_path: Path) -> None:
    cells = {k: v for k, v in CELLS.items() if k[0] == "SVHN"}
    spec = {**SPEC, "metric": "best_acc", "accuracy": "best-over-rounds"}
    manifest = make_manifest(cells, LABELS, tmp_path / "runs", spec=spec, scale="paper")
    make_table(with_files(manifest, tmp_path / "runs"), tmp_path / "t")
    md = (tmp_path / "t.md").read_text()
    assert "NOT a reproduction" not in md and "scale `paper`" in md
    assert "best test accuracy over rounds" in md and "best-over-rounds accuracy" in md
    assert md_table(tmp_path / "t.md")[1][2] == "81.00 ± 1.00"  # best_acc = final + 1


def test_no_finished_runs_gives_dashes_not_a_crash(tmp_path: Path) -> None:
    skip = set(CELLS)
    manifest = make_manifest(CELLS, LABELS, tmp_path / "runs", spec=SPEC, skip=skip)
    make_table(with_files(manifest, tmp_path / "runs"), tmp_path / "t")
    rows = md_table(tmp_path / "t.md")
    assert all(c == "—" for row in rows[1:] for c in row[2:])


def test_bad_spec_names_the_key(tmp_path: Path) -> None:
    manifest = make_manifest(CELLS, LABELS, tmp_path / "runs", spec={**SPEC, "rows": []})
    with pytest.raises(ValueError, match="'rows'"):
        make_table(with_files(manifest, tmp_path / "runs"), tmp_path / "t")
    bad_diff = {**SPEC, "diff": [{**SPEC["diff"][0], "label": "seed"}]}
    manifest = make_manifest(CELLS, LABELS, tmp_path / "runs", spec=bad_diff)
    with pytest.raises(ValueError, match=r"diff\[0\]"):
        make_table(with_files(manifest, tmp_path / "runs"), tmp_path / "t")


def test_versus_marks_each_cell_against_the_reference_row(tmp_path: Path) -> None:
    """FedIns's "82.34(2.32) ↑": the gap to FedAvg in the same column, with its direction."""
    cells = {
        ("FedAvg", "CIFAR-100"): (80.0, 1.0),
        ("FedIns", "CIFAR-100"): (83.0, 1.0),
        ("SOLO", "CIFAR-100"): (30.0, 1.0),
        ("Prompt", "CIFAR-100"): (80.001, 1.0),
    }
    spec = {
        "rows": "method",
        "columns": "dataset",
        "versus": {"label": "method", "value": "FedAvg"},
    }
    manifest = make_manifest(cells, ("method", "dataset"), tmp_path / "runs", spec=spec)
    make_table(with_files(manifest, tmp_path / "runs"), tmp_path / "t")
    body = {row[0]: row[1] for row in md_table(tmp_path / "t.md")[1:]}
    assert body["FedIns"].endswith("(3.00) ↑")
    assert body["SOLO"].endswith("(50.00) ↓")
    assert body["FedAvg"].endswith("(0.00)")
    assert body["Prompt"].endswith("(0.00)")  # a gap that prints as zero has no arrow
    with pytest.raises(ValueError, match="'versus'"):
        make_table({**manifest, "spec": {**spec, "versus": {"label": "dataset"}}},
                   tmp_path / "bad")  # fmt: skip


def test_standard_error_spread_divides_the_std_by_root_n(tmp_path: Path) -> None:
    """FedICON prints mean (standard error): ``spread: se`` gives std/√n (3 seeds here)."""
    runs = tmp_path / "runs"
    spec = {"rows": "algorithm", "columns": "variant", "spread": "se"}
    cells = {("x", "FedAvg", "a"): (50.0, 3.0)}
    manifest = make_manifest(cells, ("dataset", "algorithm", "variant"), runs, spec=spec)
    make_table(with_files(manifest, runs), tmp_path / "se", None)
    csv = pd.read_csv(tmp_path / "se.csv")
    assert csv["std"].iloc[0] == pytest.approx(3.0 / 3**0.5)
    assert "standard error" in (tmp_path / "se.md").read_text()
    bad = {**manifest, "spec": {**spec, "spread": "iqr"}}
    with pytest.raises(ValueError, match="spread"):
        make_table(with_files(bad, runs), tmp_path / "bad", None)


def test_a_difference_columns_pm_is_named_by_the_tables_spread(tmp_path: Path) -> None:
    """With ``spread: se`` a ``std_diff`` column's ± is the difference of the cells' standard
    errors, not of their standard deviations (the caption said std)."""
    runs = tmp_path / "runs"
    diff = {"name": "Avg diff", "label": "variant", "minuend": "b", "subtrahend": "a"}
    spec = {"rows": "algorithm", "columns": "variant", "spread": "se", "diff": [diff]}
    cells = {("x", "FedAvg", "a"): (50.0, 3.0), ("x", "FedAvg", "b"): (52.0, 6.0)}
    manifest = make_manifest(cells, ("dataset", "algorithm", "variant"), runs, spec=spec)
    make_table(with_files(manifest, runs), tmp_path / "se", None)
    text = (tmp_path / "se.md").read_text()
    assert "mean se(b) − mean se(a)" in text and "std(" not in text
    assert "mean se(b)" in report_caption("table", spec)


def test_inline_diff_is_kept_per_group_after_its_columns(tmp_path: Path) -> None:
    """FedICON's Table 3: a Δ after each partition's (Original, Attribute shift) pair, its
    paper value found under ``test = Δ``."""
    runs = tmp_path / "runs"
    spec = {
        "rows": "method",
        "columns": ["partition", "test"],
        "spread": "se",
        "diff": [
            {
                "name": "Δ",
                "label": "test",
                "minuend": "Shift",
                "subtrahend": "Original",
                "pm": "none",
                "inline": True,
            }
        ],  # fmt: skip
    }
    cells = {
        ("FedAvg", "Dir(0.1)", "Original"): (64.0, 1.0),
        ("FedAvg", "Dir(0.1)", "Shift"): (50.0, 1.0),
        ("FedAvg", "Dir(1)", "Original"): (73.0, 1.0),
        ("FedAvg", "Dir(1)", "Shift"): (57.5, 1.0),
    }
    manifest = make_manifest(cells, ("method", "partition", "test"), runs, spec=spec)
    rep = tmp_path / "rep.csv"
    rep.write_text("item,method,partition,test,value,std\ntable1,FedAvg,Dir(1),Δ,-16.06,\n")
    make_table(with_files(manifest, runs), tmp_path / "t3", rep)
    header, row = md_table(tmp_path / "t3.md")
    assert header[1:] == ["Dir(0.1) / Original", "Dir(0.1) / Shift", "Dir(0.1) / Δ",
                          "Dir(1) / Original", "Dir(1) / Shift", "Dir(1) / Δ"]  # fmt: skip
    assert row[3].startswith("-14.00") and row[6].startswith("-15.50")
    assert "[paper -16.06]" in row[6] and "paper" not in row[3]
    csv = pd.read_csv(tmp_path / "t3.csv")
    deltas = csv[csv["kind"] == "diff"]
    assert deltas["test"].tolist() == ["Δ", "Δ"]
    assert deltas["mean"].tolist() == pytest.approx([-14.0, -15.5])


def test_statistics_make_columns_from_several_metrics_of_each_run(tmp_path: Path) -> None:
    """FedHPL's lowest / average / highest client: one column per metrics.json key, scaled by
    ``multiply``, each run read once per statistic."""
    from tests.report.test_report_results import write_run

    runs = tmp_path / "runs"
    spec = {
        "rows": "partition",
        "columns": "statistic",
        "metric": "final_acc",
        "multiply": 0.5,
        "statistics": {"label": "statistic",
                       "values": {"Lowest": "lo", "Average": "final_acc", "Highest": "hi"}},
    }  # fmt: skip
    manifest = {"paper": "fedhpl", "item": "t3", "kind": "table", "title": "t", "scale": "mini",
                "spec": spec, "runs": []}  # fmt: skip
    for i, (part, acc) in enumerate([("IID", 90.0), ("α=0.1", 80.0)]):
        manifest["runs"].append({"id": f"r{i}", "labels": {"partition": part, "seed": 0}})
        write_run(runs, f"r{i}", acc, extra={"lo": acc - 10, "hi": acc + 4})
    make_table(with_files(manifest, runs), tmp_path / "t3", None)
    header, iid, alpha = md_table(tmp_path / "t3.md")
    assert header[1:] == ["Lowest", "Average", "Highest"]
    assert [c.split()[0] for c in iid[1:]] == ["40.00", "45.00", "47.00"]
    assert [c.split()[0] for c in alpha[1:]] == ["35.00", "40.00", "42.00"]
    bad = {**manifest, "spec": {**spec, "statistics": {"label": "statistic"}}}
    with pytest.raises(ValueError, match="statistics"):
        make_table(with_files(bad, runs), tmp_path / "bad", None)


def test_an_accuracy_cell_carries_its_chance_level_and_nothing_else_does(tmp_path: Path) -> None:
    """100 over the classes of the cell's runs (the budget page's twice-chance share); a
    difference column or a scaled count has none."""
    cells = {("SVHN", "Dir(0.5)", "FedAvg", "w/o adapter"): (80.0, 1.0),
             ("SVHN", "Dir(0.5)", "FedAvg", "w/ adapter"): (78.0, 1.0),
             ("CIFAR-100", "Dir(0.5)", "FedAvg", "w/o adapter"): (40.0, 1.0),
             ("CIFAR-100", "Dir(0.5)", "FedAvg", "w/ adapter"): (41.0, 1.0)}  # fmt: skip
    for spec, want in ((SPEC, {"SVHN": 10.0, "CIFAR-100": 1.0}), ({**SPEC, "multiply": 2.0}, {})):
        manifest = make_manifest(cells, LABELS, tmp_path / "runs", spec=spec)
        for run in manifest["runs"]:
            run["classes"] = 100 if run["labels"]["dataset"] == "CIFAR-100" else 10
        make_table(manifest, tmp_path / "out" / "t", None)
        frame = pd.read_csv(tmp_path / "out" / "t.csv")
        measured = frame[frame["kind"] == "measured"]
        assert measured.groupby("dataset")["chance"].max().dropna().to_dict() == want
        assert frame.loc[frame["kind"] == "diff", "chance"].isna().all()
