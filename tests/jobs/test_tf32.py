"""A run's TF32 policy (``train.tf32``) reaches torch's switches in the job that trains it
(settable without a GPU); the default is PyTorch's own (convolutions only)."""

from __future__ import annotations

import pytest
import torch

from fedrepro.jobs.train import train_runs
from tests.job_helpers import toy_job

SWITCHES = {  # policy -> (cuBLAS matmuls, cuDNN convolutions) in TF32
    None: (False, True),
    "conv": (False, True),
    "all": (True, True),
    "none": (False, False),
}


@pytest.fixture
def torch_defaults():
    yield
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = True


def _switches() -> tuple[bool, bool]:
    return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32


@pytest.mark.parametrize("policy", list(SWITCHES))
def test_the_runs_tf32_key_reaches_torch_in_its_job(tmp_path, policy, torch_defaults):
    cfg = toy_job(tmp_path, rounds=1)
    if policy is not None:
        cfg["train"]["tf32"] = policy
    matmul, conv = SWITCHES[policy]
    torch.backends.cuda.matmul.allow_tf32 = not matmul  # the opposite of what the run asks
    torch.backends.cudnn.allow_tf32 = not conv
    member = {"config": cfg, "partition": tmp_path / "part.json", "out_dir": tmp_path / "run"}
    train_runs([member], tmp_path / "data", device="cpu")
    assert _switches() == SWITCHES[policy]


def test_an_unknown_tf32_policy_is_one_line_naming_the_key(tmp_path, torch_defaults):
    cfg = toy_job(tmp_path, rounds=1)
    cfg["train"]["tf32"] = "medium"
    member = {"config": cfg, "partition": tmp_path / "part.json", "out_dir": tmp_path / "run"}
    with pytest.raises(ValueError, match=r"train\.tf32: 'medium' \(allowed: conv, all, none\)"):
        train_runs([member], tmp_path / "data", device="cpu")
