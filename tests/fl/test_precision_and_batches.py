"""Run-config keys that change what the engine computes: ``train.precision`` (fp32 enters
no autocast, in training or evaluation), ``train.eval_batch_size`` (FedIns's batch-scope
row evaluates with 32), ``train.drop_last``."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from fedrepro.experiments.config import ConfigError, validate
from fedrepro.experiments.plan import build_plan
from fedrepro.fl import local
from fedrepro.fl.engine import RunState, evaluate
from fedrepro.fl.local import predict, train_epochs
from fedrepro.fl.tensors import take
from tests.fl_helpers import TinyNet, problem, train_cfg

REPO = Path(__file__).resolve().parents[2]
CUDA_LIKE = SimpleNamespace(is_cuda=True)


def test_fp32_enters_no_autocast_even_on_cuda(monkeypatch):
    entered = []
    monkeypatch.setattr(local.torch, "autocast", lambda *a, **k: entered.append((a, k)))
    local.autocast(CUDA_LIKE, "fp32")
    assert entered == []
    local.autocast(CUDA_LIKE, "bf16")
    assert entered == [(("cuda",), {"dtype": torch.bfloat16})]
    local.autocast(SimpleNamespace(is_cuda=False), "bf16")  # CPU: never
    assert len(entered) == 1
    with pytest.raises(ValueError, match="train.precision"):
        local.autocast(CUDA_LIKE, "fp16")


def test_training_and_evaluation_both_take_the_runs_precision(monkeypatch):
    seen = []
    real = local.autocast
    monkeypatch.setattr(local, "autocast", lambda x, p: seen.append(p) or real(x, p))
    data, clients = problem()
    model = TinyNet()
    tcfg = {**train_cfg()["train"], "precision": "bf16"}
    gen = torch.Generator().manual_seed(0)
    train_epochs(model, data, clients.train[0], tcfg, 0.05, 1, gen)
    predict(model, data, clients.test[0], precision="bf16")
    assert seen and set(seen) == {"bf16"}
    seen.clear()
    train_epochs(model, data, clients.train[0], train_cfg()["train"], 0.05, 1, gen)
    predict(model, data, clients.test[0])
    assert seen and set(seen) == {"fp32"}  # the default is the papers' fp32


class BatchSizes(TinyNet):
    def __init__(self):
        super().__init__()
        self.sizes: list[int] = []

    def forward(self, x):
        self.sizes.append(len(x))
        return super().forward(x)


def test_evaluation_batch_comes_from_the_run(monkeypatch):
    from fedrepro.algorithms import make_algorithm

    data, clients = problem(num_clients=2, per_client=50)
    model = BatchSizes()
    algorithm = make_algorithm({"name": "fedavg"})
    algorithm.setup(model, 2)
    state = RunState(shared=take(model, algorithm.shared))
    evaluate(model, algorithm, state, data, clients, {}, 0, 1, {"eval_batch_size": 32})
    assert model.sizes == [32, 32, 32, 4]  # one pass over the 100 images, 32 at a time
    model.sizes.clear()
    evaluate(model, algorithm, state, data, clients, {}, 0, 1, {})
    assert model.sizes == [100]  # default 1,024


def test_a_shared_model_forwards_only_the_images_its_clients_test_on():
    """Clients covering part of the test split (a cohort, the smoke's first test images): one
    pass over the union of their test images, each once, and every client's numbers those of
    predicting it alone. The old pass forwarded the whole split (100 images here)."""
    from fedrepro.algorithms import make_algorithm
    from fedrepro.fl.engine import Clients

    data, full = problem(num_clients=2, per_client=50)
    tests = [full.test[0][:5], torch.cat([full.test[0][3:7], full.test[1][:2]])]  # overlap
    clients = Clients(full.train, tests, [None, None])
    model = BatchSizes()
    algorithm = make_algorithm({"name": "fedavg"})
    algorithm.setup(model, 2)
    state = RunState(shared=take(model, algorithm.shared))
    row = evaluate(model, algorithm, state, data, clients, {}, 0, 1, {})
    assert model.sizes == [9]  # images 0-6 and 50-51, once each
    alone = [predict(model, data, t)[0].float().mean().item() * 100 for t in tests]
    assert row["acc_per_client"] == pytest.approx(alone)


def test_fedins_batch_scope_row_evaluates_with_32():
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    plan = build_plan({**config, "papers": ["fedins"]}, REPO)
    rows = {}
    for entry in plan.items["fedins/table1"]["runs"]:
        train = plan.runs[entry["id"]]["train"]
        rows.setdefault(entry["labels"]["method"], set()).add(train.get("eval_batch_size"))
    assert rows["FedIns (w. SSF Pool)"] == {32}
    assert rows["FedIns (Ours)"] == {None}  # per-instance selection: the batch is irrelevant


def test_drop_last_skips_a_short_last_batch():
    data, clients = problem(num_clients=1, per_client=40)
    gen = torch.Generator().manual_seed(0)
    tcfg = {**train_cfg()["train"], "batch_size": 16}
    steps, _ = train_epochs(TinyNet(), data, clients.train[0], tcfg, 0.05, 1, gen)
    assert steps == 3  # 16 + 16 + 8
    dropped = {**tcfg, "drop_last": True}
    steps, _ = train_epochs(TinyNet(), data, clients.train[0], dropped, 0.05, 1, gen)
    assert steps == 2


def test_the_old_bf16_switch_is_refused():
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    run = next(iter(build_plan({**config, "papers": ["baselines"]}, REPO).runs.values()))
    validate(run, "run", "run")
    run["train"]["bf16"] = True
    with pytest.raises(ConfigError, match="bf16: unknown key"):
        validate(run, "run", "run")
