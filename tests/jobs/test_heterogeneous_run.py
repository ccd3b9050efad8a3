"""A training run whose clients hold different models (``model.client_backbones``, issue 34):
one module per backbone, each client's tensors saved with its own model's shapes, each group's
averaged tensors under its own prefix, parameter counts summed over the clients, and a clear
refusal where a stage cannot take such a run yet."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from fedrepro.jobs.adapt import adapt_run
from fedrepro.jobs.cli import job_files, job_parser
from fedrepro.jobs.train import load_job, train_run
from fedrepro.models.registry import create_backbone
from tests.job_helpers import toy_job

WIDE, NARROW = "vit_tiny_mini", "vit_pfedpt_mini"
MODEL = {"backbone": WIDE, "client_backbones": [WIDE, NARROW, NARROW, WIDE], "img_size": 16,
         "pretrained": False, "tuning": "vpt_deep",
         "tuning_options": {"num_prompts": 2}}  # fmt: skip


def _job(tmp, **over):
    cfg = toy_job(tmp, rounds=2, algorithm="fedhpl", model=MODEL, **over)
    cfg["algorithm"] = {"name": "fedhpl", "average": ["head"]}
    return cfg


def test_a_heterogeneous_run_trains_and_saves_each_clients_own_tensors(tmp_path):
    cfg = _job(tmp_path)
    job = load_job(cfg, tmp_path / "data", tmp_path / "part.json", None, "cpu", 1)
    assert len(job.model) == 2 and job.clients.architecture == [0, 1, 1, 0]
    metrics = train_run(cfg, tmp_path / "data", tmp_path / "part.json", tmp_path / "run",
                        device="cpu")  # fmt: skip
    saved = load_file(tmp_path / "run" / "state.safetensors")
    assert saved["global.model0.vit.head.weight"].shape == (4, 64)
    assert saved["global.model1.vit.head.weight"].shape == (4, 32)
    for k, width in enumerate([64, 32, 32, 64]):
        if f"client{k}.prompts" in saved:  # a client that took part (fraction 0.5)
            assert saved[f"client{k}.prompts"].shape[-1] == width
    each = [sum(p.numel() for p in m.parameters()) for m in job.model]
    assert metrics["params"]["total"] == 2 * each[0] + 2 * each[1]  # summed over the clients
    heads = (4 * 64 + 4) + (4 * 32 + 4)
    assert metrics["params"]["communicated"] == heads  # one averaged head per model
    assert len(metrics["final_acc_per_client"]) == 4


def test_weights_go_to_each_backbone_and_adapting_such_a_run_is_refused(tmp_path):
    cfg = _job(tmp_path)
    with pytest.raises(ValueError, match=r"give each backbone's weights \(\{name: file\}\)"):
        load_job(cfg, tmp_path / "data", tmp_path / "part.json", tmp_path / "w", "cpu", 1)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="clients of different models"):
        adapt_run({"method": "finetune"}, tmp_path / "run", tmp_path / "data",
                  tmp_path / "part.json", tmp_path / "adapt", device="cpu")  # fmt: skip


def test_each_module_loads_its_own_backbones_weights_from_the_jobs_files(tmp_path):
    """The train script's --backbone files (one per backbone, named by it) reach the module
    of that backbone; its frozen weights are the file's."""
    cfg = _job(tmp_path)
    files = []
    for name in (WIDE, NARROW):
        torch.manual_seed(7)
        raw = create_backbone(name, num_classes=4, img_size=16)
        save_file(raw.state_dict(), tmp_path / f"{name}.safetensors")
        files.append(str(tmp_path / f"{name}.safetensors"))
    args = job_parser("").parse_args(["--data-dir", str(tmp_path / "data"), "--backbone", *files])
    where = job_files(args)
    job = load_job(cfg, where["data_dir"], tmp_path / "part.json", where["backbone"], "cpu", 1)
    for module, file in zip(job.model, files, strict=True):
        saved = load_file(file)
        block = "vit.blocks.0.attn.qkv.weight"
        assert torch.equal(
            dict(module.named_parameters())[block], saved[block.removeprefix("vit.")]
        )


RESNETS = ["resnet_mini", "resnet50_mini", "resnet_mini", "resnet50_mini"]
BASELINES = {
    "fedhe": {"projection": "none", "stem": 3},
    "fedproto": {"feature_dim": 16, "mapping": 32},
    "fedgh": {"feature_dim": 16, "projection": "linear", "stem": 3},
    "fedtgp": {"feature_dim": 16},
    "fedgen": {"feature_dim": 16},
}


@pytest.mark.parametrize("name", list(BASELINES))
def test_each_heterogeneous_baseline_trains_resnets_of_two_depths_and_saves(tmp_path, name):
    """Table 2's baselines on ResNet siblings of two widths (latent 128 and 512): the job
    trains and saves each model's tensors apart (FedGen's one averaged head, copied per model:
    saving it shared failed)."""
    model = {"backbone": RESNETS[0], "client_backbones": RESNETS, "img_size": 16,
             "pretrained": False, "tuning": "head_split",
             "tuning_options": BASELINES[name]}  # fmt: skip
    cfg = toy_job(tmp_path, rounds=2, algorithm=name, model=model)
    cfg["algorithm"] = {
        "name": name,
        **({"server_epochs": 2} if name in ("fedgh", "fedtgp", "fedgen") else {}),
    }
    metrics = train_run(cfg, tmp_path / "data", tmp_path / "part.json", tmp_path / "run",
                        device="cpu")  # fmt: skip
    assert len(metrics["final_acc_per_client"]) == 4
    saved = load_file(tmp_path / "run" / "state.safetensors")
    if name == "fedgen":  # the heads of both models are the one average
        assert torch.equal(saved["global.model0.head.weight"], saved["global.model1.head.weight"])
    else:  # nothing is averaged: every client keeps its whole model
        assert not any(k.startswith("global.") for k in saved)
