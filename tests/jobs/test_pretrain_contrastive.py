"""The self-supervised mini siblings (FedHPL Tables 12-13): pretrained by NT-Xent over two
views, never reading a label, saved without their projection head."""

from __future__ import annotations

import torch
from safetensors.torch import load_file

from fedrepro.data.prepared import Split, save_split
from fedrepro.jobs.pretrain import pretrain_backbone

VIEWS = {"crop": {"scale": [0.2, 1.0]}, "flip": 0.5}
CFG = {"epochs": 2, "batch_size": 16, "optimizer": "adam", "lr": 0.001, "weight_decay": 0.0,
       "views": VIEWS}  # fmt: skip


def _data(folder, labels: torch.Tensor) -> None:
    gen = torch.Generator().manual_seed(0)
    images = (torch.rand(len(labels), 16, 16, 3, generator=gen) * 255).to(torch.uint8)
    for split in ("train", "test"):
        s = Split(images, labels, None, ["a", "b", "c", "d"], [])
        save_split(folder / f"{split}.safetensors", s, {"dataset": "toy", "split": split})


def test_contrastive_pretraining_reads_no_label_and_drops_the_projection(tmp_path):
    labels = torch.arange(64) % 4
    outs = []
    for name, lab in (("true", labels), ("shuffled", labels[torch.randperm(64)])):
        _data(tmp_path / name, lab)
        out = tmp_path / f"{name}.safetensors"
        pretrain_backbone("vit_s_mini_ssl", tmp_path / name, out, CFG, "cpu")
        outs.append(load_file(out))
    assert outs[0].keys() == outs[1].keys()
    assert not any(k.startswith("head.") for k in outs[0])
    assert all(torch.equal(outs[0][k], outs[1][k]) for k in outs[0])  # labels never read
    before = pretrain_backbone("vit_s_mini", tmp_path / "true", tmp_path / "s.safetensors",
                               {**CFG, "views": None}, "cpu")  # fmt: skip
    assert "head.weight" in load_file(tmp_path / "s.safetensors") and before >= 0
