"""FedDC invariants (Gao et al. CVPR 2022; docs/methods/baselines.md)."""

from __future__ import annotations

import math

import torch

from fedrepro.algorithms import make_algorithm
from fedrepro.fl.engine import run_rounds
from fedrepro.fl.tensors import take
from tests.fl_helpers import TinyNet, problem, train_cfg


def _run(algorithm: dict, rounds: int = 1):
    data, clients = problem(num_clients=3, per_client=16)
    torch.manual_seed(0)
    model = TinyNet()
    w0 = take(model, [n for n, _ in model.named_parameters()])
    alg = make_algorithm(algorithm)
    cfg = train_cfg(rounds=rounds, momentum=0.0)
    state = run_rounds(cfg, model, alg, data, data, clients, log=lambda _: None)
    return state, alg, w0, cfg


def test_round_one_server_model_is_mean_plus_mean_drift():
    """α = 0, g = g_i = 0: local steps are FedAvg's; w_1 = 2·mean θ_i − w_0 (h_i = θ_i − w_0)."""
    fedavg, _, w0, _ = _run({"name": "fedavg", "weighting": "uniform"})
    feddc, alg, _, cfg = _run({"name": "feddc", "alpha": 0.0, "max_grad_norm": 1e9})
    for k in alg.keys:
        torch.testing.assert_close(feddc.shared[k], 2 * fedavg.shared[k] - w0[k])
    for k in set(alg.shared) - set(alg.keys):  # BN running statistics: plain average
        torch.testing.assert_close(feddc.shared[k], fedavg.shared[k])
    # g = Σ_i (g_i⁺ − g_i)·w_i / N = −mean_i Δθ_i / (K·η) with equal client sizes (w_i = 1)
    k_eta = cfg["train"]["local_epochs"] * math.ceil(16 / cfg["train"]["batch_size"]) * 0.05
    assert alg.k_eta == k_eta
    for k in alg.keys:
        torch.testing.assert_close(alg.g[k], -(fedavg.shared[k] - w0[k]) / k_eta)


def test_drift_accumulates_and_state_survives_a_checkpoint():
    state, alg, w0, _ = _run({"name": "feddc"}, rounds=2)
    assert sorted(alg.h) == [0, 1, 2]
    restored = make_algorithm({"name": "feddc"})
    restored.configure([16] * 3, train_cfg()["train"])
    restored.setup(TinyNet(), 3)
    restored.load_state_dict(alg.state_dict())
    for k in alg.keys:
        assert torch.equal(restored.h[2][k], alg.h[2][k])
        assert torch.equal(restored.g[k], alg.g[k])
    assert state.history[0]["up_bytes"] > 0 and not state.history[-1]["diverged"]


def test_alpha_pulls_towards_the_drift_corrected_global_model():
    free, _, _, _ = _run({"name": "feddc", "alpha": 0.0, "max_grad_norm": 1e9})
    pulled, _, _, _ = _run({"name": "feddc", "alpha": 50.0, "max_grad_norm": 1e9})
    assert not torch.allclose(free.shared["fc.weight"], pulled.shared["fc.weight"])
