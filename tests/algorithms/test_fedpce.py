"""FedPCE in the engine (FedPCE §3.4; docs/methods/fedpce.md): v_n never leaves a client and
is untouched by aggregation, every other tensor is global; embeddings start one-hot."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedrepro.algorithms import make_algorithm
from fedrepro.fl.engine import run_rounds
from fedrepro.models.pce import PCENet
from tests.fl_helpers import problem, train_cfg


class TinyIN(nn.Module):
    """Conv + instance norm + feature norm + head: FedPCE's norm kinds in miniature."""

    def __init__(self, num_classes: int = 3):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.norm = nn.InstanceNorm2d(4, affine=True)
        self.head_norm = nn.LayerNorm(4)
        self.fc = nn.Linear(4, num_classes)
        self.num_classes = num_classes

    def forward(self, x):
        return self.fc(self.head_norm(torch.relu(self.norm(self.conv(x))).mean((2, 3))))

    def get_classifier(self):
        return self.fc


def pce_model(seed=0, embed_dim=3) -> PCENet:
    torch.manual_seed(seed)
    return PCENet(TinyIN(), embed_dim=embed_dim, hidden=5)


def adam_cfg(**over):
    cfg = train_cfg(optimizer="adam", lr=0.01, betas=[0.5, 0.9], momentum=0.0, **over)
    cfg["train"]["param_groups"] = [{"match": "embedding", "lr": 0.1}]
    return cfg


class Spy:
    """Wraps an algorithm's aggregate to record the names of every tensor sent up."""

    def __init__(self, alg):
        self.payload_keys: set[str] = set()
        inner = alg.aggregate

        def aggregate(current, payloads):
            self.payload_keys |= {k for p in payloads for k in p.all_tensors()}
            return inner(current, payloads)

        alg.aggregate = aggregate


def test_only_the_embedding_stays_local_and_aggregation_never_touches_it():
    data, clients = problem(num_clients=4)
    model = pce_model()
    alg = make_algorithm({"name": "fedpce"})
    spy = Spy(alg)
    state = run_rounds(adam_cfg(rounds=2), model, alg, data, data, clients, log=lambda _: None)
    assert alg.local == ["embedding"]
    assert "embedding" not in spy.payload_keys and "embedding" not in state.shared
    named = dict(model.named_parameters())
    assert set(state.shared) == set(named) - {"embedding"}  # generators and backbone: global
    embs = [state.local[k]["embedding"] for k in range(4)]
    assert all(not torch.equal(embs[i], embs[j]) for i in range(4) for j in range(i + 1, 4))


def test_embeddings_start_one_hot_then_zero():
    alg = make_algorithm({"name": "fedpce"})
    model = pce_model(embed_dim=3)
    alg.setup(model, 5)
    init = {"embedding": torch.zeros(3)}
    firsts = [alg.initial_local(k, init)["embedding"] for k in range(5)]
    assert [v.tolist() for v in firsts] == [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]]


def test_a_client_keeps_its_trained_embedding_across_rounds():
    """Round 2 starts from each client's round-1 embedding, not from its one-hot again."""
    data, clients = problem(num_clients=3)
    one, _ = _run(data, clients, rounds=1)
    two, _ = _run(data, clients, rounds=2)
    for k in range(3):
        assert not torch.equal(one.local[k]["embedding"], two.local[k]["embedding"])
    # a client that never trained still evaluates with its one-hot start
    assert one.local[0]["embedding"][0] != 1.0


def _run(data, clients, rounds):
    alg = make_algorithm({"name": "fedpce"})
    state = run_rounds(
        adam_cfg(rounds=rounds), pce_model(), alg, data, data, clients, log=lambda _: None
    )
    return state, alg


def test_fedpce_needs_the_pce_model():
    data, clients = problem(num_clients=2)
    torch.manual_seed(0)
    with pytest.raises(ValueError, match="tuning: pce"):
        run_rounds(adam_cfg(), TinyIN(), make_algorithm({"name": "fedpce"}), data, data, clients)
