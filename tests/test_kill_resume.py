"""SIGKILL a training job mid-run, rerun it, and get the metrics of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import torch

from fedrepro.data.partition import partition_files
from fedrepro.data.prepared import Split, save_split
from tests.workflow_helpers import REPO, env

ROUNDS = 8


def _problem(tmp):
    gen = torch.Generator().manual_seed(0)
    for split, n in (("train", 400), ("test", 200)):
        labels = torch.arange(n) % 4
        images = torch.rand(n, 12, 12, 3, generator=gen) * 120 + labels[:, None, None, None] * 40
        s = Split(images.to(torch.uint8), labels, None, ["a", "b", "c", "d"], [])
        save_split(tmp / "data" / f"{split}.safetensors", s, {"dataset": "toy", "split": split})
    spec = {
        "scheme": "dirichlet",
        "variant": "niid",
        "beta": 0.5,
        "clients": 4,
        "test_mode": "global",
    }
    partition_files(spec, tmp / "data/train.safetensors", tmp / "data/test.safetensors",
                    tmp / "part.json", seed=0)  # fmt: skip
    cfg = {
        "paper": "test", "seed": 0, "scale": "mini", "dataset": "cifar10", "partition_id": "p",
        "algorithm": {"name": "scaffold"}, "partition": spec, "data": {}, "checkpoint_every": 1,
        "model": {"backbone": "cnn_simple", "pretrained": False, "img_size": 32},
        "train": {"rounds": ROUNDS, "local_epochs": 2, "batch_size": 16, "optimizer": "sgd",
                  "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4, "fraction": 0.5},
    }  # fmt: skip
    (tmp / "config.json").write_text(json.dumps(cfg))


def _cmd(tmp, out):
    return [sys.executable, str(REPO / "workflow/scripts/train.py"), "--config-json",
            (tmp / "config.json").read_text(), "--data-dir", str(tmp / "data"), "--partition",
            str(tmp / "part.json"), "--out-dir", str(out), "--device", "cpu"]  # fmt: skip


def _metrics(out):
    m = json.loads((out / "metrics.json").read_text())
    m.pop("wall_seconds")
    m.pop("run_id")
    return m


def test_sigkill_then_rerun_matches_uninterrupted(tmp_path):
    _problem(tmp_path)
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    subprocess.run(_cmd(tmp_path, clean), check=True, env=env(), timeout=300)

    proc = subprocess.Popen(_cmd(tmp_path, killed), env=env())
    ckpt = killed / "checkpoint.pt"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if ckpt.exists():
            saved = torch.load(ckpt, weights_only=True)["round"]
            if saved >= 2:
                break
        time.sleep(0.05)
    assert proc.poll() is None, "the job finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "metrics.json").exists(), "a killed job must not look finished"
    done = torch.load(ckpt, weights_only=True)["round"]
    assert 2 <= done < ROUNDS

    subprocess.run(_cmd(tmp_path, killed), check=True, env=env(), timeout=300)
    assert _metrics(killed) == _metrics(clean)
    assert not ckpt.exists()
