"""Clients of different models in one run (issue 34, fedrepro.fl.groups): FedHPL across two
ViT widths trains in the one round loop, each client keeps its own model's shapes, one module
per architecture, nothing but the declared payload crosses between clients (bytes counted),
each model's averaged tensors average its own clients only, and a killed run resumes to the
same numbers."""

from __future__ import annotations

import pytest
import torch

from fedrepro.algorithms import make_algorithm
from fedrepro.fl.algorithm import Algorithm
from fedrepro.fl.build import build_models, input_stats
from fedrepro.fl.data import DeviceData
from fedrepro.fl.engine import Clients, run_rounds
from fedrepro.fl.groups import architectures, join_shared, split_shared
from fedrepro.fl.local import predict
from fedrepro.fl.tensors import nbytes, put
from tests.fl_helpers import Killed, dies_at, spy_client_end, train_cfg, untimed

C = 4
WIDE, NARROW = "vit_tiny_mini", "vit_pfedpt_mini"  # 64-d and 32-d tiny ViTs, 16 px
BACKBONES = [WIDE, NARROW, WIDE, NARROW]
MODEL = {"backbone": WIDE, "client_backbones": BACKBONES, "img_size": 16,
         "tuning": "vpt_deep", "tuning_options": {"num_prompts": 2}}  # fmt: skip


def _problem(num_clients: int = 4, per_client: int = 16):
    gen = torch.Generator().manual_seed(0)
    n = num_clients * per_client
    labels = torch.arange(n) % C
    images = torch.rand(n, 12, 12, 3, generator=gen) * 100 + labels[:, None, None, None] * 40
    data = DeviceData(images.to(torch.uint8), labels, img_size=16)
    idx = list(torch.arange(n).split(per_client))
    return data, idx


def _run(algorithm: dict, model_cfg: dict = MODEL, rounds: int = 3, **kw):
    """A run of ``model_cfg``'s clients; returns its state, each group's algorithm and model,
    and every client update (round, client, downloaded, payload)."""
    data, idx = _problem(len(model_cfg.get("client_backbones") or BACKBONES))
    models, arch = build_models(model_cfg, C, 0, None, "cpu", len(idx))
    clients = Clients(idx, idx, [None] * len(idx), architecture=arch)
    algorithms = [make_algorithm(algorithm) for _ in models]
    seen: list = []
    for a in algorithms:
        spy_client_end(a, seen)
    kw.setdefault("log", lambda _: None)
    model = models if len(models) > 1 else models[0]
    alg = algorithms if len(algorithms) > 1 else algorithms[0]
    state = run_rounds(train_cfg(rounds=rounds, **kw.pop("cfg", {})), model, alg, data, data,
                       clients, **kw)  # fmt: skip
    return state, algorithms, models, seen


def test_fedhpl_across_two_widths_trains_with_one_module_per_width():
    state, algorithms, models, seen = _run({"name": "fedhpl"})
    assert len(models) == 2 and [m.num_features for m in models] == [64, 32]
    assert all(a.client_models[k] is models[k % 2] for a in algorithms for k in range(4))
    # FedHPL's latent dimensions come from each client's model: ratio weights 32/64 across
    assert torch.equal(algorithms[0].weights_kj[0], torch.tensor([1, 0.5, 1, 0.5]).double())
    for k, width in enumerate([64, 32, 64, 32]):  # each client keeps its own model's shapes
        mine = dict(models[k % 2].named_parameters())
        assert set(state.local[k]) == set(algorithms[k % 2].local)
        for name, t in state.local[k].items():
            assert t.shape == mine[name].shape, (k, name)
        assert state.local[k]["vit.head.weight"].shape == (C, width)
        trainable = {n for n, p in mine.items() if p.requires_grad}
        assert set(state.local[k]) <= trainable  # no frozen tensor is copied per client
    assert all(r["acc"] == r["acc"] and not r["diverged"] for r in state.history)
    assert len(state.history[-1]["acc_per_client"]) == 4
    # the first width's algorithm exchanged; the other holds the same global logits
    assert algorithms[1].global_logits is algorithms[0].global_logits


def test_only_the_declared_payload_crosses_between_clients_and_its_bytes_are_counted():
    state, _, _, seen = _run({"name": "fedhpl"}, rounds=2)
    for _r, _k, _, payload in seen:  # up: the kept logits and their labels, no tensor
        assert payload.tensors == {} and set(payload.extra) == {"logits", "labels"}
        assert payload.extra["logits"].shape[1] == C
    for r, row in enumerate(state.history, 1):
        sent = [p for rr, _, _, p in seen if rr == r]
        assert row["up_bytes"] == sum(nbytes(p.all_tensors()) for p in sent)
        got = [d for rr, _, d, _ in seen if rr == r]
        assert all(set(d) == ({"logits"} if r > 1 else set()) for d in got)
        assert row["down_bytes"] == (4 * C * C * 4 if r > 1 else 0)  # each its C×C logits


def test_without_distillation_each_client_trains_as_in_a_run_of_its_own_model():
    """λ = 0: nothing reaches a client from the others, so a client of a mixed run ends with
    exactly the tensors it has in a run where every client holds its model (the other model's
    clients swapped in and out of their own module leave it untouched)."""
    mixed, *_ = _run({"name": "fedhpl", "lam": 0.0})
    for width, backbone in ((0, WIDE), (1, NARROW)):
        alone, *_ = _run({"name": "fedhpl", "lam": 0.0}, {**MODEL, "backbone": backbone,
                         "client_backbones": None})  # fmt: skip
        for k in range(width, 4, 2):
            for name, t in alone.local[k].items():
                assert torch.equal(mixed.local[k][name], t), (k, name)
            hist = [r["acc_per_client"][k] for r in mixed.history]
            assert hist == [r["acc_per_client"][k] for r in alone.history]


def test_averaged_tensors_average_the_clients_of_one_model_only():
    state, algorithms, models, seen = _run({"name": "fedhpl", "average": ["head"]}, rounds=2)
    parts = split_shared(state.shared, 2)
    assert set(state.shared) == {
        f"model{g}.vit.head.{t}" for g in (0, 1) for t in ("weight", "bias")
    }
    for g, part in enumerate(parts):
        mine = [p for r, k, _, p in seen if r == 2 and k % 2 == g]
        total = sum(p.num_samples for p in mine)
        for name, value in part.items():
            mean = sum(p.tensors[name] * (p.num_samples / total) for p in mine)
            torch.testing.assert_close(value, mean)
            assert value.shape == dict(models[g].named_parameters())[name].shape
    # the head goes down to the clients of its own model, with the logits
    assert all(got["vit.head.weight"].shape == (C, (64, 32)[k % 2])
               for r, k, got, _ in seen if r == 2)  # fmt: skip
    assert join_shared(parts) == state.shared


def test_a_killed_heterogeneous_run_resumes_to_identical_numbers(tmp_path):
    algorithm = {"name": "fedhpl", "average": ["prompts"]}
    cfg = {"cfg": {"checkpoint_every": 1}}
    full, full_algs, *_ = _run(algorithm, rounds=3, **cfg)
    ckpt = tmp_path / "ckpt.pt"

    with pytest.raises(Killed):
        _run(algorithm, rounds=3, checkpoint=ckpt, log=dies_at(2), **cfg)
    resumed, resumed_algs, *_ = _run(algorithm, rounds=3, checkpoint=ckpt, **cfg)
    assert untimed(resumed.history) == untimed(full.history)
    assert resumed.shared.keys() == full.shared.keys()
    assert all(torch.equal(full.shared[n], resumed.shared[n]) for n in full.shared)
    for k in range(4):
        assert all(torch.equal(full.local[k][n], t) for n, t in resumed.local[k].items())
    for a, b in zip(full_algs, resumed_algs, strict=True):
        assert torch.equal(a.global_logits, b.global_logits)


def test_client_backbones_are_checked_against_the_clients():
    with pytest.raises(ValueError, match=r"model.client_backbones: 2 backbones for 4 clients"):
        architectures({"backbone": WIDE, "client_backbones": [WIDE, NARROW]}, 4)
    with pytest.raises(ValueError, match=r"model.backbone: 'cnn_simple' is none of"):
        architectures({"backbone": "cnn_simple", "client_backbones": BACKBONES}, 4)
    with pytest.raises(ValueError, match="no weights given for 'vit_pfedpt_mini'"):
        build_models(MODEL, C, 0, {WIDE: "w.safetensors"}, "cpu", 4)
    assert architectures(MODEL, 4) == ([WIDE, NARROW], [0, 1, 0, 1])


def test_client_backbones_must_normalise_their_inputs_alike():
    """One copy of the data on the device feeds every model: backbones whose weights expect
    other input statistics are refused unless the run sets its own."""
    mixed = {"model": {"backbone": WIDE, "client_backbones": [WIDE, "resnet18.tv_in1k"]}}
    with pytest.raises(ValueError, match="normalise their inputs differently"):
        input_stats(mixed)
    given = {"mean": [0.1, 0.2, 0.3], "std": [1, 1, 1]}
    assert input_stats({**mixed, "train": {"normalize": given}}) == ((0.1, 0.2, 0.3), (1, 1, 1))
    assert input_stats({"model": MODEL}) == input_stats({"model": {"backbone": WIDE}})


class Guess(Algorithm):
    """Exchanges something across models without saying what it keeps."""

    name = "guess"

    def exchange(self, payloads, r):
        self.seen = len(payloads)


def test_an_exchange_that_does_not_say_what_it_keeps_cannot_cross_models():
    data, idx = _problem()
    models, arch = build_models(MODEL, C, 0, None, "cpu", len(idx))
    clients = Clients(idx, idx, [None] * len(idx), architecture=arch)
    with pytest.raises(ValueError, match="algorithm guess: exchanges without naming what it keeps"):
        run_rounds(train_cfg(rounds=1), models, [Guess(), Guess()], data, data, clients)
    one = [k for k in range(4) if arch[k] == 0]
    alone = Clients([idx[k] for k in one], [idx[k] for k in one], [None] * len(one))
    run_rounds(train_cfg(rounds=1), models[0], Guess(), data, data, alone, log=lambda _: None)


def test_fedavg_across_two_widths_averages_and_evaluates_each_models_global_tensors():
    """Without local tensors each model is one federation of its own clients: its global
    tensors are the mean of its clients' uploads, and its clients are evaluated on it."""
    state, algorithms, models, seen = _run({"name": "fedavg"}, rounds=1)
    data, idx = _problem()
    for g, part in enumerate(split_shared(state.shared, 2)):
        mine = [p for _, k, _, p in seen if k % 2 == g]
        assert set(part) == set(algorithms[g].shared) and len(mine) == 2
        total = sum(p.num_samples for p in mine)
        for name, value in part.items():
            mean = sum(p.tensors[name] * (p.num_samples / total) for p in mine)
            torch.testing.assert_close(value, mean)
        put(models[g], part)
        for k in range(g, 4, 2):
            correct, _ = predict(models[g], data, idx[k])
            assert state.history[-1]["acc_per_client"][k] == 100.0 * float(correct.float().mean())


RESNETS = {"backbone": "resnet_mini", "img_size": 16, "tuning": "head_split",
           "client_backbones": ["resnet_mini", "resnet50_mini"] * 2}  # fmt: skip
SERVER_MODELS = {
    "fedtgp": {"name": "fedtgp", "server_epochs": 3},
    "fedgen": {"name": "fedgen", "server_epochs": 3, "noise_dim": 8, "hidden_dim": 16},
    "fedgh": {"name": "fedgh", "server_epochs": 3},
}


@pytest.mark.parametrize("name", list(SERVER_MODELS))
def test_a_killed_run_of_a_server_model_across_models_resumes_to_identical_numbers(tmp_path, name):
    """FedTGP's and FedGen's generators and FedGH's global head are one server state across
    ResNets of two widths (every model's algorithm holds the same object), checkpointed: a
    run killed in round 2 resumes to the history, tensors and server model of an
    uninterrupted one."""
    model = {**RESNETS, "tuning_options": {"feature_dim": 16}}
    if name == "fedgh":
        model["tuning_options"]["projection"] = "linear"
    cfg = {"cfg": {"checkpoint_every": 1}}
    full, full_algs, *_ = _run(SERVER_MODELS[name], model, rounds=3, **cfg)
    server = {"fedtgp": "generator", "fedgen": "generator", "fedgh": "global_head"}[name]
    assert getattr(full_algs[0], server) is getattr(full_algs[1], server)
    ckpt = tmp_path / "ckpt.pt"

    with pytest.raises(Killed):
        _run(SERVER_MODELS[name], model, rounds=3, checkpoint=ckpt, log=dies_at(2), **cfg)
    resumed, resumed_algs, *_ = _run(SERVER_MODELS[name], model, rounds=3, checkpoint=ckpt, **cfg)
    assert untimed(resumed.history) == untimed(full.history)
    assert all(torch.equal(full.shared[n], resumed.shared[n]) for n in full.shared)
    for k in range(4):
        assert all(torch.equal(full.local[k][n], t) for n, t in resumed.local[k].items())
    assert getattr(resumed_algs[0], server) is getattr(resumed_algs[1], server)
    mine, theirs = (a.state_dict() for a in (full_algs[0], resumed_algs[0]))
    key = "generator" if server == "generator" else "global_head"
    for n, t in mine[key].items():
        assert torch.equal(t, theirs[key][n]), n
