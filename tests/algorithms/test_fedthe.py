"""FedTHE (Jiang & Lin 2023), FedICON's baseline (docs/methods/fedicon.md): the personal head
and the local representation stay on the client, the server's mean of the local
representations is the global one, the loss is the balanced softmax, and the test-time
ensemble of two identical heads predicts as either head."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fedrepro.algorithms import make_algorithm
from fedrepro.algorithms.fedthe import GLOBAL_REP, HEAD, LOCAL_REP, THEPredictor, attach_fedthe
from fedrepro.fl.algorithm import ClientCtx
from fedrepro.fl.contrastive import representation
from fedrepro.fl.engine import run_rounds
from tests.algorithms.test_fedicon import TinyEncoder
from tests.fl_helpers import problem, train_cfg


def _run(rounds=1):
    data, clients = problem(num_clients=3, sizes=[16, 24, 40])
    torch.manual_seed(0)
    model = TinyEncoder()
    alg = make_algorithm({"name": "fedthe"})
    alg.prepare_model(model)
    seen = {}
    inner = alg.client_end

    def client_end(ctx):  # the client's trained model, before anything is sent
        payload = inner(ctx)
        ctx.model.eval()
        with torch.no_grad():
            h = representation(ctx.model, data.batch(clients.train[ctx.client])[0])
        seen[ctx.client] = h.mean(0)
        return payload

    alg.client_end = client_end
    state = run_rounds(train_cfg(rounds=rounds), model, alg, data, data, clients,
                       log=lambda _: None)  # fmt: skip
    return state, alg, seen


def test_personal_head_and_local_rep_stay_and_the_global_rep_is_their_mean():
    state, alg, seen = _run()
    assert {f"{HEAD}.weight", LOCAL_REP} <= set(alg.local)
    assert f"{HEAD}.weight" not in alg.shared and GLOBAL_REP in alg.shared
    reps = [state.local[k][LOCAL_REP] for k in range(3)]
    for k in range(3):  # the mean representation of the client's training images
        assert torch.allclose(reps[k], seen[k], atol=1e-5)
    sizes = torch.tensor([16.0, 24.0, 40.0])
    expected = sum(w * r for w, r in zip(sizes / sizes.sum(), reps, strict=True))
    assert torch.allclose(state.shared[GLOBAL_REP], expected, atol=1e-6)


def test_loss_is_the_balanced_softmax():
    data, clients = problem(num_clients=1)
    torch.manual_seed(0)
    model = TinyEncoder()
    alg = make_algorithm({"name": "fedthe"})
    alg.prepare_model(model)
    alg.configure([len(clients.train[0])], train_cfg()["train"])
    alg.setup(model, 1)
    ctx = ClientCtx(0, model, {}, 0.1, 0.0, 24, round=1, data=data, idx=clients.train[0])
    alg.client_begin(ctx)
    x, y = data.batch(clients.train[0][:8])
    counts = torch.bincount(data.labels[clients.train[0]], minlength=3).float()
    expected = F.cross_entropy(model(x) + torch.log(counts / counts.sum() + 1e-12), y)
    assert torch.allclose(alg.objective(ctx, x, y), expected)


def test_identical_heads_predict_as_either_head():
    torch.manual_seed(0)
    model = TinyEncoder()
    attach_fedthe(model)
    getattr(model, HEAD).weight.data.copy_(model.classifier.weight.data)
    model.eval()
    x = torch.randn(6, 3, 6, 6)
    with torch.no_grad():
        out = THEPredictor(model, lr=0.1)(x)
        assert torch.allclose(out, model(x), atol=1e-6)
