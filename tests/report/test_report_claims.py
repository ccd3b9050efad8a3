"""Claims: every kind holds / fails correctly on constructed numbers, on paper and ours."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedrepro.report.claims import evaluate_claims, make_claims
from tests.report.test_report_results import make_manifest

LABELS = ("dataset", "algorithm", "variant")
# ours: (mean, std) per cell, three seeds each
OURS = {
    ("SVHN", "FedAvg", "full"): (90.0, 1.0),
    ("SVHN", "FedAvg", "adapter"): (88.0, 1.0),
    ("SVHN", "FedNova", "full"): (85.0, 9.0),
    ("SVHN", "FedNova", "adapter"): (86.0, 2.0),
    ("SVHN", "FedIns", "adapter"): (95.0, 0.5),
    ("CIFAR-10", "FedAvg", "full"): (70.0, 1.0),
    ("CIFAR-10", "FedAvg", "adapter"): (60.0, 1.5),
    ("CIFAR-10", "FedNova", "full"): (71.0, 5.0),
    ("CIFAR-10", "FedNova", "adapter"): (69.0, 1.0),
    ("CIFAR-10", "FedIns", "adapter"): (72.0, 0.5),
}
# the paper's numbers differ from ours where noted, so both columns are exercised
PAPER = """item,dataset,algorithm,variant,value,std,source
t,SVHN,FedAvg,full,90.0,1.0,T
t,SVHN,FedAvg,adapter,89.0,1.0,T
t,SVHN,FedNova,full,85.0,9.0,T
t,SVHN,FedNova,adapter,84.0,2.0,T
t,SVHN,FedIns,adapter,95.0,0.5,T
t,CIFAR-10,FedAvg,full,70.0,1.0,T
t,CIFAR-10,FedAvg,adapter,68.0,1.5,T
t,CIFAR-10,FedNova,full,71.0,5.0,T
t,CIFAR-10,FedNova,adapter,70.0,1.0,T
t,CIFAR-10,FedIns,adapter,69.0,0.5,T
t,CIFAR-10,Average difference,,1.5,0.1,T
"""
SPEC = {
    "rows": ["dataset"],
    "columns": ["algorithm", "variant"],
    "metric": "final_acc",
    "diff": [{"name": "Average difference", "label": "variant", "minuend": "full",
              "subtrahend": "adapter"}],
}  # fmt: skip


@pytest.fixture
def setup(tmp_path: Path) -> tuple[dict, Path, Path]:
    runs = tmp_path / "runs"
    manifest = make_manifest(OURS, LABELS, runs, spec=SPEC, item="t")
    (tmp_path / "paper.csv").write_text(PAPER)
    return {"t": manifest}, runs, tmp_path / "paper.csv"


def evaluate(setup: tuple[dict, Path, Path], *claims: dict) -> pd.DataFrame:
    manifests, runs, paper = setup
    return evaluate_claims(list(claims), manifests, paper).set_index("claim")


def holds(frame: pd.DataFrame, cid: str) -> tuple[object, object]:
    row = frame.loc[cid]
    return (
        None if pd.isna(row.holds_paper) else bool(row.holds_paper),
        None if pd.isna(row.holds_ours) else bool(row.holds_ours),
    )


CLOSE = {
    "id": "close",
    "text": "adapter within 3 points of full for every algorithm",
    "kind": "pairwise",
    "item": "t",
    "left": {"variant": "full", "algorithm": ["FedAvg", "FedNova"]},
    "right": {"variant": "adapter", "algorithm": ["FedAvg", "FedNova"]},
    "pair_on": ["dataset", "algorithm"],
    "test": "abs_diff <= 3",
}


def test_pairwise_all_holds_on_paper_fails_on_ours(setup: tuple[dict, Path, Path]) -> None:
    frame = evaluate(setup, CLOSE)
    assert holds(frame, "close") == (True, False)  # ours: CIFAR-10 FedAvg differs by 10
    assert frame.loc["close", "paper_value"] == "4/4 pass; worst abs_diff = 2.00"
    assert "CIFAR-10·FedAvg: 10.00" in frame.loc["close", "detail"]


def test_pairwise_quantifiers(setup: tuple[dict, Path, Path]) -> None:
    base = {**CLOSE, "test": "diff >= 0"}  # full ≥ adapter; ours diffs: 2, -1, 10, 2
    frame = evaluate(
        setup,
        {**base, "id": "all"},
        {**base, "id": "most", "quantifier": "most"},
        {**base, "id": "mean", "quantifier": "mean", "test": "diff > 3"},
        {**base, "id": "any", "quantifier": "any", "test": "diff > 5"},
    )
    assert holds(frame, "all") == (True, False)
    assert holds(frame, "most") == (True, True)  # 3 of 4
    assert holds(frame, "mean") == (False, True)  # paper mean 1.5, ours 3.25
    assert frame.loc["mean", "ours"] == "mean diff = 3.25 (n=4)"
    assert holds(frame, "any") == (False, True)


PER_DATASET = {
    "id": "per-dataset",
    "text": "full above adapter on average per dataset",
    "kind": "pairwise",
    "left": {"item": "t", "variant": "full"},
    "right": {"item": "t", "variant": "adapter", "algorithm": ["FedAvg", "FedNova"]},
    "pair_on": ["dataset"],
    "test": "diff > 0",
}


def test_pairwise_across_items_and_pair_averaging(setup: tuple[dict, Path, Path]) -> None:
    frame = evaluate(setup, PER_DATASET)
    # ours SVHN: mean(90, 85) − mean(88, 86) = 0.5; CIFAR-10: 70.5 − 64.5 = 6
    assert holds(frame, "per-dataset") == (True, True)
    assert frame.loc["per-dataset", "ours"] == "2/2 pass; worst diff = 0.50"


def test_pairwise_against_the_lowest_or_highest_of_a_unit(setup: tuple[dict, Path, Path]) -> None:
    """``combine: min`` compares with the lowest cell of the unit ("above the lowest
    baseline"), ``max`` with the highest; the default averages them."""
    claim = {**PER_DATASET, "id": "above-lowest", "left": {"item": "t", "algorithm": "FedIns"},
             "text": "FedIns at least 7 points above the lowest adapter baseline",
             "test": "diff >= 7", "combine": "min"}  # fmt: skip
    frame = evaluate(
        setup, claim, {**claim, "id": "above-highest", "combine": "max"},
        {**claim, "id": "above-mean", "combine": "mean"},
    )  # fmt: skip
    # ours CIFAR-10: 72 − min(60, 69) = 12, − max = 3, − mean 64.5 = 7.5; SVHN: 95 − 86 = 9,
    # 95 − 88 = 7, 95 − 87 = 8
    assert frame.loc["above-lowest", "ours"] == "2/2 pass; worst diff = 9.00"
    assert frame.loc["above-highest", "ours"] == "1/2 pass; worst diff = 3.00"
    assert frame.loc["above-mean", "ours"] == "2/2 pass; worst diff = 7.50"
    with pytest.raises(ValueError, match="claim 'bad': key 'combine'"):
        evaluate(setup, {**claim, "id": "bad", "combine": "median"})


def test_constant(setup: tuple[dict, Path, Path]) -> None:
    near = {"kind": "constant", "item": "t", "text": "CIFAR-10 below 72"}
    frame = evaluate(
        setup,
        {**near, "id": "each", "select": {"dataset": "CIFAR-10"}, "test": "value < 72"},
        {**near, "id": "avg", "select": {"dataset": "CIFAR-10"}, "test": "value <= 68.4",
         "quantifier": "mean"},
    )  # fmt: skip
    assert holds(frame, "each") == (True, False)  # ours: FedIns reaches 72.0
    # paper mean (70+68+71+70+69)/5 = 69.6 ; ours (70+60+71+69+72)/5 = 68.4
    assert holds(frame, "avg") == (False, True)


def test_rank_and_stability(setup: tuple[dict, Path, Path]) -> None:
    frame = evaluate(
        setup,
        {"id": "fedins-top", "text": "FedIns above every baseline on each dataset",
         "kind": "rank", "item": "t", "select": {"algorithm": "FedIns"},
         "group_by": ["dataset"]},
        {"id": "fednova-unstable", "text": "FedNova has the largest std", "kind": "rank",
         "item": "t", "stat": "std", "select": {"algorithm": "FedNova"}},
        {"id": "fedavg-bottom", "text": "FedAvg adapter lowest", "kind": "rank", "item": "t",
         "rank": "min", "select": {"algorithm": "FedAvg", "variant": "adapter"},
         "among": {"variant": "adapter"}, "group_by": "dataset", "quantifier": "any"},
        {"id": "fedavg-bottom-all", "text": "FedAvg adapter lowest on every dataset",
         "kind": "rank", "item": "t", "rank": "min",
         "select": {"algorithm": "FedAvg", "variant": "adapter"},
         "among": {"variant": "adapter"}, "group_by": "dataset"},
    )  # fmt: skip
    # paper: CIFAR-10 FedNova full (71) beats FedIns (69); ours: FedIns 95 and 72 both top
    assert holds(frame, "fedins-top") == (False, True)
    expected = "CIFAR-10: FedNova·full 71.00 vs FedIns·adapter 69.00"
    assert expected in frame.loc["fedins-top", "detail"]
    assert frame.loc["fedins-top", "paper_value"].startswith("1/2 groups")
    assert holds(frame, "fednova-unstable") == (True, True)  # std 9 is the largest
    # both: FedAvg is the lowest adapter cell on CIFAR-10 but not on SVHN (FedNova is)
    assert holds(frame, "fedavg-bottom") == (True, True)
    assert holds(frame, "fedavg-bottom-all") == (False, False)


def test_difference_rows_of_the_paper_are_not_cells(setup: tuple[dict, Path, Path]) -> None:
    claim = {"id": "min", "text": "every cell above 60", "kind": "constant", "item": "t",
             "select": {"dataset": "CIFAR-10"}, "test": "value > 60"}  # fmt: skip
    frame = evaluate(setup, claim)
    assert frame.loc["min", "paper_value"].startswith("5/5 pass")  # 'Average difference' out


def test_no_data_is_not_evaluable(setup: tuple[dict, Path, Path]) -> None:
    claim = {**CLOSE, "id": "nodata", "left": {"variant": "full", "dataset": "MNIST"}}
    frame = evaluate(setup, claim)
    assert holds(frame, "nodata") == (None, None)
    assert frame.loc["nodata", "ours"] == "—"


@pytest.mark.parametrize(
    ("claim", "key"),
    [
        ({**CLOSE, "test": "abs_diff << 3"}, "test"),
        ({**CLOSE, "test": "value <= 3"}, "test"),
        ({k: v for k, v in CLOSE.items() if k != "pair_on"}, "pair_on"),
        ({**CLOSE, "kind": "versus"}, "kind"),
        ({**CLOSE, "quantifer": "all"}, "quantifer"),
        ({**CLOSE, "quantifier": "some"}, "quantifier"),
        ({**CLOSE, "stat": "median"}, "stat"),
        ({**CLOSE, "left": {"algo": "FedAvg"}}, "left"),
        ({**CLOSE, "left": ["full"]}, "left"),
        ({"id": "r", "text": "t", "kind": "rank", "select": {}, "rank": "top"}, "rank"),
    ],
)
def test_malformed_claim_names_id_and_key(
    setup: tuple[dict, Path, Path], claim: dict, key: str
) -> None:
    with pytest.raises(ValueError, match=rf"claim '{claim['id']}': key '{key}'") as err:
        evaluate(setup, claim)
    assert "\n" not in str(err.value)


def test_make_claims_writes_csv_md_html(setup: tuple[dict, Path, Path], tmp_path: Path) -> None:
    manifests, runs, paper = setup
    paths = make_claims([CLOSE], manifests, paper, tmp_path / "claims" / "adapters")
    assert sorted(p.suffix for p in paths) == [".csv", ".html", ".md"]
    table = pd.read_csv(tmp_path / "claims" / "adapters.csv")
    assert list(table.columns[:1]) == ["claim"]
    assert {"paper_value", "ours", "holds_paper", "holds_ours", "detail"} <= set(table.columns)
    html = (tmp_path / "claims" / "adapters.html").read_text()
    assert '<span class="yes">✓</span>' in html and '<span class="no">✗</span>' in html
    assert "NOT a reproduction" in (tmp_path / "claims" / "adapters.md").read_text()


def test_contrast_compares_two_differences(setup: tuple[dict, Path, Path]) -> None:
    """Adapters cost FedAvg more than FedNova (full − adapter): ours 2 vs −1 on SVHN."""
    claim = {
        "id": "contrast",
        "text": "FedAvg loses more to adapters than FedNova",
        "kind": "pairwise",
        "item": "t",
        "left": {"variant": "full"},
        "right": {"variant": "adapter"},
        "pair_on": ["dataset", "algorithm"],
        "contrast": {"algorithm": ["FedAvg", "FedNova"]},
        "test": "diff > 0",
    }
    frame = evaluate(setup, claim)
    # ours: SVHN 2 − (−1) = 3, CIFAR-10 10 − 2 = 8; paper: SVHN 1 − 1 = 0 fails
    assert holds(frame, "contrast") == (False, True)
    assert "2/2 pass" in frame.loc["contrast", "ours"]
    with pytest.raises(ValueError, match="'contrast'"):
        evaluate(setup, {**claim, "contrast": {"variant": ["full", "adapter"]}})


def test_contrast_with_several_others(setup: tuple[dict, Path, Path]) -> None:
    """FedNova loses least: its loss is compared with each other algorithm's in turn."""
    claim = {
        "id": "least",
        "text": "FedNova loses less to adapters than every other algorithm",
        "kind": "pairwise",
        "item": "t",
        "left": {"variant": "full"},
        "right": {"variant": "adapter"},
        "pair_on": ["dataset", "algorithm"],
        "contrast": {"algorithm": ["FedNova", "FedAvg", "FedIns"]},
        "test": "diff < 0",
    }
    frame = evaluate(setup, claim)
    # ours: SVHN −1 − 2 = −3, CIFAR-10 2 − 10 = −8; paper: SVHN 1 − 1 = 0 fails,
    # CIFAR-10 1 − 2 = −1; FedIns has no "full" cell, so no FedIns unit
    assert holds(frame, "least") == (False, True)
    assert frame.loc["least", "ours"].startswith("2/2 pass")
    assert "SVHN·vs FedAvg: 0.00" in frame.loc["least", "detail"]
    with pytest.raises(ValueError, match="'contrast'"):
        evaluate(setup, {**claim, "contrast": {"algorithm": ["FedNova"]}})


def test_settle_round_from_history(tmp_path: Path) -> None:
    from fedrepro.report.claims import settle_round
    from tests.report.test_report_results import with_files, write_run

    assert settle_round([1, 2, 3, 4], [10.0, 50.0, 59.0, 60.0], 2.0) == 3.0
    assert settle_round([1, 2, 3], [60.0, float("nan"), 60.0], 2.0) == 3.0
    assert settle_round([1, 2], [60.0, 60.5], 2.0) == 1.0
    assert np.isnan(settle_round([1, 2], [60.0, float("nan")], 2.0))
    curves = {"fast": [50.0, 79.0, 80.0, 80.0, 80.0, 80.0], "slow": [10, 30, 50, 70, 78, 80]}
    runs = []
    for method, curve in curves.items():
        for seed in (0, 1):
            write_run(tmp_path, f"{method}{seed}", curve[-1], history=list(map(float, curve)))
            runs.append({"id": f"{method}{seed}", "labels": {"method": method, "seed": seed}})
    manifest = with_files({"item": "f", "spec": {"metric": "acc_mean"}, "runs": runs}, tmp_path)
    claims = [
        {"id": "fast", "text": "fast settles by round 2", "kind": "constant", "item": "f",
         "metric": "settle_round(acc_mean, 1)", "select": {"method": "fast"},
         "test": "value <= 2"},
        {"id": "first", "text": "fast settles first", "kind": "rank", "item": "f",
         "metric": "settle_round(acc_mean, 1)", "select": {"method": "fast"}, "rank": "min"},
    ]  # fmt: skip
    frame = evaluate_claims(claims, {"f": manifest}, None).set_index("claim")
    assert holds(frame, "fast") == (None, True)  # no reported numbers: paper not evaluable
    assert holds(frame, "first") == (None, True)
    with pytest.raises(ValueError, match="'metric'"):
        evaluate_claims([{**claims[0], "metric": "settle_round(acc_mean)"}], {"f": manifest}, None)


def test_claims_read_per_group_cells_as_the_items_table_does(tmp_path: Path) -> None:
    from tests.report.test_report_results import with_files, write_run

    runs = []
    for method, noisy in (("FedPCE", 50.0), ("FedBN", 40.0)):
        groups = {"Gaussian noise": noisy, "ColorJitter": 60.0}
        write_run(tmp_path, method, 55.0, extra={"best_acc_per_group": groups})
        runs.append({"id": method, "labels": {"method": method, "seed": 0}})
    spec = {"metric": "best_acc_per_group", "per_client": "degradation"}
    manifest = with_files({"item": "t2", "spec": spec, "runs": runs}, tmp_path)
    claim = {"id": "noisy", "text": "FedPCE best under noise", "kind": "rank", "item": "t2",
             "select": {"method": "FedPCE"},
             "among": {"degradation": "Gaussian noise"}}  # fmt: skip
    other = {"id": "gain", "text": "a whole-run metric on the same item", "kind": "constant",
             "item": "t2", "metric": "best_acc", "select": {"method": "FedPCE"},
             "test": "value > 50"}  # fmt: skip
    frame = evaluate_claims([claim, other], {"t2": manifest}, None).set_index("claim")
    assert holds(frame, "noisy") == (None, True)
    assert holds(frame, "gain") == (None, True)  # the item's per-group rows are not applied


def test_rank_over_a_parameters_item_reads_counts_and_printed_values(tmp_path: Path) -> None:
    """A claim on a ``parameters`` item ranks its structure job's counts (ours) and the
    printed values in scalars (the paper's; "K" and bare numbers in the item's unit)."""
    counts = (("FedAvg", 85_806_346), ("pFedPT", 1_077_450), ("FedHPL", 35_338))
    rows = [{"row": "method", "label": m, "trainable": n, "server": 0} for m, n in counts]
    structure = tmp_path / "structure.json"
    doc = {"spec": {}, "columns": ["row", "label", "trainable", "server"], "rows": rows}
    structure.write_text(json.dumps(doc))
    printed = tmp_path / "params.csv"
    printed.write_text(
        "row,label,quantity,value,source\nmethod,FedAvg,trainable,81.83,T\n"
        "method,pFedPT,trainable,20K,T\nmethod,FedHPL,trainable,0.034,T\n"
    )
    spec = {"quantities": ["trainable"], "unit": "Mi", "reported": str(printed)}
    manifest = {"kind": "parameters", "structure": {"file": str(structure)}, "spec": spec}
    claim = {"id": "fewest", "text": "t", "item": "params", "kind": "rank", "metric": "trainable",
             "select": {"method": "FedHPL"}, "rank": "min"}  # fmt: skip
    frame = evaluate_claims([claim], {"params": manifest}, None)
    assert frame["holds_ours"].tolist() == [True]
    assert frame["holds_paper"].tolist() == [False]  # 20K = 20,480 < 0.034 M = 35,651
    claim["select"] = {"method": "pFedPT"}
    frame = evaluate_claims([claim], {"params": manifest}, None)
    assert frame["holds_ours"].tolist() == [False] and frame["holds_paper"].tolist() == [True]
    # the paper's side reads the claim's quantity only: a printed "server" value is not a cell
    printed.write_text(printed.read_text() + "method,FedHPL,server,90,T\n")
    spec["quantities"] = ["trainable", "server"]
    frame = evaluate_claims([{**claim, "metric": "server"}], {"params": manifest}, None)
    assert frame["holds_paper"].isna().all() and "no group" in frame["detail"].iloc[0]
    printed.write_text(printed.read_text() + "method,FedProx,trainable,lost,T\n")
    with pytest.raises(ValueError, match="FedProx/trainable: 'lost' is not a number"):
        evaluate_claims([claim], {"params": manifest}, None)
