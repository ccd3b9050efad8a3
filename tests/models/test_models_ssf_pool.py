"""FedIns's SSF pool (FedIns §3.3–3.4, Eq. 9; docs/methods/fedins.md)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from fedrepro.models.registry import create_backbone
from fedrepro.models.ssf import SSF, merge_ssf, ssf_modules
from fedrepro.models.ssf_pool import SSFPoolViT, select_top


def _pool(pool_size=5, top_c=2, scope="instance", seed=0):
    torch.manual_seed(seed)
    vit = create_backbone("vit_tiny_mini", 10)
    query = copy.deepcopy(vit)
    model = SSFPoolViT(vit, query, 10, pool_size, top_c, scope).double().eval()
    for m in ssf_modules(model):
        nn.init.normal_(m.gamma, 1.0, 0.3)
        nn.init.normal_(m.beta, 0.0, 0.3)
    return model


def test_paper_scale_pool_sizes():
    """M = 25: SSF + key = 5,164,800 ("5.16 M"); + 10-class heads = 5,357,050 ("5.35 M")."""
    with torch.device("meta"):
        vit = create_backbone("vit_base_patch16_224.augreg_in21k", 10)
        query = create_backbone("vit_base_patch16_224.augreg_in21k", 0)
        model = SSFPoolViT(vit, query, 10, pool_size=25, top_c=3)
    ssf = sum(m.gamma.numel() + m.beta.numel() for m in ssf_modules(model))
    assert ssf + model.keys.numel() == 25 * (205_824 + 768) == 5_164_800
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert trainable == 25 * (205_824 + 768 + 768 * 10 + 10) == 5_357_050


def test_selection_picks_the_c_most_cosine_similar_keys_scale_invariantly():
    torch.manual_seed(0)
    q, keys = torch.randn(7, 16), torch.randn(9, 16)
    idx, cos = select_top(q, keys, 3)
    for b in range(7):
        sims = [float(torch.cosine_similarity(q[b], k, dim=0)) for k in keys]
        assert set(idx[b].tolist()) == set(sorted(range(9), key=lambda m: -sims[m])[:3])
    scaled, _ = select_top(q * 5.0, keys * (torch.rand(9, 1) * 3 + 0.1), 3)
    assert torch.equal(idx, scaled)


def test_reduce_sim_is_c_when_selected_keys_are_parallel_to_the_query():
    model = _pool(pool_size=4, top_c=2)
    x = torch.randn(1, 3, 16, 16, dtype=torch.float64)
    with torch.no_grad():
        q = model.query.forward_features(x)[:, 0]
        model.keys[:2] = q * torch.tensor([[2.0], [0.5]], dtype=torch.float64)
        model.keys[2:] = -q
        idx = model.select(x)
    assert sorted(idx[0].tolist()) == [0, 1]
    assert float(model.reduce_sim) == pytest.approx(2.0)


def test_batched_instance_outputs_equal_per_instance_outputs_and_the_merged_model():
    model = _pool()
    x = torch.randn(4, 3, 16, 16, dtype=torch.float64)
    with torch.no_grad():
        batched = model(x)
        idx = model.select(x)
        for b in range(4):
            alone = model(x[b : b + 1])
            assert (alone - batched[b : b + 1]).abs().max() < 1e-10
            # the merged plain ViT for this instance, with the mean of its c heads
            model.select(x[b : b + 1])
            plain = merge_ssf(copy.deepcopy(model.vit))
            assert not any(isinstance(m, SSF) for m in plain.modules())
            feats = plain.forward_head(plain.forward_features(x[b : b + 1]), pre_logits=True)
            w = model.head_weight[idx[b]].mean(0)
            bias = model.head_bias[idx[b]].mean(0)
            assert (feats @ w.T + bias - batched[b]).abs().max() < 1e-10


def test_batch_scope_uses_one_ssf_and_equals_instance_scope_for_one_instance():
    inst, batch = _pool(scope="instance"), _pool(scope="batch")
    x = torch.randn(3, 3, 16, 16, dtype=torch.float64)
    with torch.no_grad():
        assert (inst(x[:1]) - batch(x[:1])).abs().max() < 1e-10
        assert (inst(x) - batch(x)).abs().max() > 1e-6


def test_only_selected_entries_get_gradients_and_keys_only_through_reduce_sim():
    model = _pool(pool_size=6, top_c=2)
    model.train()
    x = torch.randn(1, 3, 16, 16, dtype=torch.float64)
    logits = model(x)
    chosen = set(model.select(x)[0].tolist())
    logits = model(x)
    logits.sum().backward()
    gamma = ssf_modules(model)[3].gamma.grad
    for m in range(6):
        assert (gamma[m].abs().sum() > 0) == (m in chosen)
    assert model.keys.grad is None or not model.keys.grad.any()
    model.zero_grad()
    model(x)
    (1 - model.reduce_sim).backward()
    assert model.keys.grad.abs().sum() > 0
    assert all(p.grad is None for p in model.query.parameters())
