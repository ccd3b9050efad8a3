"""A truncated staged dataset file and an altered staged weights file, through the workflow:
each job stops with a checksum error naming its file, and nothing downstream runs."""

from __future__ import annotations

import hashlib

from fedrepro.data.sources.registry import get_dataset
from fedrepro.experiments.plan import paper_plan
from tests.workflow_helpers import copy_workflow, snakemake


def test_bad_staged_files_stop_their_jobs_and_nothing_downstream(tmp_path):
    wf = copy_workflow(tmp_path)
    root = tmp_path / "staged_root"
    first = get_dataset("fmnist").remote[0]  # downloads verify files in order: this one first
    data_file = root / "fmnist" / first.filename
    data_file.parent.mkdir(parents=True)
    data_file.write_bytes(b"\x1f\x8b" + b"\0" * 1000)  # a truncated gzip, far short of its size
    weights = root / "backbones" / "resnet26" / "model.pth"
    weights.parent.mkdir(parents=True)
    weights.write_bytes(b"weights as first fetched")
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    weights.with_name("model.pth.sha256").write_text(f"{digest}  model.pth\n")
    weights.write_bytes(b"weights altered since")

    plan = paper_plan(wf)
    pid = next(p for p, v in plan.partitions.items() if v["dataset"] == "fmnist")
    res = snakemake(
        "--cores", "1", "--keep-going", "--configfile", "config/paper.yaml",
        "--config", f"data_root={root}", "results=out", "--",
        f"out/paper/partitions/{pid}.json",
        "out/paper/data/fmnist/train.safetensors",
        "out/paper/backbones/fetched/resnet26.safetensors",
        cwd=wf,
    )  # fmt: skip
    assert res.returncode != 0
    data_log = (wf / "out/paper/logs/download/fmnist.log").read_text()
    weights_log = (wf / "out/paper/logs/backbones/resnet26.log").read_text()
    assert "ChecksumError" in data_log and str(data_file) in data_log, data_log[-1500:]
    assert "ChecksumError" in weights_log and str(weights) in weights_log, weights_log[-1500:]
    assert not (wf / "out/paper/data").exists() or not any(
        (wf / "out/paper/data").rglob("*.safetensors")
    )
    assert not (wf / "out/paper/backbones/fetched/resnet26.safetensors").exists()
    assert not (root / "fmnist" / ".fetched").exists()
    assert data_file.read_bytes().startswith(b"\x1f\x8b") and weights.exists()  # user files kept
    for rule in ("prepare_data", "partition", "train"):
        assert f"rule {rule}:" not in res.stdout + res.stderr
