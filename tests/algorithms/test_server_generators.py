"""FedTGP and FedGen (fedrepro.algorithms.server_generators; docs/methods/fedhpl.md): each
method's defining property, that its server model sees only the declared uploads, that nothing
but the declared payload crosses between clients (no client's body is averaged), Table 9's
counts, and that a tiny federation trains and resumes."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F

from fedrepro.algorithms import make_algorithm
from fedrepro.algorithms.server_generators import adaptive_margin
from fedrepro.fl.algorithm import ClientCtx, Payload
from fedrepro.models.registry import create_backbone
from fedrepro.models.tuning import apply_tuning
from fedrepro.structure.parameters import count_parameters
from tests.fl_helpers import Killed, dies_at, federate, problem, train_cfg

C = 3  # classes of the tiny problem
DIM = 16  # the common feature width (FedGen's and FedTGP's pooled 512 at a tiny width)
SMALL = {
    "fedtgp": {"name": "fedtgp", "server_epochs": 20},
    "fedgen": {"name": "fedgen", "server_epochs": 20, "noise_dim": 8, "hidden_dim": 16},
}


def _model(backbone: str = "resnet_mini", classes: int = C, dim: int = DIM):
    torch.manual_seed(0)
    return apply_tuning(create_backbone(backbone, classes), "head_split", feature_dim=dim)


def _federate(cfg: dict, rounds: int = 3, **kw):
    return federate(cfg, _model(), rounds, **kw)


def _server(cfg: dict, clients: int = 2, seed: int = 0, per_client: int = 24):
    """The algorithm set up as a run of ``clients`` clients holding data drawn from ``seed``
    (data its server must not read)."""
    data, cl = problem(num_clients=clients, seed=seed, per_client=per_client)
    alg = make_algorithm(cfg)
    alg.configure([len(t) for t in cl.train], train_cfg()["train"], data, cl.train)
    alg.setup(_model(), clients)
    return alg


def _uploads(means: torch.Tensor, counts: torch.Tensor) -> list[Payload]:
    return [
        Payload(k, 6, 1, {}, {"means": means[k], "counts": counts[k]}) for k in range(len(means))
    ]


# ---- FedTGP ----------------------------------------------------------------------------------


def test_fedtgp_margin_is_the_largest_nearest_class_distance_of_the_uploads_capped():
    """δ = min(max_c min_{c'≠c} ‖P̄_c − P̄_{c'}‖, τ), P̄_c the mean of the clients' class-c
    prototypes, each client holding c once: here P̄ = (1, 0), (3, 0), (3, 4), nearest
    distances 2, 2, 4, so δ = 4 (3 under τ = 3); weighing the class means by the counts would
    give P̄ = (1.8, 0), (3, 0), (3, 5.2) and δ = 5.2."""
    means = torch.zeros(2, C, DIM)
    means[0, 0, 0], means[1, 0, 0] = 0.0, 2.0
    means[:, 1, 0] = 3.0
    means[0, 2, :2], means[1, 2, :2] = torch.tensor([3.0, 2.0]), torch.tensor([3.0, 6.0])
    counts = torch.tensor([[1.0, 5.0, 1.0], [9.0, 2.0, 4.0]])
    for threshold, expected in ((100.0, 4.0), (3.0, 3.0)):
        alg = _server({**SMALL["fedtgp"], "server_epochs": 1, "margin_threshold": threshold})
        alg.exchange(_uploads(means, counts), 1)
        assert alg.margin == pytest.approx(expected)
    one_class = torch.tensor([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    assert adaptive_margin(means.mean(0), one_class.sum(0) > 0, 7.0) == 7.0


def _clustered_uploads(seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    centres = 2 * torch.randn(C, DIM, generator=gen)
    means = centres + 0.5 * torch.randn(3, C, DIM, generator=gen)
    counts = torch.tensor([[4.0, 0.0, 2.0], [1.0, 3.0, 5.0], [2.0, 2.0, 2.0]])
    return means, counts


def _gaps(margin_threshold: float) -> tuple[float, torch.Tensor]:
    """δ and, per uploaded prototype, its distance to the nearest other class's global prototype
    less that to its own class's, after the server's steps (3 clients, clustered uploads)."""
    means, counts = _clustered_uploads()
    alg = _server({"name": "fedtgp", "margin_threshold": margin_threshold}, clients=3)
    alg.exchange(_uploads(means, counts), 1)
    assert bool(alg.global_present.all())
    held = counts > 0
    protos, labels = means[held], torch.nonzero(held)[:, 1]
    d = torch.cdist(protos, alg.global_means)
    own = d.gather(1, labels[:, None]).squeeze(1)
    others = d.masked_fill(F.one_hot(labels, C).bool(), float("inf")).min(1).values
    return alg.margin, others - own


def test_fedtgp_server_pushes_each_uploaded_prototype_away_from_other_classes_by_the_margin():
    """The margin-enhanced contrastive loss: after the same server steps every uploaded
    prototype is nearest its own class's global prototype, and the adaptive margin (here
    δ ≈ 11.8) widens every prototype's lead over the nearest other class well beyond what the
    plain contrastive loss (τ = 0, so δ = 0) reaches. (The lead cannot reach δ itself for
    every prototype: δ is the largest of the classes' nearest distances, so the closest pair
    of classes is nearer than δ.)"""
    margin, with_margin = _gaps(100.0)
    none, without = _gaps(0.0)
    assert none == 0.0 and margin > 5.0
    assert float(without.min()) > 0
    assert float(with_margin.min()) > float(without.max()) + 1.0


def test_fedtgp_global_prototypes_come_from_the_uploads_alone():
    """The same uploads from clients with other images give the same global prototypes;
    other uploads give others."""
    means, counts = _clustered_uploads()
    first = _server(SMALL["fedtgp"], clients=3, seed=0)
    first.exchange(_uploads(means, counts), 1)
    other = _server(SMALL["fedtgp"], clients=3, seed=5, per_client=17)
    other.exchange(_uploads(means, counts), 1)
    assert torch.equal(first.global_means, other.global_means)
    moved = _server(SMALL["fedtgp"], clients=3)
    moved.exchange(_uploads(means + 1, counts), 1)
    assert not torch.equal(moved.global_means, first.global_means)


# ---- FedGen ----------------------------------------------------------------------------------


def _heads(seed: int = 2):
    gen = torch.Generator().manual_seed(seed)
    weights = torch.randn(3, C, DIM, generator=gen)
    biases = 0.1 * torch.randn(3, C, generator=gen)
    counts = torch.tensor([[4.0, 0.0, 2.0], [1.0, 3.0, 5.0], [2.0, 2.0, 2.0]])
    return [
        Payload(k, int(counts[k].sum()), 1, {},
                {"head.weight": weights[k], "head.bias": biases[k], "counts": counts[k]})
        for k in range(3)
    ]  # fmt: skip


def _ensemble_accuracy(alg, payloads, labels: torch.Tensor) -> float:
    """How often the sample-weighted ensemble of the uploaded heads classifies the generator's
    feature for a label as that label."""
    total = sum(p.num_samples for p in payloads)
    with torch.no_grad():
        z = alg.generator.train()(labels)
        logits = sum(
            p.num_samples / total * F.linear(z, p.extra["head.weight"], p.extra["head.bias"])
            for p in payloads
        )
    return float((logits.argmax(1) == labels).float().mean())


def test_fedgen_generator_features_are_classified_as_their_label_by_the_uploaded_heads():
    payloads = _heads()
    alg = _server({"name": "fedgen", "noise_dim": 8, "hidden_dim": 16}, clients=3)
    labels = torch.arange(C).repeat(200)
    torch.manual_seed(0)
    before = _ensemble_accuracy(alg, payloads, labels)
    alg.exchange(payloads, 1)
    torch.manual_seed(0)
    after = _ensemble_accuracy(alg, payloads, labels)
    assert before < 0.7 and after > 0.95, (before, after)


def test_fedgen_generator_sees_only_the_uploaded_heads_and_label_counts():
    """The same uploads from clients with other images give the same generator; other label
    counts give another; a class no client holds is never drawn on the server."""
    cfg = SMALL["fedgen"]
    first = _server(cfg, clients=3, seed=0)
    first.exchange(_heads(), 1)
    other = _server(cfg, clients=3, seed=5, per_client=17)
    other.exchange(_heads(), 1)
    theirs = other.generator.state_dict()
    for key, value in first.generator.state_dict().items():
        assert torch.equal(value, theirs[key]), key
    recounted = _heads()
    recounted[0].extra["counts"] = torch.tensor([1.0, 5.0, 0.0])
    moved = _server(cfg, clients=3)
    moved.exchange(recounted, 1)
    assert not torch.equal(moved.generator.out.weight, first.generator.out.weight)
    drawn = []
    real = torch.multinomial
    with_zero = _heads()
    for p in with_zero:
        p.extra["counts"] = p.extra["counts"] * torch.tensor([1.0, 0.0, 1.0])

    def spy(weights, n, **kw):
        out = real(weights, n, **kw)
        drawn.append(out)
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch, "multinomial", spy)
        _server(cfg, clients=3).exchange(with_zero, 1)
    assert drawn and not bool((torch.cat(drawn) == 1).any())


def test_fedgen_clients_receive_the_generator_and_train_on_its_features():
    state, alg, seen = _federate(SMALL["fedgen"], rounds=2)
    gen_keys = {f"generator.{k}" for k, _ in alg.generator.named_parameters()}
    for r, _, got, payload in seen:
        head = {"head.weight", "head.bias"}
        assert set(got) == (head if r == 1 else head | gen_keys | {"label_counts"})
        assert payload.tensors == {} and set(payload.extra) == head | {"counts"}
    calls = []
    client_gen = alg._client_gen
    forward = client_gen.forward
    client_gen.forward = lambda labels: calls.append(labels) or forward(labels)
    model = _model()
    data, clients = problem(num_clients=3, per_client=24)
    ctx = ClientCtx(0, model, {}, 0.0, 0.0, 24, round=3, data=data, idx=clients.train[0],
                    downloaded=alg.downlink_to(0, {}))  # fmt: skip
    alg.client_begin(ctx)
    x, y = data.batch(clients.train[0][:8])
    alg.objective(ctx, x, y)
    assert len(calls) == 1 and len(calls[0]) == 8


# ---- both ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SMALL))
def test_a_tiny_federation_trains_and_only_the_declared_payload_crosses(name):
    """Three clients, three rounds: accuracy rises above chance; FedTGP's clients upload C class
    means and C counts, FedGen's their head and C counts; every client keeps its own body
    (only FedGen's heads are averaged); the bytes counted are those."""
    state, alg, seen = _federate(SMALL[name], rounds=3)
    first, last = state.history[0], state.history[-1]
    assert last["acc"] > max(first["acc"], 100 / C)
    for _, _, _, payload in seen:
        if name == "fedtgp":
            assert payload.tensors == {} and set(payload.extra) == {"means", "counts"}
            assert payload.extra["means"].shape == (C, DIM)
        else:
            assert payload.tensors == {}
            assert set(payload.extra) == {"head.weight", "head.bias", "counts"}
    per_client = C * DIM + C if name == "fedtgp" else C * DIM + 2 * C
    assert last["up_bytes"] == 3 * per_client * 4
    if name == "fedtgp":
        assert state.shared == {} and last["down_bytes"] == 3 * (C * DIM * 4 + C)
    else:
        generator = sum(p.numel() for p in alg.generator.parameters())
        assert set(state.shared) == {"head.weight", "head.bias"}
        assert last["down_bytes"] == 3 * (C * DIM + C + generator + C) * 4
    stem = next(k for k in state.local[0] if k.endswith("weight"))
    assert not torch.equal(state.local[0][stem], state.local[1][stem])


@pytest.mark.parametrize("name", list(SMALL))
def test_a_killed_run_resumes_to_identical_numbers(name, tmp_path):
    full, full_alg, _ = _federate(SMALL[name], rounds=3)

    with contextlib.suppress(Killed):
        _federate(SMALL[name], rounds=3, checkpoint=tmp_path / "ck.pt", log=dies_at(2))
    resumed, alg, _ = _federate(SMALL[name], rounds=3, checkpoint=tmp_path / "ck.pt")
    assert [r["acc"] for r in resumed.history] == [r["acc"] for r in full.history]
    for key, value in full.local[2].items():
        assert torch.equal(resumed.local[2][key], value), key
    for key, value in full_alg.generator.state_dict().items():
        assert torch.equal(alg.generator.state_dict()[key], value), key


@pytest.mark.parametrize("name", list(SMALL))
def test_setting_up_again_keeps_the_trained_server_model(name):
    """One server model per run, however often the algorithm is set up (a client group's
    models each): a second set-up after a server step keeps what the step trained."""
    alg = _server(SMALL[name], clients=3)
    alg.exchange(_uploads(*_clustered_uploads()) if name == "fedtgp" else _heads(), 1)
    trained = {k: v.clone() for k, v in alg.generator.state_dict().items()}
    alg.setup(_model(), 3)
    for key, value in alg.generator.state_dict().items():
        assert torch.equal(value, trained[key]), key


@pytest.mark.parametrize(
    ("name", "server", "uploaded"),
    [("fedgen", (531_456, 577_536), (5140, 51400)), ("fedtgp", (530_432, 576_512), (5130, 51300))],
)
def test_table9_server_models_and_uploads(name, server, uploaded):
    """FedHPL App. Table 9 at C = 10, 100, counted by a structure job (meta device) on
    ResNet-18 and ResNet-50 clients (latent 512, 2048 pooled to 512) alike: the server model
    the algorithm trains is 0.507 M / 0.551 M (FedGen) and 0.506 M / 0.550 M (FedTGP); a client
    uploads its head and its C counts ("5130+", FedGen) or C prototypes and their counts
    (5,130 / 51,300, FedTGP); the client is Table 7's (ResNet-18 10.664 M at C = 10)."""
    cfg = {"model": {"tuning": "head_split", "tuning_options": {"feature_dim": 512}},
           "algorithm": {"name": name}}  # fmt: skip
    for classes, scalars, sent in zip((10, 100), server, uploaded, strict=True):
        for backbone in ("resnet18.tv_in1k", "resnet50.tv_in1k"):
            got = count_parameters(cfg, backbone, classes, ("uploaded", "server", "total"))
            assert (got["server"], got["uploaded"]) == (scalars, sent), (backbone, classes)
    r18 = count_parameters(cfg, "resnet18.tv_in1k", 10, ("total",))["total"]
    assert r18 == 11_181_642 and round(r18 / 2**20, 3) == 10.664
