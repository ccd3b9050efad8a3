"""FedPCE Figs. 1 and 3: client vectors of a trained run projected and coloured by group, and
the silhouette a training job records for the clustering claim."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from safetensors.numpy import save_file

from fedrepro.jobs.train import local_clustering
from fedrepro.report.embeddings import client_levels, plot_embeddings
from fedrepro.report.figures import make_figure

GROUPS = ["Gaussian noise"] * 3 + ["ColorJitter"] * 3 + ["Class imbalance"] * 3


def _run(tmp: Path, spread: float) -> dict:
    rng = np.random.default_rng(0)
    centres = {g: rng.normal(0, 5, 4) for g in set(GROUPS)}
    state = {f"client{k}.embedding": (centres[g] + rng.normal(0, spread, 4)).astype(np.float32)
             for k, g in enumerate(GROUPS)}  # fmt: skip
    (tmp / "run").mkdir()
    save_file(state, str(tmp / "run/state.safetensors"))
    (tmp / "run/config.json").write_text(
        json.dumps({"partition_id": "p", "cohort": "collaborative"})
    )
    (tmp / "run/metrics.json").write_text(json.dumps({"best_acc": 50.0}))
    records = [{"group": g, "new": False, "transform": None} for g in GROUPS]
    records.insert(1, {"group": "Gaussian noise", "new": True, "transform": None})  # skipped
    part = {"clients": records, "histogram": {"train": [[5, 5]] * len(records)}}
    (tmp / "part.json").write_text(json.dumps(part))
    names = {"metrics": "metrics.json", "state": "state.safetensors", "config": "config.json"}
    files = {f: str(tmp / "run" / n) for f, n in names.items()}
    return {"paper": "fedpce", "item": "fig3", "title": "Fig. 3", "scale": "mini",
            "spec": {"figure": "embeddings", "vectors": {"embedding": "embedding"}},
            "runs": [{"id": "run", "labels": {"seed": 0}, "files": files}],
            "partitions": [{"id": "p", "file": str(tmp / "part.json")}]}  # fmt: skip


def test_clients_are_drawn_by_group_with_their_silhouette(tmp_path):
    fig = plot_embeddings(_run(tmp_path, spread=0.1))
    pca, tsne = fig.axes[:2]
    assert [len(c.get_offsets()) for c in pca.collections] == [3, 3, 3]  # 9 collaborating
    assert "silhouette 0.9" in fig.get_suptitle()  # tight groups
    plt.close(fig)
    (tmp_path / "b").mkdir()
    written = make_figure(_run(tmp_path / "b", 0.1), tmp_path / "fig")
    assert [p.suffix for p in written] == [".png", ".pdf"]


def test_levels_follow_the_degradation():
    assert client_levels({"transform": {"kind": "fedpce_noise", "var": 0.3}}, []) == 0.3
    jitter = {"kind": "color_jitter", "brightness": 1.5, "contrast": 1.0, "saturation": 0.5,
              "hue": -0.25}  # fmt: skip
    assert client_levels({"transform": jitter}, []) == 1.25
    assert client_levels({"transform": None}, [10, 10]) == 0.0  # balanced classes
    assert client_levels({"transform": None}, [20, 0]) == 1.0  # one class only
    assert client_levels({"transform": None, "alpha": 0.1}, [10, 10]) > client_levels(
        {"transform": None, "alpha": 10.0}, [10, 10]
    )  # a smaller concentration is a stronger imbalance


def test_training_records_how_local_tensors_cluster():
    rng = np.random.default_rng(0)
    tight = {k: {"embedding": torch.tensor(rng.normal(5.0 * (k // 3), 0.1, 4))} for k in range(9)}
    groups = ["a", "a", "a", "b", "b", "b", "c", "c", "c"]
    result = local_clustering(tight, groups)
    assert result["silhouette"] > 0.8 and result["gain"] > 0.7
    assert local_clustering(tight, [None] * 9) is None  # no groups
    assert local_clustering({0: tight[0]}, ["a"] + [None] * 8) is None  # a group of one
    assert local_clustering({}, groups) is None
