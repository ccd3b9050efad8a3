"""A run whose clients hold different models (``model.client_backbones``, issue 34) in the
plan: each client's backbone goes to its tiny sibling at mini scale, every backbone is fetched
or pretrained, and a list that does not fit the clients is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fedrepro.experiments.config import ConfigError
from fedrepro.experiments.plan import build_plan
from fedrepro.jobs.cli import job_files, job_parser

REPO = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
B = "vit_base_patch16_224.augreg_in21k_ft_in1k"


def _plan(tmp: Path, backbones: list[str]):
    doc = yaml.safe_load((REPO / "config/experiments/fedhpl.yaml").read_text())
    doc["axes"]["method"]["FedHPL"]["model"]["client_backbones"] = backbones
    for value in ("MoCo-v3 (1)", "MoCo-v3 (2)"):  # their backbone is none of these lists
        doc["axes"]["pretraining"][value] = {}
    for block in (doc, doc["scales"]["mini"]):
        block["overrides"] = [o for o in block["overrides"] if "pretraining" not in o["where"]]
    (tmp / "config" / "experiments").mkdir(parents=True, exist_ok=True)
    (tmp / "config/experiments/fedhpl.yaml").write_text(yaml.safe_dump(doc))
    return build_plan({**CONFIG, "papers": ["fedhpl"]}, tmp)


def test_each_clients_backbone_maps_to_its_sibling_and_is_pretrained(tmp_path):
    """ViT-B/16 goes to vit_b_mini inside a federation (scales.mini.federation_backbones) and
    to vit_tiny_mini on its own (Table 1's homogeneous runs)."""
    plan = _plan(tmp_path, [B, "vit_pfedpt", B, "vit_pfedpt", B])
    mixed = [r for r in plan.runs.values()
             if "vit_pfedpt_mini" in (r["model"].get("client_backbones") or [])]  # fmt: skip
    assert mixed and all(r["algorithm"]["name"] == "fedhpl" for r in mixed)
    tiny = ["vit_b_mini", "vit_pfedpt_mini"]
    assert {tuple(r["model"]["client_backbones"]) for r in mixed} == {tuple(tiny * 2 + tiny[:1])}
    assert {r["model"]["backbone"] for r in mixed} == {"vit_b_mini"}
    alone = [r for r in plan.runs.values() if r["model"]["backbone"] == "vit_tiny_mini"]
    assert alone and not any(r["model"].get("client_backbones") for r in alone)
    assert set(tiny) <= set(plan.backbones)


def test_client_backbones_that_do_not_fit_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="model.client_backbones names 2 backbones for 5 clients"):
        _plan(tmp_path, [B, "vit_pfedpt"])
    with pytest.raises(ConfigError, match="no tiny sibling for .resnet101.tv_in1k"):
        _plan(tmp_path, [B, B, "resnet101.tv_in1k", B, B])
    with pytest.raises(ConfigError, match="model.backbone is none of model.client_backbones"):
        _plan(tmp_path, ["vit_pfedpt"] * 5)


def test_a_job_takes_one_weights_file_or_one_per_backbone():
    p = job_parser("")
    one = job_files(p.parse_args(["--data-dir", "d", "--backbone", "a/x.safetensors"]))
    assert one["backbone"] == Path("a/x.safetensors")
    two = ["--data-dir", "d", "--backbone", "a/vit_s.x.safetensors", "a/vit_b.safetensors"]
    assert job_files(p.parse_args(two))["backbone"] == {
        "vit_s.x": Path("a/vit_s.x.safetensors"), "vit_b": Path("a/vit_b.safetensors")}  # fmt: skip
    assert job_files(p.parse_args(["--data-dir", "d"]))["backbone"] is None
