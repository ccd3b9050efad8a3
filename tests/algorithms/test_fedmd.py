"""FedMD (fedrepro.algorithms.fedmd; docs/methods/fedhpl.md): the consensus is the plain mean
of every client's logits on the round's public samples whatever its model, a digest moves a
client's logits towards it, nothing but those logits and the samples' labels crosses, the
transfer learning runs once per client, and a killed run resumes to identical numbers."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F
from timm.models.resnet import BasicBlock, ResNet

from fedrepro.algorithms import make_algorithm
from fedrepro.algorithms.fedmd import FedMD, both_heads
from fedrepro.fl.algorithm import ClientCtx, Payload
from fedrepro.fl.data import DeviceData
from fedrepro.fl.engine import run_rounds
from fedrepro.fl.local import outputs_of
from fedrepro.models.registry import create_backbone
from fedrepro.models.tuning import apply_tuning
from tests.fl_helpers import Killed, dies_at, problem, spy_client_end, train_cfg

C, P = 3, 2  # private and public classes of the tiny problem
SAMPLES = 10  # public samples a round
CFG = {"name": "fedmd", "samples": SAMPLES, "pretrain_epochs": 2}
CLIENT = {"projection": "none", "stem": 3, "public_classes": P}  # Table 7's FedMD client


def _public(n: int = 30, seed: int = 7) -> DeviceData:
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, P, (n,), generator=gen)
    images = torch.rand(n, 6, 6, 3, generator=gen) * 80 + labels[:, None, None, None] * 90
    return DeviceData(images.to(torch.uint8), labels)


def _narrow():
    return ResNet(block=BasicBlock, layers=(1, 1, 1, 1), channels=(8, 16, 32, 64), num_classes=C)


def _models():
    """Clients 0 and 2 on the 128-wide mini ResNet, client 1 on a 64-wide one."""
    torch.manual_seed(0)
    wide = apply_tuning(create_backbone("resnet_mini", C), "head_split", **CLIENT)
    narrow = apply_tuning(_narrow(), "head_split", **CLIENT)
    return [wide, narrow]


def _federate(rounds=3, public=None, **kw):
    data, clients = problem(num_clients=3, sizes=[12, 24, 48])  # a weighted mean would differ
    clients.architecture = [0, 1, 0]
    models = _models()
    algs = [make_algorithm(CFG) for _ in models]
    seen: list = []
    for a in algs:
        a.use_public(public or _public())
        spy_client_end(a, seen)
    kw.setdefault("log", lambda _: None)
    state = run_rounds(train_cfg(rounds=rounds), models, algs, data, data, clients, **kw)
    return state, algs, models, seen


def test_the_consensus_is_the_mean_of_every_clients_logits_on_the_rounds_public_samples():
    """Clients of two widths: each uploads both heads' logits (C + P) on the next round's
    public samples; the server's consensus is their plain mean, shared by both models."""
    state, algs, _, seen = _federate(rounds=2)
    last = [p for r, _, _, p in seen if r == 2]
    assert len(last) == 3
    expected = torch.stack([p.extra["logits"] for p in last]).mean(0)
    torch.testing.assert_close(algs[0].consensus, expected)
    assert algs[1].consensus is algs[0].consensus  # one server state for both models
    idx = algs[0].public_indices(3)
    assert len(idx) == SAMPLES and len(set(idx.tolist())) == SAMPLES
    for p in last:
        assert p.extra["logits"].shape == (SAMPLES, C + P)
        assert torch.equal(p.extra["labels"], algs[0].public.labels[idx])
    assert not torch.equal(algs[0].public_indices(2), idx)  # each round draws its own


def test_nothing_but_the_public_logits_and_labels_crosses_between_clients():
    state, algs, _, seen = _federate(rounds=2)
    for r, _, got, payload in seen:
        assert payload.tensors == {} and set(payload.extra) == {"logits", "labels"}
        assert set(got) == (set() if r == 1 else {"consensus"})
    per_client = SAMPLES * ((C + P) * 4 + 8)  # float32 logits, an int64 label a sample
    assert [row["up_bytes"] for row in state.history] == [3 * per_client] * 2
    assert state.history[1]["down_bytes"] == 3 * SAMPLES * (C + P) * 4
    assert state.shared == {}
    assert state.local[0]["public_head.weight"].shape == (P, 128)
    assert state.local[1]["public_head.weight"].shape == (P, 64)  # its own model's shapes


def test_a_digest_moves_the_clients_logits_towards_the_consensus():
    """One pass (FedMD's) over 30 public samples; the consensus here is another model's
    logits (the narrow client's)."""
    model, other = _models()
    alg = make_algorithm({**CFG, "samples": 30})
    alg.use_public(_public())
    alg.configure([24], {**train_cfg()["train"], "lr": 0.05})
    alg.setup(model, 1)
    alg.pretrained = [0]  # no transfer learning: the digest alone
    idx = alg.public_indices(2)
    consensus = outputs_of(other, alg.public, idx, both_heads)[0]

    def distance():
        return F.l1_loss(outputs_of(model, alg.public, idx, both_heads)[0], consensus).item()

    before = distance()
    alg.client_begin(ClientCtx(0, model, {}, 0.05, 0.9, 24, round=2,
                               downloaded={"consensus": consensus}))  # fmt: skip
    assert distance() < 0.6 * before


def test_transfer_learning_runs_once_per_client_on_the_public_labels():
    """Round 1 trains each client on the public set's labels before its private data; a later
    round does not again (the public head's accuracy rises in round 1)."""
    public = _public(n=60)
    model = _models()[0]
    alg = make_algorithm({**CFG, "pretrain_epochs": 10})
    alg.use_public(public)
    alg.configure([24], train_cfg()["train"])
    alg.setup(model, 1)
    every = torch.arange(60)

    def public_acc():
        logits = outputs_of(model, public, every, lambda m, x: m.forward_public(x))[0]
        return (logits.argmax(1) == public.labels).float().mean().item()

    before = public_acc()
    alg.client_begin(ClientCtx(0, model, {}, 0.05, 0.9, 24, round=1))
    after = public_acc()
    assert alg.pretrained == [0] and after > max(before, 0.8)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    alg.client_begin(ClientCtx(0, model, {}, 0.05, 0.9, 24, round=2))  # nothing to digest
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in weights.items())


def test_a_killed_run_resumes_to_identical_numbers_without_transfer_learning_again(
    tmp_path, monkeypatch
):
    full, *_ = _federate(rounds=3)
    with contextlib.suppress(Killed):
        _federate(rounds=3, checkpoint=tmp_path / "ck.pt", log=dies_at(2))
    transfers = []
    transfer = FedMD.transfer
    monkeypatch.setattr(FedMD, "transfer", lambda self, ctx: transfers.append(ctx.client)
                        or transfer(self, ctx))  # fmt: skip
    resumed, algs, *_ = _federate(rounds=3, checkpoint=tmp_path / "ck.pt")
    assert transfers == []  # the clients' transfer learning was restored, not redone
    assert [r["acc"] for r in resumed.history] == [r["acc"] for r in full.history]
    assert algs[0].pretrained == [0, 2] and algs[1].pretrained == [1]
    for name, value in full.local[1].items():
        assert torch.equal(resumed.local[1][name], value), name


@pytest.mark.parametrize(("classes", "printed"), [(10, 21), (100, 111)])
def test_a_client_uploads_table9s_scalars_per_public_sample(classes, printed):
    """FedHPL App. Table 9: 21 and 111 scalars per public sample (both heads' logits and the
    label), from ResNet-18 and ResNet-50 clients alike (meta device, no data)."""
    for backbone in ("resnet18.tv_in1k", "resnet50.tv_in1k"):
        with torch.device("meta"):
            model = apply_tuning(
                create_backbone(backbone, classes), "head_split", **{**CLIENT, "public_classes": 10}
            )
        alg = make_algorithm({"name": "fedmd"})
        alg.setup(model, 1)
        ctx = ClientCtx(0, model, {}, 0.0, 0.0, 1, downloaded=alg.downlink_to(0, {}))
        alg.client_begin(ctx)
        sent = alg.client_end(ctx).all_tensors()
        assert sum(t.numel() for t in sent.values()) == printed, backbone


def test_public_data_is_refused_where_the_algorithm_reads_none_and_fedmd_needs_a_public_head():
    with pytest.raises(ValueError, match="algorithm 'fedavg' reads no public data"):
        make_algorithm({"name": "fedavg"}).use_public(_public())
    alg = make_algorithm({"name": "fedmd"})
    plain = apply_tuning(create_backbone("resnet_mini", C), "head_split", projection="none")
    with pytest.raises(ValueError, match="public_classes"):
        alg.setup(plain, 1)


def test_a_consensus_is_sent_only_for_the_round_whose_samples_it_is_over():
    """A round whose every upload was excluded leaves the last consensus, over the samples of
    the round before: no client digests it against other images."""
    model = _models()[0]
    alg = make_algorithm(CFG)
    alg.use_public(_public())
    alg.configure([24], train_cfg()["train"])
    alg.setup(model, 1)
    upload = {"logits": torch.ones(SAMPLES, C + P), "labels": torch.zeros(SAMPLES).long()}
    alg.exchange([Payload(0, 24, 1, {}, upload)], 1)
    alg.downlink({}, 2)
    assert set(alg.downlink_to(0, {})) == {"consensus"}
    alg.downlink({}, 3)  # round 2's uploads were all excluded: no exchange
    assert alg.downlink_to(0, {}) == {}


def test_public_labels_beyond_the_public_head_are_refused():
    alg = make_algorithm(CFG)
    alg.use_public(_public())
    alg.public.labels[0] = P  # a third class for a 2-class public head
    with pytest.raises(ValueError, match="beyond public_classes 2"):
        alg.setup(_models()[0], 1)


def test_uploads_forward_in_the_runs_evaluation_batches():
    """A 3×3-stem client's forward passes without gradients (FedMD's public logits, FedGH's
    class means) take ``train.eval_batch_size`` (128 at paper scale), not the engine's 1,024:
    a ResNet-50's first stage at 224 px is 51 MB a sample."""
    data, clients = problem(num_clients=1, per_client=24)
    for cfg, client in ((CFG, CLIENT), ({"name": "fedgh"}, {"feature_dim": 16, "stem": 3,
                                                           "projection": "linear"})):  # fmt: skip
        torch.manual_seed(0)
        model = apply_tuning(create_backbone("resnet_mini", C), "head_split", **client)
        alg = make_algorithm(cfg)
        if alg.uses_public:
            alg.use_public(_public())
        alg.configure([24], {**train_cfg()["train"], "eval_batch_size": 4}, data, clients.train)
        alg.setup(model, 1)
        seen = []
        hook = model.body.register_forward_pre_hook(lambda _, a, s=seen: s.append(len(a[0])))
        ctx = ClientCtx(0, model, {}, 0.05, 0.9, 24, round=1, data=data, idx=clients.train[0])
        alg.client_end(ctx)
        hook.remove()
        assert seen and max(seen) == 4, (cfg["name"], seen)
