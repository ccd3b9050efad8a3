"""Reading run results into frames; also the fake-run writers the other report tests use."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fedrepro.report import results


def write_run(
    runs_dir: Path,
    run_id: str,
    final_acc: float,
    *,
    diverged: bool = False,
    history: list[float] | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """A finished run: metrics.json (and history.csv when ``history`` is given)."""
    run = runs_dir / run_id
    run.mkdir(parents=True, exist_ok=True)
    metrics = {
        "run_id": run_id,
        "scale": "mini",
        "final_acc": final_acc,
        "best_acc": final_acc + 1.0,
        "diverged": diverged,
        "comm": {"total_bytes": 1000.0},
        **(extra or {}),
    }
    (run / "metrics.json").write_text(json.dumps(metrics))
    if history is not None:
        acc = np.asarray(history, dtype=float)
        pd.DataFrame(
            {
                "round": np.arange(1, len(acc) + 1),
                "acc": acc,
                "acc_mean": acc,
                "loss": np.linspace(2.0, 0.5, len(acc)),
                "lr": 0.1,
                "up_bytes": 10,
                "down_bytes": 10,
                "seconds": 0.01,
                "diverged": ~np.isfinite(acc),
                "excluded": 0,
            }
        ).to_csv(run / "history.csv", index=False)


def with_files(
    manifest: dict[str, Any], runs_dir: Path, partitions_dir: Path | None = None
) -> dict[str, Any]:
    """Name each run's result files under ``runs_dir`` (and each partition's JSON under
    ``partitions_dir``) in the manifest, as the plan does; returns the manifest."""
    for run in manifest.get("runs", []):
        run["files"] = {
            "metrics": str(Path(runs_dir) / run["id"] / "metrics.json"),
            "history": str(Path(runs_dir) / run["id"] / "history.csv"),
        }
    for part in manifest.get("partitions", []) if partitions_dir else []:
        part["file"] = str(Path(partitions_dir) / f"{part['id']}.json")
    return manifest


def seed_values(mean: float, std: float) -> list[float]:
    """Three seeds whose mean is ``mean`` and sample std (ddof=1) is ``std``."""
    return [mean - std, mean, mean + std]


def make_manifest(
    cells: dict[tuple[str, ...], tuple[float, float]],
    label_names: tuple[str, ...],
    runs_dir: Path,
    *,
    spec: dict[str, Any],
    item: str = "table1",
    scale: str = "mini",
    skip: set[tuple[str, ...]] = frozenset(),
    diverge: set[tuple[str, ...]] = frozenset(),
) -> dict[str, Any]:
    """A manifest with three seeds per cell; writes their runs except for ``skip`` cells."""
    runs = []
    for n, (key, (mean, std)) in enumerate(cells.items()):
        for seed, value in enumerate(seed_values(mean, std)):
            run_id = f"run{n}-s{seed}"
            labels = {**dict(zip(label_names, key, strict=True)), "seed": seed}
            runs.append({"id": run_id, "labels": labels})
            if key not in skip:
                write_run(runs_dir, run_id, value, diverged=key in diverge and seed == 0)
    manifest = {
        "paper": "adapters",
        "item": item,
        "kind": "table",
        "title": "Test table",
        "scale": scale,
        "spec": spec,
        "runs": runs,
    }
    return with_files(manifest, runs_dir)


def test_runs_frame_reads_values_and_keeps_missing_runs(tmp_path: Path) -> None:
    write_run(tmp_path, "a", 80.0, extra={"comm": {"total_bytes": 123.0}})
    write_run(tmp_path, "b", float("nan"), diverged=False)
    manifest = {
        "runs": [
            {"id": "a", "labels": {"algorithm": "FedAvg", "seed": 0}},
            {"id": "b", "labels": {"algorithm": "FedAvg", "seed": 1}},
            {"id": "c", "labels": {"algorithm": "FedAvg", "seed": 2}},
        ]
    }
    frame = results.runs_frame(with_files(manifest, tmp_path), "comm.total_bytes")
    assert frame["value"].iloc[0] == 123.0
    assert frame["present"].tolist() == [True, True, False]
    frame = results.runs_frame(with_files(manifest, tmp_path), "final_acc")
    assert frame["diverged"].tolist() == [False, True, False]  # NaN counts as diverged
    unreported = results.runs_frame(with_files(manifest, tmp_path), "params.frozen")
    assert not unreported["diverged"].any() and unreported["value"].isna().all()
    stats = results.cell_stats(frame, ["algorithm"])
    assert stats.loc[0, "n"] == 3 and stats.loc[0, "n_present"] == 2
    assert stats.loc[0, "n_finite"] == 1 and stats.loc[0, "mean"] == 80.0
    assert math.isnan(stats.loc[0, "std"])  # one finite seed: ddof=1 std undefined


def test_cell_stats_uses_sample_std(tmp_path: Path) -> None:
    for seed, value in enumerate(seed_values(50.0, 2.0)):
        write_run(tmp_path, f"r{seed}", value)
    manifest = {"runs": [{"id": f"r{s}", "labels": {"seed": s, "x": "a"}} for s in range(3)]}
    stats = results.cell_stats(
        results.runs_frame(with_files(manifest, tmp_path), "final_acc"), ["x"]
    )
    assert stats.loc[0, "mean"] == pytest.approx(50.0)
    assert stats.loc[0, "std"] == pytest.approx(2.0)


def test_pooling_two_datasets_as_seeds_is_refused(tmp_path: Path) -> None:
    manifest = {
        "runs": [
            {"id": "a", "labels": {"dataset": "SVHN", "algorithm": "FedAvg", "seed": 0}},
            {"id": "b", "labels": {"dataset": "CIFAR-10", "algorithm": "FedAvg", "seed": 0}},
        ]
    }
    frame = results.runs_frame(with_files(manifest, tmp_path), "final_acc")
    with pytest.raises(ValueError, match="'dataset'"):
        results.check_cells_unique(frame, ["algorithm"], "t")
    with pytest.raises(ValueError, match="'variant'"):
        results.check_cells_unique(frame, ["variant"], "t")


def test_lookup_reported_matches_labels_and_keeps_hash_labels(tmp_path: Path) -> None:
    path = tmp_path / "rep.csv"
    path.write_text(
        "item,dataset,partition,algorithm,variant,value,std,source\n"
        "table1,SVHN,#M=1,FedAvg,w/o adapter,19.57,0.16,T\n"
        "table1,SVHN,#M=1,Average difference,,18.93,0.01,T\n"
    )
    rep = results.read_reported(path)
    key = {"dataset": "SVHN", "partition": "#M=1", "algorithm": "FedAvg", "variant": "w/o adapter"}
    assert results.lookup_reported(rep, "table1", key) == (19.57, 0.16)
    assert results.lookup_reported(rep, "table2", key) is None
    assert results.lookup_reported(rep, "table1", {**key, "algorithm": "FedNova"}) is None
    assert results.read_reported(tmp_path / "absent.csv") is None


def test_per_client_rows_explode_a_list_metric(tmp_path: Path) -> None:
    write_run(tmp_path, "a", 50.0, extra={"final_acc_per_client": [40.0, 60.0, float("nan")]})
    manifest = {
        "runs": [
            {"id": "a", "labels": {"method": "FedAvg", "seed": 0}},
            {"id": "b", "labels": {"method": "FedAvg", "seed": 1}},  # not finished
        ]
    }
    frame = results.runs_frame(with_files(manifest, tmp_path), "final_acc_per_client", "client")
    assert frame["client"].tolist() == ["0", "1", "2", None]
    assert frame["value"].tolist()[:2] == [40.0, 60.0]
    assert frame["diverged"].tolist() == [False, False, True, False]
    assert frame["present"].tolist() == [True, True, True, False]


def test_per_group_rows_explode_a_mapping_metric(tmp_path: Path) -> None:
    groups = {"Gaussian noise": 40.0, "ColorJitter": 55.0}
    write_run(tmp_path, "a", 50.0, extra={"best_acc_per_group": groups})
    manifest = {"runs": [{"id": "a", "labels": {"method": "FedPCE", "seed": 0}}]}
    frame = results.runs_frame(with_files(manifest, tmp_path), "best_acc_per_group", "deg")
    assert frame["deg"].tolist() == ["Gaussian noise", "ColorJitter"]
    assert frame["value"].tolist() == [40.0, 55.0]


def test_result_files_are_every_file_a_manifest_names() -> None:
    manifest = {
        "runs": [{"id": "r", "files": {"metrics": "m.json", "history": "h.csv"}}],
        "partitions": [{"id": "p", "file": "p.json"}],
        "structure": {"id": "s", "file": "s.json"},
    }
    assert results.result_files(manifest) == ["m.json", "h.csv", "p.json", "s.json"]


def test_a_file_the_rule_was_not_given_is_refused() -> None:
    manifest = {"runs": [{"id": "r", "files": {"metrics": "m.json"}}]}
    results.check_inputs([manifest], ["m.json", "other.csv"])
    with pytest.raises(RuntimeError, match=r"\['m.json'\]"):
        results.check_inputs([manifest], ["other.csv"])
