"""A run's public data set (``public.dataset``: FedMD's): the job reads the training split
prepared beside the run's dataset, holds it on the device for the algorithm, and refuses, in
one line naming the key, a run that names none for an algorithm that needs one, or one for an
algorithm that reads none."""

from __future__ import annotations

import shutil

import pytest

from fedrepro.jobs.train import load_job, train_run
from tests.job_helpers import toy_job

SAMPLES = 40
MODEL = {"backbone": "resnet_mini",
         "client_backbones": ["resnet_mini", "resnet34_mini", "resnet34_mini", "resnet_mini"],
         "pretrained": False, "img_size": 12, "tuning": "head_split",
         "tuning_options": {"projection": "none", "stem": 3, "public_classes": 4}}  # fmt: skip
FEDMD = {"name": "fedmd", "samples": SAMPLES, "pretrain_epochs": 1}


def _job(tmp, **over):
    cfg = toy_job(tmp, rounds=2, model=MODEL, **over)
    cfg["algorithm"] = FEDMD
    cfg["train"]["fraction"] = 1.0
    shutil.copytree(tmp / "data", tmp / "svhn")  # the public set, prepared beside the run's
    return cfg


def test_a_fedmd_run_trains_on_its_public_set_and_uploads_only_logits(tmp_path):
    cfg = _job(tmp_path, public={"dataset": "svhn"})
    job = load_job(cfg, tmp_path / "data", tmp_path / "part.json", None, "cpu", 1)
    assert all(a.public is not None and len(a.public.labels) == 400 for a in job.algorithm)
    metrics = train_run(cfg, tmp_path / "data", tmp_path / "part.json", tmp_path / "run",
                        device="cpu")  # fmt: skip
    per_sample = (4 + 4) * 4 + 8  # both heads' float32 logits and an int64 label
    assert metrics["comm"]["up_bytes_per_client_round"] == SAMPLES * per_sample
    assert metrics["params"]["communicated"] == 0  # no model tensor is averaged


def test_a_run_without_the_public_set_its_algorithm_needs_is_refused(tmp_path):
    cfg = _job(tmp_path)
    with pytest.raises(ValueError, match=r"algorithm fedmd: .*\(public\.dataset\)"):
        load_job(cfg, tmp_path / "data", tmp_path / "part.json", None, "cpu", 1)


def test_a_public_set_for_an_algorithm_that_reads_none_is_refused(tmp_path):
    cfg = toy_job(tmp_path, rounds=1, algorithm="fedavg", public={"dataset": "data"})
    with pytest.raises(ValueError, match="public: algorithm 'fedavg' reads no public data"):
        load_job(cfg, tmp_path / "data", tmp_path / "part.json", None, "cpu", 1)
