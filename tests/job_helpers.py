"""A toy training job on disk (data, partition, config), run as the workflow runs it."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from fedrepro.data.partitions.make import partition_files
from fedrepro.data.prepared import Split, save_split
from tests.workflow_helpers import REPO, env

# every perturbation of a contrastive view (fedrepro.data.transforms.views), for adaptations of toy
# runs trained without augmentation, whose two views of Eq. 7 would otherwise coincide
JITTER = {"p": 0.8, "brightness": 0.4, "contrast": 0.4, "saturation": 0.4, "hue": 0.1}
VIEWS = {"crop": {"scale": [0.2, 1.0]}, "flip": 0.5, "jitter": JITTER, "grayscale": 0.2}


def toy_job(
    tmp: Path, rounds: int = 8, algorithm: str = "scaffold", spec: dict | None = None, **over
) -> dict:
    """Prepared splits, a partition (default: 4-client Dirichlet) and a run config under
    ``tmp``."""
    gen = torch.Generator().manual_seed(0)
    for split, n in (("train", 400), ("test", 200)):
        labels = torch.arange(n) % 4
        images = torch.rand(n, 12, 12, 3, generator=gen) * 120 + labels[:, None, None, None] * 40
        s = Split(images.to(torch.uint8), labels, None, ["a", "b", "c", "d"], [])
        save_split(tmp / "data" / f"{split}.safetensors", s, {"dataset": "toy", "split": split})
    spec = spec or {"scheme": "dirichlet", "variant": "niid", "beta": 0.5, "clients": 4,
                    "test_mode": "global"}  # fmt: skip
    partition_files(spec, tmp / "data/train.safetensors", tmp / "data/test.safetensors",
                    tmp / "part.json", seed=0)  # fmt: skip
    cfg = {
        "paper": "test", "seed": 0, "scale": "mini", "dataset": "cifar10", "partition_id": "p",
        "algorithm": {"name": algorithm}, "partition": spec, "data": {}, "checkpoint_every": 1,
        "model": {"backbone": "cnn_simple", "pretrained": False, "img_size": 32},
        "train": {"rounds": rounds, "local_epochs": 2, "batch_size": 16, "optimizer": "sgd",
                  "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4, "fraction": 0.5},
        **over,
    }  # fmt: skip
    (tmp / "config.json").write_text(json.dumps(cfg))
    return cfg


def train_cmd(tmp: Path, *outs: Path, configs: list[dict] | None = None) -> list[str]:
    """The command the workflow's train rule runs: a job training the toy run under ``tmp``
    into each of ``outs`` (or run ``configs[i]`` into ``outs[i]``), its record beside the
    first (``<out>.json``)."""
    cfg = json.loads((tmp / "config.json").read_text())
    runs = [{"config": c, "partition": str(tmp / "part.json"), "out_dir": str(out)}
            for c, out in zip(configs or [cfg] * len(outs), outs, strict=True)]  # fmt: skip
    return [sys.executable, str(REPO / "workflow/scripts/train.py"), "--runs-json",
            json.dumps(runs), "--data-dir", str(tmp / "data"), "--record",
            f"{outs[0]}.json", "--device", "cpu"]  # fmt: skip


def adapt_cmd(tmp: Path, run: Path, out: Path, adapt: dict, *more: tuple[Path, Path]) -> list[str]:
    """The command the workflow's adapt rule runs: ``adapt`` on the trained run ``run`` into
    ``out`` (and on each further ``(run, out)`` of ``more``), the record beside the first
    (``<out>.json``)."""
    members = [{"adapt": adapt, "run_dir": str(r), "partition": str(tmp / "part.json"),
                "out_dir": str(o)} for r, o in ((run, out), *more)]  # fmt: skip
    return [sys.executable, str(REPO / "workflow/scripts/adapt.py"), "--adapts-json",
            json.dumps(members), "--data-dir", str(tmp / "data"), "--record", f"{out}.json",
            "--device", "cpu"]  # fmt: skip


def run_metrics(out: Path) -> dict:
    """A finished run's metrics without what differs between identical runs."""
    m = json.loads((out / "metrics.json").read_text())
    for key in ("wall_seconds", "seconds", "run_id", "peak_rss_mb"):
        m.pop(key, None)
    return m


def assert_adaptation_resumes(adapt: dict, run: Path, tmp: Path, kill_at: int = 2) -> None:
    """Adapt ``run`` in full, then kill the same adaptation at round ``kill_at`` and rerun the
    job: the resumed job ends with the same numbers."""
    from fedrepro.jobs.adapt import adapt_run, prepare_adapt
    from tests.fl_helpers import Killed

    args = (adapt, run, tmp / "data", tmp / "part.json")
    full = adapt_run(*args, tmp / "full", device="cpu")

    def die(msg: str) -> None:
        if msg.startswith(f"round {kill_at}/"):
            raise Killed

    job, _ = prepare_adapt(*args, device="cpu")
    try:
        job.run(tmp / "killed" / "checkpoint.pt", log=die)
    except Killed:
        pass
    else:
        raise AssertionError(f"the adaptation never reached round {kill_at}")
    resumed = adapt_run(*args, tmp / "killed", device="cpu")
    for key in ("final_acc", "final_acc_per_client", "final_loss", "best_acc"):
        assert resumed[key] == full[key], key


def kill_then_resume(cmd: list[str], out: Path, rounds: int, before_rerun=None) -> int:
    """Kill ``cmd`` (writing to ``out``) after a random checkpointed round, rerun it to the
    end (``before_rerun()`` called in between); returns the round it had finished when
    killed."""
    chance = random.SystemRandom()
    target = chance.randint(1, rounds - 4)  # the round whose checkpoint we wait for
    proc = subprocess.Popen(cmd, env=env())
    ckpt = out / "checkpoint.pt"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if ckpt.exists() and torch.load(ckpt, weights_only=True)["round"] >= target:
            break
        time.sleep(0.01)
    time.sleep(chance.uniform(0.0, 0.03))  # somewhere inside the next round
    assert proc.poll() is None, f"the job finished before it could be killed (round {target})"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "metrics.json").exists(), "a killed job must not look finished"
    done = torch.load(ckpt, weights_only=True)["round"]
    assert target <= done < rounds, (target, done)
    if before_rerun is not None:
        before_rerun()
    subprocess.run(cmd, check=True, env=env(), timeout=300)
    assert not ckpt.exists()
    return done
