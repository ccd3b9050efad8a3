"""Figures: curves (with NaN rounds), partition histograms and bars produce png + pdf."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from fedrepro.report.figures import make_figure, plot_curves, plot_partition_hist, plot_sweep
from fedrepro.report.output import save_figure
from tests.report.test_report_results import with_files, write_run


def curves_manifest(runs: Path) -> dict:
    """Two variants × two seeds on one dataset; seed 0 of 'w/o' has a NaN at round 3."""
    entries = []
    for variant, base in (("w/o adapter", 60.0), ("w/ adapter", 50.0)):
        for seed in range(2):
            run_id = f"{variant[:3]}-{seed}".replace("/", "")
            hist = list(np.linspace(10.0, base, 5))
            if variant == "w/o adapter" and seed == 0:
                hist[2] = float("nan")
            write_run(runs, run_id, base, history=hist)
            labels = {"dataset": "SVHN", "variant": variant, "seed": seed}
            entries.append({"id": run_id, "labels": labels})
    entries.append({"id": "never-ran", "labels": {"dataset": "SVHN", "variant": "x", "seed": 0}})
    return {
        "paper": "adapters",
        "item": "fig5",
        "kind": "figure",
        "title": "Accuracy per round",
        "scale": "mini",
        "spec": {"figure": "curves", "panels": "dataset", "lines": "variant", "metric": "acc"},
        "runs": entries,
    }


def assert_images(prefix: Path) -> None:
    png, pdf = prefix.with_suffix(".png"), prefix.with_suffix(".pdf")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 1000


def test_curves_mark_nan_rounds_as_drops(tmp_path: Path) -> None:
    manifest = curves_manifest(tmp_path / "runs")
    fig = plot_curves(with_files(manifest, tmp_path / "runs"))
    ax = fig.axes[0]
    crosses = [ln for ln in ax.lines if ln.get_marker() == "x"]
    assert len(crosses) == 1
    assert list(crosses[0].get_xdata()) == [3]
    # seed 0 reads 0 at round 3, seed 1 reads 35 → mean 17.5, the drop a reader sees
    assert crosses[0].get_ydata()[0] == pytest.approx(17.5)
    assert fig.get_suptitle().startswith("Accuracy per round\n")
    title = " ".join(fig.get_suptitle().split())  # undo line wrapping
    assert "mini scale" in title and "not the paper" in title and "× = non-finite" in title
    assert ax.get_xlabel() == "round" and "accuracy" in ax.get_ylabel()
    plt.close(fig)
    make_figure(with_files(manifest, tmp_path / "runs"), tmp_path / "out" / "fig5")
    assert_images(tmp_path / "out" / "fig5")


def test_partition_hist_stacks_class_counts(tmp_path: Path) -> None:
    counts = [[5, 0, 3], [1, 7, 0], [2, 2, 2], [0, 0, 9]]
    parts = tmp_path / "partitions"
    parts.mkdir()
    (parts / "p1.json").write_text(json.dumps({"histogram": {"train": counts, "test": []}}))
    manifest = {
        "paper": "adapters",
        "item": "fig4",
        "title": "Partition",
        "scale": "mini",
        "spec": {"figure": "partition_hist"},
        "runs": [],
        "partitions": [
            {"id": "p1", "labels": {"dataset": "CIFAR-10", "partition": "Dir(0.5)"}},
            {"id": "missing", "labels": {"partition": "#M=1"}},
        ],
    }
    fig = plot_partition_hist(with_files(manifest, tmp_path / "runs", parts))
    ax = fig.axes[0]
    assert len(ax.patches) == 4 * 3  # clients × classes
    tops: dict[int, float] = {}
    for patch in ax.patches:
        client = round(patch.get_x() + patch.get_width() / 2)
        tops[client] = max(tops.get(client, 0.0), patch.get_y() + patch.get_height())
    assert [tops[c] for c in range(4)] == [8, 8, 6, 9]  # stacked bar height = client's total
    assert ax.get_title() == "CIFAR-10 · Dir(0.5)"
    assert any("missing" in t.get_text() for t in fig.axes[1].texts)
    plt.close(fig)
    make_figure(with_files(manifest, tmp_path / "runs", parts), tmp_path / "fig4")
    assert_images(tmp_path / "fig4")


def test_bars_with_missing_cell(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    entries = []
    for alg in ("FedAvg", "FedNova"):
        for part in ("Dir(0.5)", "#M=1"):
            for seed in range(2):
                run_id = f"{alg}-{part}-{seed}"
                if not (alg == "FedNova" and part == "#M=1"):
                    write_run(runs, run_id, 70.0 + seed, diverged=alg == "FedNova")
                labels = {"algorithm": alg, "partition": part, "seed": seed}
                entries.append({"id": run_id, "labels": labels})
    manifest = {
        "paper": "adapters",
        "item": "bars",
        "title": "Bars",
        "scale": "mini",
        "spec": {"figure": "bars", "groups": "partition", "bars": "algorithm"},
        "runs": entries,
    }
    make_figure(with_files(manifest, runs), tmp_path / "bars")
    assert_images(tmp_path / "bars")


@pytest.mark.parametrize("figure", ["curves", "bars"])
def test_no_finished_runs_still_draws(tmp_path: Path, figure: str) -> None:
    manifest = curves_manifest(tmp_path / "elsewhere")  # runs written to another directory
    manifest["spec"] = {**manifest["spec"], "figure": figure, "groups": "variant"}
    make_figure(with_files(manifest, tmp_path / "runs"), tmp_path / "empty")
    assert_images(tmp_path / "empty")


def test_unknown_figure_kind_names_the_key(tmp_path: Path) -> None:
    manifest = {"paper": "p", "item": "f", "spec": {"figure": "pie"}, "runs": []}
    with pytest.raises(ValueError, match="'figure'"):
        make_figure(with_files(manifest, tmp_path), tmp_path / "x")


def test_sweep_places_numeric_labels_at_their_values(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    entries = []
    for method, base in (("FedAvg", 50.0), ("FedIns", 60.0)):
        for beta in ("0.1", "1", "5"):
            run_id = f"{method}-{beta}"
            write_run(runs, run_id, base + float(beta))
            entries.append({"id": run_id, "labels": {"method": method, "beta": beta, "seed": 0}})
    spec = {"figure": "sweep", "x": "beta", "lines": "method", "metric": "final_acc"}
    manifest = {"paper": "fedins", "item": "fig5a", "title": "Sweep", "scale": "mini",
                "spec": spec, "runs": entries}  # fmt: skip
    fig = plot_sweep(with_files(manifest, runs))
    lines = {ln.get_label(): ln for ln in fig.axes[0].lines}
    assert list(lines["FedIns"].get_xdata()) == [0.1, 1.0, 5.0]
    assert list(lines["FedIns"].get_ydata()) == pytest.approx([60.1, 61.0, 65.0])
    assert fig.axes[0].get_xscale() == "linear"
    plt.close(fig)
    fig = plot_sweep(with_files({**manifest, "spec": {**spec, "xscale": "log"}}, runs))
    assert fig.axes[0].get_xscale() == "log"  # values spanning decades
    plt.close(fig)
    # the paper's printed values (a text gives a few) go on their own axis at mini scale
    (tmp_path / "rep.csv").write_text(
        "item,method,beta,value,source\nfig5a,FedIns,0.1,85.13,§4.4\n"
    )
    fig = plot_sweep({**with_files(manifest, runs), "reported": str(tmp_path / "rep.csv")})
    paper_axis = fig.axes[-1]
    assert paper_axis is not fig.axes[0]
    (diamond,) = [ln for ln in paper_axis.lines if ln.get_marker() == "D"]
    assert list(diamond.get_xdata()) == [0.1] and list(diamond.get_ydata()) == [85.13]
    plt.close(fig)
    make_figure(with_files(manifest, runs), tmp_path / "sweep")
    assert_images(tmp_path / "sweep")


def test_the_same_figure_gives_the_same_bytes(tmp_path: Path) -> None:
    digests = []
    for name in ("a", "b"):
        fig, ax = plt.subplots()
        ax.plot([1.0, 3.0, 2.0])
        paths = save_figure(fig, tmp_path / name)
        plt.close(fig)
        digests.append([p.read_bytes() for p in paths])
    assert digests[0] == digests[1]  # no creation date in the PDF
