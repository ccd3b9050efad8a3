"""FedIns local objective and round (docs/methods/fedins.md: key matching, local training)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from fedrepro.algorithms import make_algorithm
from fedrepro.fl.algorithm import ClientCtx
from fedrepro.fl.data import DeviceData
from fedrepro.fl.engine import run_rounds
from fedrepro.models.registry import create_backbone
from fedrepro.models.tuning import apply_tuning
from tests.fl_helpers import problem, train_cfg


def _pool_model(pool_size=6, top_c=2):
    torch.manual_seed(0)
    vit = create_backbone("vit_tiny_mini", 3)
    return apply_tuning(vit, "ssf_pool", pool_size=pool_size, top_c=top_c)


def test_objective_mixes_cross_entropy_and_key_pull():
    model = _pool_model()
    alg = make_algorithm({"name": "fedins", "key_weight": 0.1})
    x, y = torch.randn(4, 3, 16, 16), torch.tensor([0, 1, 2, 0])
    ctx = ClientCtx(0, model, {}, 0.01, 0.0, 4)
    loss = alg.objective(ctx, x, y)
    expected = 0.9 * F.cross_entropy(model(x), y) + 0.1 * (1 - model.reduce_sim)
    torch.testing.assert_close(loss, expected)
    with pytest.raises(ValueError, match="SSF-pool model"):
        alg.objective(ClientCtx(0, create_backbone("vit_tiny_mini", 3), {}, 0.01, 0.0, 4), x, y)


def test_a_round_sends_the_pool_and_leaves_unselected_entries_untouched():
    images, clients = problem(num_clients=2, per_client=8)
    data = DeviceData(images.images, images.labels, img_size=16)
    model = _pool_model(pool_size=6, top_c=1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    alg = make_algorithm({"name": "fedins"})
    cfg = train_cfg(rounds=1, momentum=0.0, weight_decay=0.0, batch_size=4)
    used = set()
    with torch.no_grad():
        x, _ = data.batch(torch.arange(16), None, None)
        used = set(model.select(x)[:, 0].tolist())
    state = run_rounds(cfg, model, alg, data, data, clients, log=lambda _: None)
    assert {"keys", "head_weight", "head_bias"} <= set(alg.shared)
    assert not any(k.startswith("query.") for k in alg.shared)
    gamma = "vit.blocks.0.attn.qkv.ssf.gamma"
    for m in range(6):
        moved = not torch.equal(state.shared[gamma][m], before[gamma][m])
        if m not in used:
            assert not moved, m  # plain SGD: an entry no instance selected gets no update
    assert any(not torch.equal(state.shared[gamma][m], before[gamma][m]) for m in used)
