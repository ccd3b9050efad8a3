"""Defining invariants of each algorithm (FedAvg, FedProx, SCAFFOLD, FedNova, FedBN, FedPer,
Local; what each rests on: docs/methods/baselines.md)."""

from __future__ import annotations

import math

import pytest
import torch

from fedrepro.algorithms.fednova import nova_a
from fedrepro.fl.engine import Clients
from fedrepro.fl.tensors import nbytes
from tests.fl_helpers import problem, run, train_cfg


def same(a: dict, b: dict, exact=True):
    assert a.keys() == b.keys()
    for k in a:
        if exact:
            assert torch.equal(a[k], b[k]), k
        else:
            torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6, msg=k)


def test_fedavg_one_client_is_that_client():
    data, clients = problem(num_clients=1)
    state, alg, model = run({"name": "fedavg"}, train_cfg(rounds=1), data, clients)
    trained = {k: v for k, v in model.state_dict().items() if k in alg.shared}
    same(state.shared, trained)


def test_fedavg_weights_sum_to_one_and_follow_samples():
    data, clients = problem(sizes=[10, 30, 20, 40])
    _, alg, _ = run({"name": "fedavg"}, train_cfg(rounds=1), data, clients)
    from fedrepro.fl.algorithm import Payload

    pays = [Payload(i, n, 1, {}) for i, n in enumerate([10, 30, 20, 40])]
    w = alg.weights(pays)
    assert math.isclose(sum(w), 1.0)
    assert w == pytest.approx([0.1, 0.3, 0.2, 0.4])


def test_fedprox_mu_zero_is_bit_identical_to_fedavg():
    a, _, _ = run({"name": "fedavg"})
    b, _, _ = run({"name": "fedprox", "mu": 0.0})
    same(a.shared, b.shared)
    c, _, _ = run({"name": "fedprox", "mu": 1.0})
    assert not torch.equal(a.shared["conv.weight"], c.shared["conv.weight"])


def test_fedprox_pulls_towards_global():
    far = lambda s, ref: sum(float((s[k] - ref[k]).norm()) for k in ("conv.weight", "fc.weight"))  # noqa: E731
    init, _, _ = run({"name": "fedavg"}, train_cfg(rounds=1, lr=1e-9))
    free, _, _ = run({"name": "fedprox", "mu": 0.0}, train_cfg(rounds=1))
    prox, _, _ = run({"name": "fedprox", "mu": 5.0}, train_cfg(rounds=1))
    assert far(prox.shared, init.shared) < far(free.shared, init.shared)


def test_fednova_a_values():
    assert nova_a(1, 0.9) == pytest.approx(1.0)
    assert nova_a(7, 0.0) == 7.0
    assert nova_a(5, 0.5) == pytest.approx((5 - 0.5 * (1 - 0.5**5) / 0.5) / 0.5)


def test_fednova_equal_steps_equals_fedavg():
    a, _, _ = run({"name": "fedavg"})
    b, _, _ = run({"name": "fednova"})
    same(a.shared, b.shared, exact=False)


def test_fednova_unequal_steps_differs_from_fedavg():
    data, clients = problem(sizes=[8, 48, 16, 40])
    a, _, _ = run({"name": "fedavg"}, data=data, clients=clients)
    b, _, _ = run({"name": "fednova"}, data=data, clients=clients)
    assert not torch.allclose(a.shared["conv.weight"], b.shared["conv.weight"])


def _nova_aggregate(nova_on_buffers: bool) -> dict:
    """Two clients, 1 and 100 local steps at momentum 0.9, BN variances 0.1 and 2.0."""
    from fedrepro.algorithms import make_algorithm
    from fedrepro.fl.algorithm import ClientCtx
    from fedrepro.fl.tensors import put, take
    from tests.fl_helpers import TinyNet

    model = TinyNet()
    alg = make_algorithm({"name": "fednova", "nova_on_buffers": nova_on_buffers})
    alg.setup(model, 2)
    current = take(model, alg.shared)
    payloads = []
    for client, (steps, var) in enumerate([(1, 0.1), (100, 2.0)]):
        put(model, {**current, "bn.running_var": torch.full((4,), var)})
        ctx = ClientCtx(client, model, current, 0.1, 0.9, num_samples=10, steps=steps)
        payloads.append(alg.client_end(ctx))
    return alg.aggregate(current, payloads)


def test_fednova_normalised_buffers_can_turn_running_variance_negative():
    """x − τ_eff·Σ p_i (x − y_i)/a_i with a = (1, 910): 1 − 455.5·0.4495 < 0, the NaN source
    the adapters paper reports (§IV-A3); plain averaging keeps the mean 1.05."""
    tau_eff = 0.5 * nova_a(1, 0.9) + 0.5 * nova_a(100, 0.9)
    d = 0.5 * (1 - 0.1) / nova_a(1, 0.9) + 0.5 * (1 - 2.0) / nova_a(100, 0.9)
    normalised = _nova_aggregate(True)["bn.running_var"]
    torch.testing.assert_close(normalised, torch.full((4,), 1 - tau_eff * d))
    assert (normalised < 0).all()
    averaged = _nova_aggregate(False)["bn.running_var"]
    torch.testing.assert_close(averaged, torch.full((4,), 1.05))


def test_scaffold_first_round_equals_fedavg():
    a, _, _ = run({"name": "fedavg"}, train_cfg(rounds=1))
    b, _, _ = run({"name": "scaffold"}, train_cfg(rounds=1))
    same(a.shared, b.shared)


def test_scaffold_server_control_is_mean_of_client_controls():
    data, clients = problem(num_clients=6)
    _, alg, _ = run({"name": "scaffold"}, train_cfg(rounds=4, fraction=0.5), data, clients)
    for k, c in alg.c.items():
        total = sum(ci[k] for ci in alg.ci.values())
        torch.testing.assert_close(c, total / 6, rtol=1e-5, atol=1e-7)


def test_scaffold_single_step_control_is_the_gradient():
    data, clients = problem(num_clients=2, per_client=8)
    cfg = train_cfg(rounds=1, batch_size=8, momentum=0.0, weight_decay=0.0)
    state, alg, model = run({"name": "scaffold"}, cfg, data, clients)
    # recompute client 0's minibatch gradient at the initial point
    torch.manual_seed(0)
    from tests.fl_helpers import TinyNet

    net = TinyNet()
    x, y = data.batch(clients.train[0])
    torch.nn.functional.cross_entropy(net(x), y).backward()
    grad = dict(net.named_parameters())["conv.weight"].grad
    torch.testing.assert_close(alg.ci[0]["conv.weight"], grad, rtol=1e-4, atol=1e-6)


def test_scaffold_sends_twice_fedavg():
    a, _, _ = run({"name": "fedavg"}, train_cfg(rounds=1))
    b, alg, _ = run({"name": "scaffold"}, train_cfg(rounds=1))
    params_only = sum(v.numel() * 4 for k, v in b.shared.items() if k in alg.keys)
    assert b.history[0]["up_bytes"] == a.history[0]["up_bytes"] + 4 * params_only


def test_fedbn_keeps_norm_layers_local():
    state, alg, _ = run({"name": "fedbn"})
    assert not any(k.startswith("bn.") for k in state.shared)
    assert {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"} <= set(alg.local)
    assert not torch.equal(state.local[0]["bn.running_mean"], state.local[1]["bn.running_mean"])


def test_fedper_keeps_head_local_and_shares_base():
    state, alg, _ = run({"name": "fedper"})
    assert set(alg.local) >= {"fc.weight", "fc.bias"}
    assert "conv.weight" in state.shared and "fc.weight" not in state.shared
    assert not torch.equal(state.local[0]["fc.weight"], state.local[1]["fc.weight"])


def test_local_sends_nothing_and_ignores_other_clients():
    state, alg, _ = run({"name": "local"})
    assert alg.shared == [] and all(r["up_bytes"] == r["down_bytes"] == 0 for r in state.history)
    data, clients = problem()
    other, _ = problem(seed=7)
    mixed = Clients([clients.train[0], *clients.train[1:]], clients.test, clients.transforms)
    images = data.images.clone()
    images[24:] = other.images[24:]  # change every client's data except client 0's
    data2 = type(data)(images, data.labels)
    a, _, _ = run({"name": "local"}, data=data, clients=clients)
    b, _, _ = run({"name": "local"}, data=data2, clients=mixed)
    same(a.local[0], b.local[0])
    assert not torch.equal(a.local[1]["conv.weight"], b.local[1]["conv.weight"])


def test_communication_counted_from_tensors():
    state, alg, model = run({"name": "fedavg"}, train_cfg(rounds=1))
    per_client = nbytes(state.shared)
    assert state.history[0]["up_bytes"] == 4 * per_client
    assert state.history[0]["down_bytes"] == 4 * per_client
    assert per_client == sum(v.numel() * 4 for v in state.shared.values())


def test_partial_participation_samples_fraction():
    data, clients = problem(num_clients=10, per_client=8)
    state, _, _ = run({"name": "fedavg"}, train_cfg(rounds=3, fraction=0.2), data, clients)
    assert [r["clients"] for r in state.history] == [2, 2, 2]


def test_unknown_algorithm_names_the_key():
    from fedrepro.algorithms import make_algorithm

    with pytest.raises(ValueError, match="algorithm.name"):
        make_algorithm({"name": "fedfoo"})
    with pytest.raises(ValueError, match="unknown parameter"):
        make_algorithm({"name": "fedavg", "mu": 1})
