"""The linear probe that measures how far the mini pretraining transfers: a probe that can
tell separable from inseparable features, and the job/table wiring around it."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from fedrepro.data.prepared import Split, save_split
from fedrepro.fl.build import build_model
from fedrepro.jobs.probe import fit_probe, probe_backbone
from fedrepro.models.weights import save_weights
from fedrepro.report.probe import make_probe_table


def test_the_probe_separates_what_is_linearly_separable_and_nothing_else():
    gen = torch.Generator().manual_seed(0)
    labels = torch.arange(4).repeat(50)
    centres = torch.randn(4, 8, generator=gen) * 4
    feats = centres[labels] + torch.randn(200, 8, generator=gen)
    mean, std, w, b = fit_probe(feats, labels, 4)
    assert (((feats - mean) / std @ w + b).argmax(1) == labels).float().mean() > 0.95
    noise = torch.randn(200, 8, generator=gen)
    held_out = torch.randn(200, 8, generator=gen)
    mean, std, w, b = fit_probe(noise, labels, 4)
    assert (((held_out - mean) / std @ w + b).argmax(1) == labels).float().mean() < 0.45


def test_probe_job_writes_both_arms_per_dataset_and_the_table(tmp_path):
    gen = torch.Generator().manual_seed(1)
    for name in ("a", "b"):
        for split, n in (("train", 40), ("test", 20)):
            labels = torch.arange(2).repeat(n // 2)
            images = torch.randint(0, 256, (n, 16, 16, 3), generator=gen, dtype=torch.uint8)
            images[labels == 1, :8] = 255  # a visible class cue
            meta = {"dataset": name, "split": split}
            save_split(tmp_path / name / f"{split}.safetensors",
                       Split(images, labels, None, ["x", "y"], []), meta)  # fmt: skip
    weights = tmp_path / "w.safetensors"
    save_weights(build_model({"backbone": "resnet26_mini"}, 5, 7, None, "cpu"), weights)
    out = tmp_path / "probe.json"
    dirs = {n: tmp_path / n for n in ("b", "a")}
    rows = probe_backbone("resnet26_mini", weights, dirs, out, "cpu")
    assert [r["dataset"] for r in rows] == ["a", "b"]
    for r in rows:
        assert 0 <= r["random"] <= 100 and 0 <= r["pretrained"] <= 100
        assert r["gain"] == round(r["pretrained"] - r["random"], 2) and r["classes"] == 2
    assert json.loads(out.read_text())["rows"] == rows
    files = make_probe_table([out], tmp_path / "probe")
    assert {Path(f).suffix for f in files} == {".md", ".tex", ".html", ".csv"}
    md = (tmp_path / "probe.md").read_text()
    assert "| backbone | dataset | random init | pretrained | gain |" in md
