"""MOON invariants (Li et al. CVPR 2021; docs/methods/baselines.md): μ = 0 is FedAvg;
ℓ_con = log 2 for equal views."""

from __future__ import annotations

import math

import pytest
import torch

from fedrepro.algorithms import make_algorithm
from fedrepro.algorithms.moon import contrastive_loss
from fedrepro.fl.engine import run_rounds
from fedrepro.models.registry import create_backbone
from tests.fl_helpers import problem, train_cfg


def test_contrastive_loss_is_log2_when_all_views_agree_and_falls_towards_the_global():
    z = torch.randn(5, 8)
    assert float(contrastive_loss(z, z, z, 0.5)) == pytest.approx(math.log(2), abs=1e-6)
    closer = contrastive_loss(z, z, -z, 0.5)
    assert float(closer) < math.log(2)


def _run(algorithm: dict, rounds: int = 2):
    data, clients = problem(num_clients=3, per_client=12)
    torch.manual_seed(0)
    model = create_backbone("resnet26_mini", 3)
    alg = make_algorithm(algorithm)
    state = run_rounds(
        train_cfg(rounds=rounds), model, alg, data, data, clients, log=lambda _: None
    )
    return state, alg


def test_mu_zero_is_fedavg_on_the_common_tensors():
    fedavg, _ = _run({"name": "fedavg"})
    moon, alg = _run({"name": "moon", "mu": 0.0})
    assert any(k.startswith("moon_projection.") for k in alg.shared)
    for key, value in fedavg.shared.items():
        assert torch.equal(moon.shared[key], value), key


def test_contrastive_term_changes_training_and_remembers_previous_models():
    fedavg, _ = _run({"name": "fedavg"})
    moon, alg = _run({"name": "moon", "mu": 1.0})
    assert sorted(alg.previous) == [0, 1, 2]
    key = "layer1.0.conv1.conv.weight"
    assert not torch.equal(moon.shared[key], fedavg.shared[key])
    restored = make_algorithm({"name": "moon", "mu": 1.0})
    torch.manual_seed(0)
    restored.setup(create_backbone("resnet26_mini", 3), 3)
    restored.load_state_dict(alg.state_dict())
    assert torch.equal(restored.previous[1][key], alg.previous[1][key])


def test_projection_none_sends_the_plain_model_and_still_contrasts():
    fedavg, _ = _run({"name": "fedavg"})
    moon, alg = _run({"name": "moon", "mu": 1.0, "projection": "none"})
    assert sorted(moon.shared) == sorted(fedavg.shared)  # nothing beyond the model is sent
    key = "layer1.0.conv1.conv.weight"
    assert not torch.equal(moon.shared[key], fedavg.shared[key])
    with pytest.raises(ValueError, match="projection"):
        make_algorithm({"name": "moon", "projection": "linear"})
