"""A pretraining job's log: a line per epoch with its time, rate and time left."""

from __future__ import annotations

import re

import torch

from fedrepro.jobs.pretrain import pretrain_backbone
from tests.jobs.test_pretrain_contrastive import CFG, _data


def test_each_pretraining_epoch_logs_its_seconds_rate_and_time_left(tmp_path, job_lines):
    """Epoch lines were printed without a time stamp, a rate or the time left: each is now a
    job-log line (time-stamped, unbuffered) with the epoch's seconds, images per second and
    the time left of the pretraining."""
    _data(tmp_path / "data", torch.arange(64) % 4)
    pretrain_backbone("vit_s_mini", tmp_path / "data", tmp_path / "s.safetensors",
                      {**CFG, "epochs": 3, "views": None}, "cpu")  # fmt: skip
    line = re.compile(
        r"pretrain vit_s_mini epoch (\d)/3: loss=\d+\.\d{3} test acc=\d+\.\d% \d+\.\ds, "
        r"[\d.,]+ images/s, eta (\d+(?:s|m\d\ds|h\d\dm))"
    )
    found = [line.fullmatch(x) for x in job_lines]
    assert len(found) == 3 and all(found), job_lines
    assert [m[1] for m in found] == ["1", "2", "3"] and found[-1][2] == "0s"
