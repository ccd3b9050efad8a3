"""FedRep (Collins et al. 2021; docs/methods/baselines.md): the head never leaves its client,
each round trains the head with the body frozen and then the body with the head frozen, and
the bodies are averaged."""

from __future__ import annotations

import torch

from fedrepro.algorithms import make_algorithm
from fedrepro.fl.engine import run_rounds
from tests.fl_helpers import TinyNet, problem, train_cfg


def _fedrep(head_epochs: int, local_epochs: int):
    data, clients = problem()
    torch.manual_seed(0)
    model = TinyNet()
    start = {k: v.clone() for k, v in model.state_dict().items()}
    alg = make_algorithm({"name": "fedrep", "head_epochs": head_epochs})
    seen = {"keys": set(), "steps": []}
    aggregate, client_end = alg.aggregate, alg.client_end

    def spy_aggregate(current, payloads):
        seen["keys"] |= {k for p in payloads for k in p.all_tensors()}
        return aggregate(current, payloads)

    def spy_end(ctx):
        seen["steps"].append(ctx.steps)
        return client_end(ctx)

    alg.aggregate, alg.client_end = spy_aggregate, spy_end
    cfg = train_cfg(rounds=2, local_epochs=local_epochs)
    state = run_rounds(cfg, model, alg, data, data, clients, log=lambda _: None)
    return state, alg, seen, start


def test_the_head_stays_local_and_the_body_is_averaged():
    state, alg, seen, _ = _fedrep(head_epochs=2, local_epochs=1)
    assert seen["keys"] and not any(k.startswith("fc.") for k in seen["keys"])
    assert set(alg.local) == {"fc.weight", "fc.bias"}
    heads = [state.local[k]["fc.weight"] for k in range(4)]
    assert all(not torch.equal(heads[0], h) for h in heads[1:])
    assert all(n == 3 * (2 + 1) for n in seen["steps"])  # 24 images, batch 8: head 2 + body 1


def test_head_phase_leaves_the_body_and_body_phase_leaves_the_head():
    state, _, _, start = _fedrep(head_epochs=1, local_epochs=0)
    for name in ("conv.weight", "conv.bias", "bn.weight", "bn.bias"):
        assert torch.equal(state.shared[name], start[name]), name
    assert not torch.equal(state.local[0]["fc.weight"], start["fc.weight"])
    state, _, _, start = _fedrep(head_epochs=0, local_epochs=1)
    for k in range(4):
        assert torch.equal(state.local[k]["fc.weight"], start["fc.weight"])
    assert not torch.equal(state.shared["conv.weight"], start["conv.weight"])


def test_fedbabu_never_trains_or_sends_the_head_and_averages_the_body():
    """FedBABU (FedHPL's baseline; Oh et al. 2022): the head stays bit-identical to its
    initialisation through federated training and is not in the payload (P(body) sent)."""
    data, clients = problem()
    torch.manual_seed(0)
    model = TinyNet()
    head0 = {k: v.clone() for k, v in model.fc.state_dict().items()}
    alg = make_algorithm({"name": "fedbabu"})
    state = run_rounds(train_cfg(rounds=2), model, alg, data, data, clients, log=lambda _: None)
    assert not any(k.startswith("fc.") for k in state.shared) and state.local == {}
    assert all(torch.equal(model.fc.state_dict()[k], v) for k, v in head0.items())
    assert {"conv.weight", "conv.bias"} <= set(state.shared)
    up = state.history[0]["up_bytes"]
    assert up == 4 * sum(v.numel() * v.element_size() for v in state.shared.values())
