"""FedICON's federated training (FedICON §4.1; docs/methods/fedicon.md): contrastive rounds
train the encoder on two views and leave the classifier alone, classifier rounds train only
the classifier on a frozen encoder, the server averages by training-set size."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedrepro.algorithms import make_algorithm
from fedrepro.fl.algorithm import ClientCtx, Payload
from fedrepro.fl.contrastive import contrastive_loss, normalized, representation
from fedrepro.fl.data import DeviceData
from fedrepro.fl.engine import run_rounds
from tests.fl_helpers import problem, spy_client_end, train_cfg


class TinyEncoder(nn.Module):
    """Conv + BN → 5-d representation → linear classifier (the simple CNN in miniature)."""

    def __init__(self, num_classes: int = 3):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc1 = nn.Linear(4, 5)
        self.classifier = nn.Linear(5, num_classes, bias=False)

    def forward_features(self, x):
        return torch.relu(self.bn(self.conv(x))).mean((2, 3))

    def forward_head(self, x, pre_logits=False):
        x = torch.relu(self.fc1(x))
        return x if pre_logits else self.classifier(x)

    def forward(self, x):
        return self.forward_head(self.forward_features(x))

    def get_classifier(self):
        return self.classifier


def _run(algorithm: dict, rounds: int, data=None, clients=None, **train):
    if data is None:
        data, clients = problem(num_clients=4)
    torch.manual_seed(0)
    model = TinyEncoder()
    start = {k: v.clone() for k, v in model.state_dict().items()}
    alg = make_algorithm({"name": "fedicon", **algorithm})
    cfg = train_cfg(rounds=rounds, **train)
    seen: list[tuple[int, int, int]] = []
    inner = alg.objective

    def objective(ctx, x, y):
        seen.append((ctx.round, x.shape[0], y.shape[0]))
        return inner(ctx, x, y)

    alg.objective = objective
    state = run_rounds(cfg, model, alg, data, data, clients, log=lambda _: None)
    return state, alg, model, start, seen


def _classifier(name: str) -> bool:
    return name.startswith("classifier.")


def test_contrastive_rounds_train_the_encoder_on_two_views_and_not_the_classifier():
    state, _, _, start, seen = _run({"classifier_rounds": 0}, rounds=2)
    assert all(n == 2 * b for _, n, b in seen)
    for name, value in state.shared.items():
        if _classifier(name):
            assert torch.equal(value, start[name]), name
        elif name.endswith("weight"):
            assert not torch.equal(value, start[name]), name


def test_classifier_rounds_train_only_the_classifier_on_a_frozen_encoder():
    state, _, _, start, seen = _run({"classifier_rounds": 2}, rounds=2)
    assert all(n == b for _, n, b in seen)  # one view
    changed = {k for k, v in state.shared.items() if not torch.equal(v, start[k])}
    assert changed == {"classifier.weight"}  # BN statistics frozen too (frozen_bn: eval)


def test_the_last_rounds_switch_from_contrastive_to_classifier():
    _, _, _, _, seen = _run({"classifier_rounds": 1}, rounds=3)
    views = {r: n // b for r, n, b in seen}
    assert views == {1: 2, 2: 2, 3: 1}


def test_unsupervised_loss_ignores_labels_and_equals_ntxent():
    torch.manual_seed(0)
    model = TinyEncoder()
    alg = make_algorithm({"name": "fedicon", "supervised": False, "classifier_rounds": 0})
    alg.configure([8], train_cfg()["train"])
    alg.setup(model, 1)
    ctx = ClientCtx(0, model, {}, 0.1, 0.0, 8, round=1)
    x = torch.randn(8, 3, 6, 6)
    y1, y2 = torch.tensor([0, 1, 2, 0]), torch.tensor([2, 2, 2, 2])
    loss = alg.objective(ctx, x, y1)
    assert torch.equal(loss, alg.objective(ctx, x, y2))
    assert torch.equal(loss, contrastive_loss(normalized(representation(model, x)), None, 0.1))


def test_server_weights_by_training_set_size_and_they_sum_to_one():
    alg = make_algorithm({"name": "fedicon"})
    sizes = [5, 17, 30]
    payloads = [Payload(k, n, 1, {"w": torch.full((2,), float(k))}) for k, n in enumerate(sizes)]
    w = alg.weights(payloads)
    assert sum(w) == pytest.approx(1.0, abs=1e-15)
    assert w == pytest.approx([n / sum(sizes) for n in sizes])
    mean = alg.aggregate({}, payloads)["w"]
    assert torch.allclose(mean, torch.full((2,), (17 + 60) / 52))


def test_without_sharing_nothing_is_sent():
    state, alg, _, _, _ = _run({"sharing": False, "classifier_rounds": 0}, rounds=1)
    assert alg.shared == [] and state.shared == {}
    assert set(state.local) == {0, 1, 2, 3}


def _first_batch(data: DeviceData, clients) -> torch.Tensor:
    batches = []

    def capture(ctx, x, y):
        batches.append(x)
        return contrastive_loss(normalized(representation(ctx.model, x)), torch.cat([y, y]))

    torch.manual_seed(0)
    alg = make_algorithm({"name": "fedicon", "classifier_rounds": 0})
    alg.objective = capture
    run_rounds(train_cfg(rounds=1), TinyEncoder(), alg, data, data, clients, log=lambda _: None)
    return batches[0]


def test_views_are_independent_augmentations_of_the_same_images():
    data, clients = problem(num_clients=2)
    plain = _first_batch(data, clients)
    b = len(plain) // 2
    assert torch.equal(plain[:b], plain[b:])  # no augmentation: the two views coincide
    x = _first_batch(DeviceData(data.images, data.labels, crop_pad=1, flip=True), clients)
    assert not torch.equal(x[:b], x[b:])  # two draws of the augmentation


def _sent(algorithm: dict, rounds: int) -> list[tuple[int, set[str]]]:
    data, clients = problem(num_clients=2)
    torch.manual_seed(0)
    alg = make_algorithm({"name": "fedicon", **algorithm})
    seen = []
    spy_client_end(alg, seen)
    cfg = train_cfg(rounds=rounds)
    state = run_rounds(cfg, TinyEncoder(), alg, data, data, clients, log=lambda _: None)
    return [(r, set(p.tensors)) for r, _, _, p in seen], state


def test_clients_send_the_encoder_in_contrastive_rounds_and_the_classifier_after():
    """§4.1.2: θ_i of the feature encoder is sent and averaged (Eq. 6); the classifier is
    trained "in a federated learning manner" in the last rounds, on the frozen encoder."""
    sent, state = _sent({"classifier_rounds": 1}, rounds=3)
    encoder = {"conv.weight", "conv.bias", "bn.weight", "bn.bias", "bn.running_mean",
               "bn.running_var", "fc1.weight", "fc1.bias"}  # fmt: skip
    assert {r: keys for r, keys in sent} == {1: encoder, 2: encoder, 3: {"classifier.weight"}}
    per_client = {1: 108 + 4 + 4 * 4 + 20 + 5, 2: 108 + 4 + 4 * 4 + 20 + 5, 3: 5 * 3}
    assert [row["up_scalars"] for row in state.history] == [2 * n for n in per_client.values()]
    train_bn, _ = _sent({"classifier_rounds": 1, "frozen_bn": "train"}, rounds=2)
    assert train_bn[-1][1] == {"classifier.weight", "bn.running_mean", "bn.running_var"}


def test_sending_only_what_a_round_changes_gives_the_same_model():
    """The tensors no longer sent are the same on every client in their rounds (the
    classifier in contrastive rounds, the frozen encoder in classifier rounds): averaging
    them changed nothing, so the trained model is the one sending everything gives."""
    data, clients = problem(num_clients=3, sizes=[10, 17, 24])
    states = []
    for everything in (False, True):
        torch.manual_seed(0)
        alg = make_algorithm({"name": "fedicon", "classifier_rounds": 1})
        if everything:
            alg.sent = lambda r, alg=alg: alg.shared
        cfg = train_cfg(rounds=3)
        states.append(run_rounds(cfg, TinyEncoder(), alg, data, data, clients, log=print))
    sent, everything = states
    assert sent.shared.keys() == everything.shared.keys()
    for name, value in sent.shared.items():
        assert torch.allclose(value, everything.shared[name], rtol=0, atol=1e-6), name
    assert [r["acc"] for r in sent.history] == [r["acc"] for r in everything.history]


def test_the_server_sends_what_its_last_aggregate_changed():
    """The downlink is trimmed as the upload: round 1 everything, then what the previous
    round averaged (the encoder after contrastive rounds, the classifier after classifier
    rounds). A client keeping what it received holds the server's state every round, and
    the trained model is the one a full downlink gives."""
    data, clients = problem(num_clients=2)
    encoder = {"conv.weight", "conv.bias", "bn.weight", "bn.bias", "bn.running_mean",
               "bn.running_var", "fc1.weight", "fc1.bias"}  # fmt: skip
    states = []
    for everything in (False, True):
        torch.manual_seed(0)
        alg = make_algorithm({"name": "fedicon", "classifier_rounds": 2})
        if everything:
            alg.downlink = lambda current, r: current
        seen, begin = [], alg.client_begin

        def spy(ctx, begin=begin, seen=seen):
            seen.append((ctx.round, ctx.client, dict(ctx.downloaded), dict(ctx.received)))
            return begin(ctx)

        alg.client_begin = spy
        cfg = train_cfg(rounds=4)
        states.append(run_rounds(cfg, TinyEncoder(), alg, data, data, clients, log=lambda _: None))
        if everything:
            break
        keys = {r: set(down) for r, _, down, _ in seen}
        assert keys == {1: encoder | {"classifier.weight"}, 2: encoder, 3: encoder,
                        4: {"classifier.weight"}}  # fmt: skip
        held = {0: {}, 1: {}}
        for _, k, down, server in seen:
            held[k].update({n: t.clone() for n, t in down.items()})
            assert held[k].keys() == server.keys()
            assert all(torch.equal(held[k][n], server[n]) for n in server)
    trimmed, full = states
    (first, *later), (full_first, *full_later) = ([r["down_bytes"] for r in s.history]
                                                   for s in states)  # fmt: skip
    assert first == full_first and all(t < f for t, f in zip(later, full_later, strict=True))
    assert all(torch.equal(trimmed.shared[n], full.shared[n]) for n in full.shared)
    assert [r["acc"] for r in trimmed.history] == [r["acc"] for r in full.history]
