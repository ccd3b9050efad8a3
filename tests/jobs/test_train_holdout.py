"""A run whose clients test on held-out training images (``test_mode: train_holdout``, FedHPL
App. C.3's protocol of the heterogeneous-model baselines): the job feeds those indices from the
training split, with the test input settings, and leaves the test split out."""

from __future__ import annotations

import json

import torch

from fedrepro.jobs.train import load_job, train_run
from tests.job_helpers import toy_job

OWN = {"scheme": "label_quantity", "k": [1, 2, 3, 4], "clients": 4, "test_mode": "train_holdout"}


def test_clients_evaluate_on_their_held_out_training_images(tmp_path):
    cfg = toy_job(tmp_path, rounds=1, algorithm="fedavg", spec=OWN)
    part = json.loads((tmp_path / "part.json").read_text())
    job = load_job(cfg, tmp_path / "data", tmp_path / "part.json", None, "cpu", 1)
    assert torch.equal(job.test.images, job.train.images)
    assert not job.test.augments
    for k, idx in enumerate(job.clients.test):
        counts = torch.bincount(job.test.labels[idx], minlength=4).tolist()
        assert counts == part["histogram"]["test"][k]  # the classes the client holds
        assert not set(idx.tolist()) & set(part["clients"][k]["train"])
    metrics = train_run(cfg, tmp_path / "data", tmp_path / "part.json", tmp_path / "out", None,
                        "cpu", 1)  # fmt: skip
    assert len(metrics["final_acc_per_client"]) == 4
