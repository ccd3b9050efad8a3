"""FedHE, FedProto and FedGH (fedrepro.algorithms.class_means; docs/methods/fedhpl.md): each
method's defining invariant, that nothing but the declared per-class payload crosses between
clients (every client keeps its own model), that the payload does not depend on a client's
backbone width, and that a tiny federation trains and resumes."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F
from timm.models.resnet import BasicBlock, ResNet

from fedrepro.algorithms import make_algorithm
from fedrepro.algorithms.class_means import combine
from fedrepro.fl.algorithm import ClientCtx, Payload
from fedrepro.fl.engine import run_rounds
from fedrepro.models.registry import create_backbone
from fedrepro.models.tuning import apply_tuning
from tests.fl_helpers import Killed, TinyNet, dies_at, federate, problem, spy_client_end, train_cfg

C = 3  # classes of the tiny problem
DIM = 16  # the common feature width, small enough for the tiny backbone
SMALL = {
    "fedhe": {"name": "fedhe"},
    "fedproto": {"name": "fedproto"},
    "fedgh": {"name": "fedgh", "server_epochs": 5},
}
# each method's client (config/experiments/fedhpl.yaml's Table 7 models, at a tiny width)
CLIENT = {
    "fedhe": {"projection": "none", "stem": 3},
    "fedproto": {"feature_dim": DIM, "mapping": 2 * DIM},
    "fedgh": {"feature_dim": DIM, "projection": "linear", "stem": 3},
}


def _model(name: str, backbone=None):
    torch.manual_seed(0)
    return apply_tuning(backbone or create_backbone("resnet_mini", C), "head_split", **CLIENT[name])


def _federate(cfg: dict, rounds: int = 3, **kw):
    return federate(cfg, _model(cfg["name"]), rounds, **kw)


def test_fedproto_of_identical_clients_is_the_class_mean_of_their_representations():
    """Three clients with one model and the same images: every global prototype is the mean
    of the class's mapped representations (evaluation mode, no step taken)."""
    data, clients = problem(num_clients=1, per_client=30)
    model = _model("fedproto")
    alg = make_algorithm(SMALL["fedproto"])
    alg.setup(model, 3)
    model.eval()
    x, y = data.batch(clients.train[0])
    payloads = []
    for k in range(3):
        ctx = ClientCtx(k, model, {}, 0.0, 0.0, len(y), round=1)
        alg.client_begin(ctx)
        for part in torch.arange(len(y)).split(8):  # the batches a client trains on
            alg.objective(ctx, x[part], y[part])
        payloads.append(alg.client_end(ctx))
    alg.exchange(payloads, 1)
    with torch.no_grad():
        q = model.features(x)  # head_split's mapped feature, the classifier's input
    expected = torch.stack([q[y == c].mean(0) for c in range(C)])
    assert alg.global_means.shape == (C, DIM) and bool(alg.global_present.all())
    torch.testing.assert_close(alg.global_means, expected, rtol=1e-5, atol=1e-6)


def test_fedproto_weighs_each_client_holding_a_class_once():
    """FedProto's server (TsingZ0/HtFLlib's proto_aggregation) averages client prototypes;
    a class only one client holds is that client's; a class none holds is absent."""
    means = torch.tensor([[[1.0], [4.0], [0.0]], [[3.0], [0.0], [0.0]]])
    counts = torch.tensor([[1.0, 5.0, 0.0], [9.0, 0.0, 0.0]])
    out, present = combine(means, counts, "uniform")
    assert out.flatten().tolist() == [2.0, 4.0, 0.0] and present.tolist() == [True, True, False]
    weighted, _ = combine(means, counts, "samples")
    assert weighted[0, 0] == pytest.approx(2.8)  # (1·1 + 3·9) / 10: FedHE's
    assert make_algorithm({"name": "fedproto"}).weighting == "uniform"
    assert make_algorithm({"name": "fedhe"}).weighting == "samples"


def test_fedhe_global_logits_are_the_count_weighted_class_means():
    """Clients of 6, 30 and 12 images: FedHE's global logit of a class is the mean over every
    logit of the class that any client computed in the round (each client's class mean
    weighted by its count), not the mean of the client means."""
    data, clients = problem(num_clients=3, sizes=[6, 30, 12])
    torch.manual_seed(0)
    model = TinyNet(C)
    alg = make_algorithm({"name": "fedhe"})
    seen, batches = [], []
    spy_client_end(alg, seen)
    objective = alg.objective

    def spy_objective(ctx, x, y):
        batches.append((ctx.model(x).detach(), y))  # the logits the objective computes
        return objective(ctx, x, y)

    alg.objective = spy_objective
    run_rounds(train_cfg(rounds=1), model, alg, data, data, clients, log=lambda _: None)
    z = torch.cat([logits for logits, _ in batches])
    y = torch.cat([labels for _, labels in batches])
    expected = torch.stack([z[y == c].mean(0) for c in range(C)])
    torch.testing.assert_close(alg.global_means, expected, rtol=1e-5, atol=1e-6)
    means = torch.stack([p.extra["means"] for *_, p in seen])
    counts = torch.stack([p.extra["counts"] for *_, p in seen])
    assert counts.sum().item() == len(y)
    per_client = combine(means, counts, "uniform")[0]
    assert not torch.allclose(per_client, expected, atol=1e-4)  # the two readings differ here


def _head_from(payloads, data, clients):
    """FedGH's server (initial head, trained head) on ``payloads``, its clients holding
    ``data`` (which the server must not read)."""
    model = _model("fedgh")
    alg = make_algorithm(SMALL["fedgh"])
    alg.configure([len(t) for t in clients.train], train_cfg()["train"], data, clients.train)
    alg.setup(model, len(clients))
    initial = dict(alg.global_head)
    alg.exchange(payloads, 1)
    return initial, alg.global_head


def test_fedgh_global_head_is_trained_on_the_uploaded_representations_only():
    """The same uploads from clients with other raw images and labels give the same global
    head; other uploads give another; the head fits the uploaded (mean, class) pairs."""
    gen = torch.Generator().manual_seed(1)
    counts = torch.tensor([[4.0, 0.0, 2.0], [1.0, 3.0, 5.0]])
    means = torch.randn(2, C, DIM, generator=gen) + 3 * torch.eye(C, DIM)
    payloads = [Payload(k, 6, 1, {}, {"means": means[k], "counts": counts[k]}) for k in range(2)]
    initial, first = _head_from(payloads, *problem(num_clients=2, seed=0))
    _, other_data = _head_from(payloads, *problem(num_clients=2, per_client=17, seed=5))
    for key in first:
        assert torch.equal(first[key], other_data[key]), key
    moved = [Payload(0, 6, 1, {}, {"means": means[0] + 1, "counts": counts[0]}), payloads[1]]
    assert not torch.equal(_head_from(moved, *problem(num_clients=2))[1]["weight"], first["weight"])
    held = counts > 0
    pairs, classes = means[held], torch.nonzero(held)[:, 1]

    def loss(head):
        return float(F.cross_entropy(F.linear(pairs, head["weight"], head["bias"]), classes))

    assert loss(first) < loss(initial)


def test_fedgh_clients_train_from_the_global_head_and_are_evaluated_with_it():
    state, alg, seen = _federate(SMALL["fedgh"], rounds=2)
    for _, _, got, payload in seen:
        assert set(got) == {"head.weight", "head.bias"} and got["head.weight"].shape == (C, DIM)
        assert payload.tensors == {} and set(payload.extra) == {"means", "counts"}
    model = _model("fedgh")
    head = model.get_classifier()
    assert not torch.equal(head.weight, alg.global_head["weight"])  # trained on the server
    alg.client_begin(ClientCtx(0, model, {}, 0.0, 0.0, 1, downloaded=alg.downlink_to(0, {})))
    assert torch.equal(head.weight, alg.global_head["weight"])
    head.weight.data.zero_()
    assert alg.predictor(model, 0) is model
    assert torch.equal(head.weight, alg.global_head["weight"])


@pytest.mark.parametrize("name", list(SMALL))
def test_a_tiny_federation_trains_and_only_the_declared_payload_crosses(name):
    """Three clients, three rounds: accuracy rises above chance (and the loss falls where the
    head predicts; FedProto's nearest-prototype scores are −MSE, near-uniform softmax); each
    client uploads C class means and C counts, nothing of its model, and keeps its own body."""
    state, alg, seen = _federate(SMALL[name], rounds=3)
    first, last = state.history[0], state.history[-1]
    assert last["acc"] > max(first["acc"], 100 / C)
    assert name == "fedproto" or last["loss"] < first["loss"]
    width = C if name == "fedhe" else DIM
    for _, _, _, payload in seen:
        assert payload.tensors == {} and set(payload.extra) == {"means", "counts"}
        assert payload.extra["means"].shape == (C, width)
    assert last["up_bytes"] == 3 * (C * width + C) * 4
    assert state.shared == {}
    stem = next(k for k in state.local[0] if k.endswith("weight"))
    assert not torch.equal(state.local[0][stem], state.local[1][stem])


@pytest.mark.parametrize("name", ["fedproto", "fedgh"])
def test_the_payload_does_not_depend_on_the_backbone_width(name):
    """Clients of 128 and 64 latent features upload and download tensors of the same shapes:
    the model's mapping to the common width absorbs the difference."""
    narrow = ResNet(block=BasicBlock, layers=(1, 1, 1, 1), channels=(8, 16, 32, 64), num_classes=C)
    shapes = []
    for backbone in (create_backbone("resnet_mini", C), narrow):
        latent = backbone.num_features
        model = _model(name, backbone)
        alg = make_algorithm(SMALL[name])
        alg.setup(model, 1)
        ctx = ClientCtx(0, model, {}, 0.0, 0.0, 4, downloaded=alg.downlink_to(0, {}))
        alg.client_begin(ctx)
        payload = alg.client_end(ctx)
        shapes.append(
            (latent, {k: tuple(v.shape) for k, v in {**payload.extra, **ctx.downloaded}.items()})
        )
    (wide, first), (thin, second) = shapes
    assert (wide, thin) == (128, 64) and first == second
    assert first["means"] == (C, DIM)


@pytest.mark.parametrize("name", list(SMALL))
def test_a_killed_run_resumes_to_identical_numbers(name, tmp_path):
    full, *_ = _federate(SMALL[name], rounds=3)

    cfg = {**SMALL[name]}
    with contextlib.suppress(Killed):
        _federate(cfg, rounds=3, checkpoint=tmp_path / "ck.pt", log=dies_at(2))
    resumed, *_ = _federate(cfg, rounds=3, checkpoint=tmp_path / "ck.pt")
    assert [r["acc"] for r in resumed.history] == [r["acc"] for r in full.history]
    for name_, value in full.local[2].items():
        assert torch.equal(resumed.local[2][name_], value), name_


def test_unknown_prediction_names_the_option():
    with pytest.raises(ValueError, match="predict"):
        make_algorithm({"name": "fedproto", "predict": "nearest"})


@pytest.mark.parametrize(
    ("name", "client", "printed"),
    [
        ("fedhe", {"projection": "none", "stem": 3}, (110, 10100)),
        ("fedproto", {"feature_dim": 512, "mapping": 2048}, (5130, 51300)),
        ("fedgh", {"feature_dim": 512, "projection": "linear", "stem": 3}, (5130, 51300)),
    ],
)
def test_a_client_uploads_table9s_scalars_whatever_its_resnet(name, client, printed):
    """FedHPL App. Table 9's uploaded parameters per client and round (C = 10, 100), from
    ResNet-18 and ResNet-50 clients (latent 512, 2048) alike (meta device, no data)."""
    for classes, expected in zip((10, 100), printed, strict=True):
        for backbone in ("resnet18.tv_in1k", "resnet50.tv_in1k"):
            with torch.device("meta"):
                model = apply_tuning(create_backbone(backbone, classes), "head_split", **client)
            alg = make_algorithm({"name": name})
            alg.setup(model, 1)
            ctx = ClientCtx(0, model, {}, 0.0, 0.0, 1, downloaded=alg.downlink_to(0, {}))
            alg.client_begin(ctx)
            sent = alg.client_end(ctx).all_tensors()
            assert sum(t.numel() for t in sent.values()) == expected, (backbone, classes)
