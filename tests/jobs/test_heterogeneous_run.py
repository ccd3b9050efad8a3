"""A training run whose clients hold different models (``model.client_backbones``, issue 34):
one module per backbone, each client's tensors saved with its own model's shapes, each group's
averaged tensors under its own prefix, parameter counts summed over the clients, and a clear
refusal where a stage cannot take such a run yet."""

from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file

from fedrepro.jobs.adapt import adapt_run
from fedrepro.jobs.train import load_job, train_run
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
