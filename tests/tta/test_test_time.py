"""Test-time methods on the adapt stage (FedICON §4.2, §5.1; docs/methods/fedicon.md): each
adapts only its own set on the client's own unlabelled test images, never the trained run's
files or another client, and a killed adaptation job resumes to the same numbers."""

from __future__ import annotations

import hashlib
import math

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from fedrepro.algorithms.fedicon import OnlineICONPredictor
from fedrepro.algorithms.test_time import T3APredictor, batch_norm_affine, entropy
from fedrepro.data.prepared import Split, save_split
from fedrepro.fl.algorithm import ClientCtx
from fedrepro.fl.build import shifted_test, shifted_test_images
from fedrepro.fl.contrastive import online_contrastive_loss, representation
from fedrepro.jobs.adapt import adapt_run, prepare_adapt
from fedrepro.jobs.train import train_run
from fedrepro.models.cnn import FedIconCNN
from tests.job_helpers import VIEWS, assert_adaptation_resumes, toy_job

SHIFT = {"kind": "corrupt", "corruptions": "common9", "severity": 5}


def trained(tmp, algorithm="fedavg"):
    """A FedAvg-style run of the simple CNN with batch norm, 4 clients, each its own test."""
    spec = {"scheme": "dirichlet", "variant": "niid", "beta": 1.0, "clients": 4,
            "test_mode": "split"}  # fmt: skip
    cfg = toy_job(tmp, rounds=2, algorithm=algorithm, spec=spec, eval_every=1,
                  model={"backbone": "cnn_fedicon", "pretrained": False, "img_size": 32},
                  train={"rounds": 2, "local_epochs": 1, "batch_size": 16, "optimizer": "sgd",
                         "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4,
                         "fraction": 1.0})  # fmt: skip
    run = tmp / "run"
    train_run(cfg, tmp / "data", tmp / "part.json", run, device="cpu")
    return run


def _files(run) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run.iterdir()}


def _adapt(tmp, run, adapt, spy=None):
    job, _ = prepare_adapt(adapt, run, tmp / "data", tmp / "part.json", device="cpu")
    before = {n: p.detach().clone() for n, p in job.model.named_parameters()}
    if spy is not None:
        inner = job.algorithm.objective

        def objective(ctx, x, y):
            spy.append((ctx.round, ctx.client, x.shape[0], y.clone()))
            return inner(ctx, x, y)

        job.algorithm.objective = objective
    state = job.run(None, log=lambda _: None)
    return job, before, state


def test_tent_adapts_only_batch_norm_affine_on_unlabelled_test_images(tmp_path):
    run = trained(tmp_path)
    files = _files(run)
    seen = []
    job, before, state = _adapt(tmp_path, run, {"method": "tent", "epochs": 2}, seen)
    bn = batch_norm_affine(job.model)
    assert bn == {"bn1.weight", "bn1.bias", "bn2.weight", "bn2.bias"}
    assert state.shared == {}  # nothing sent or averaged
    for k in range(4):
        for name, value in state.local[k].items():
            if name in bn:
                assert not torch.equal(value, before[name]), (k, name)
            else:
                assert torch.equal(value, before[name]), (k, name)  # bit-identical
    assert seen and all(bool((y == -1).all()) for *_, y in seen)  # labels never seen
    sizes = {k: len(job.clients.test[k]) for k in range(4)}
    per_client = {}
    for r, k, n, _ in seen:
        per_client[(r, k)] = per_client.get((r, k), 0) + n
    assert all(n <= sizes[k] and n >= sizes[k] - 1 for (r, k), n in per_client.items())
    assert all(m.running_mean is None for m in job.model.modules() if hasattr(m, "running_mean"))
    assert _files(run) == files  # the trained run's files untouched


def test_tent_refuses_a_model_without_batch_norm(tmp_path):
    cfg = toy_job(tmp_path, rounds=1, algorithm="fedavg", eval_every=1,
                  train={"rounds": 1, "local_epochs": 1, "batch_size": 16, "optimizer": "sgd",
                         "lr": 0.05, "momentum": 0.0, "fraction": 1.0})  # fmt: skip
    train_run(cfg, tmp_path / "data", tmp_path / "part.json", tmp_path / "run", device="cpu")
    with pytest.raises(ValueError, match="no batch norm"):
        _adapt(tmp_path, tmp_path / "run", {"method": "tent"})


def test_t3a_changes_no_weights_and_starts_from_the_classifier_rows():
    torch.manual_seed(0)
    model = FedIconCNN(num_classes=5).eval()
    x = torch.randn(7, 3, 32, 32)
    predictor = T3APredictor(model, filter_k=3)
    z = representation(model, x)
    rows = F.normalize(model.get_classifier().weight, dim=1)
    assert torch.equal(predictor.scores(z).argmax(1), (z @ rows.T).argmax(1))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        predictor(x)
        predictor(torch.randn(9, 3, 32, 32))
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    counts = torch.bincount(predictor.labels, minlength=5)
    assert int(counts.max()) <= 3  # at most filter_k supports per class


def test_t3a_and_evaluate_train_nothing(tmp_path):
    run = trained(tmp_path)
    for method in ("t3a", "evaluate"):
        job, before, state = _adapt(tmp_path, run, {"method": method})
        assert job.algorithm.trainable == []
        for name, p in job.model.named_parameters():
            assert torch.equal(p, before[name]), (method, name)
        for k in range(4):
            for name, value in state.local[k].items():
                assert torch.equal(value, job.model.state_dict()[name]), (method, k, name)


def test_each_client_starts_from_its_own_local_tensors(tmp_path):
    run = trained(tmp_path, "fedbn")
    saved = load_file(run / "state.safetensors")
    job, _, state = _adapt(tmp_path, run, {"method": "evaluate"})
    for k in range(4):
        for name in ("bn1.weight", "bn2.bias", "bn1.running_mean"):
            assert torch.equal(state.local[k][name], saved[f"client{k}.{name}"]), (k, name)
    assert not torch.equal(state.local[0]["bn1.weight"], state.local[1]["bn1.weight"])


def test_fedicon_test_personalises_the_classifier_then_adapts_the_encoder(tmp_path):
    run = trained(tmp_path)
    seen = []
    adapt = {"method": "fedicon_test", "classifier_epochs": 1, "tta_epochs": 1, "views": VIEWS}
    job, before, state = _adapt(tmp_path, run, adapt, seen)
    assert {r for r, *_ in seen} == {1, 2}
    assert all(bool((y >= 0).all()) for r, *_, y in seen if r == 1)  # labelled training data
    assert all(bool((y == -1).all()) for r, *_, y in seen if r == 2)  # unlabelled test
    assert all(n % 2 == 0 for r, _, n, _ in seen if r == 2)  # two views
    for k in range(4):
        local = state.local[k]
        assert not torch.equal(local["classifier.weight"], before["classifier.weight"])
        assert not torch.equal(local["conv1.weight"], before["conv1.weight"])
    only_cls = {**adapt, "tta_epochs": 0}
    _, before, state = _adapt(tmp_path, run, only_cls)
    changed = {n for n in before if not torch.equal(state.local[0][n], before[n])}
    assert changed == {"classifier.weight"}


def test_adapting_one_client_never_changes_another(tmp_path):
    run = trained(tmp_path)
    adapt = {"method": "fedicon_test", "classifier_epochs": 1, "tta_epochs": 1, "views": VIEWS}
    _, _, state = _adapt(tmp_path, run, adapt)
    job, _ = prepare_adapt(adapt, run, tmp_path / "data", tmp_path / "part.json", device="cpu")
    idx = job.clients.test[0]
    job.test.images[idx] = 255 - job.test.images[idx]  # client 0's test set changes
    other = job.run(None, log=lambda _: None)
    assert any(not torch.equal(other.local[0][n], t) for n, t in state.local[0].items())
    for k in (1, 2, 3):
        for name, value in state.local[k].items():
            assert torch.equal(other.local[k][name], value), (k, name)


def test_shift_corrupts_test_images_the_same_way_for_one_seed():
    images = (torch.rand(20, 16, 16, 3, generator=torch.Generator().manual_seed(0)) * 255).to(
        torch.uint8
    )
    a = shifted_test_images(images, SHIFT, seed=3)
    assert torch.equal(a, shifted_test_images(images, SHIFT, seed=3))
    assert not torch.equal(a, images)
    assert not torch.equal(a, shifted_test_images(images, SHIFT, seed=4))
    with pytest.raises(ValueError, match="kind"):
        shifted_test({"kind": "blur"}, 0, None, {}, None, ".")


def test_dataset_shift_shares_the_other_test_split_out_by_label_distribution(tmp_path):
    """FedICON's attribute shift: every client's test set drawn from another dataset's test
    split (CIFAR-10.1), disjointly, class by class in proportion to its train counts."""
    run = trained(tmp_path)
    gen = torch.Generator().manual_seed(1)
    labels = torch.arange(100) % 4
    images = (torch.rand(100, 12, 12, 3, generator=gen) * 255).to(torch.uint8)
    split = Split(images, labels, None, ["a", "b", "c", "d"], [])
    save_split(tmp_path / "other" / "test.safetensors", split, {"dataset": "other"})
    shift = {"kind": "dataset", "dataset": "other"}
    job, _ = prepare_adapt({"method": "evaluate", "shift": shift}, run, tmp_path / "data",
                           tmp_path / "part.json", device="cpu")  # fmt: skip
    assert torch.equal(job.test.labels, labels)
    tests = [t.tolist() for t in job.clients.test]
    assert sorted(sum(tests, [])) == sorted(set(sum(tests, [])))  # disjoint
    train = job.train.labels
    for c in range(4):
        counts = torch.tensor([int((train[idx] == c).sum()) for idx in job.clients.train])
        got = torch.tensor([sum(labels[i] == c for i in t) for t in tests])
        want = counts / counts.sum() * 25
        assert int(got.sum()) == 25 and bool(((got - want).abs() <= 1).all()), (c, got, want)
    clean = adapt_run({"method": "evaluate"}, run, tmp_path / "data", tmp_path / "part.json",
                      tmp_path / "clean", device="cpu")  # fmt: skip
    shifted = adapt_run({"method": "evaluate", "shift": shift}, run, tmp_path / "data",
                        tmp_path / "part.json", tmp_path / "shifted", device="cpu")  # fmt: skip
    assert clean["final_acc_per_client"] != shifted["final_acc_per_client"]


def test_evaluate_under_shift_differs_from_the_clean_evaluation(tmp_path):
    run = trained(tmp_path)
    clean = adapt_run({"method": "evaluate"}, run, tmp_path / "data", tmp_path / "part.json",
                      tmp_path / "clean", device="cpu")  # fmt: skip
    shifted = adapt_run({"method": "evaluate", "shift": SHIFT}, run, tmp_path / "data",
                        tmp_path / "part.json", tmp_path / "shifted", device="cpu")  # fmt: skip
    assert clean["final_acc_per_client"] != shifted["final_acc_per_client"]


@pytest.mark.parametrize("method", ["tent", "eata", "fedicon_test"])
def test_a_killed_adaptation_resumes_to_identical_numbers(tmp_path, method):
    run = trained(tmp_path)
    adapt = {"method": method, "classifier_epochs": 1, "tta_epochs": 2, "views": VIEWS}
    if method != "fedicon_test":
        adapt = {"method": method, "epochs": 3}
    assert_adaptation_resumes(adapt, run, tmp_path)


def test_eata_adapts_batch_norm_affine_and_skips_unreliable_batches(tmp_path):
    run = trained(tmp_path)
    job, before, state = _adapt(tmp_path, run, {"method": "eata", "fisher_size": 32})
    bn = batch_norm_affine(job.model)
    for k in range(4):
        for name, value in state.local[k].items():
            if name not in bn:
                assert torch.equal(value, before[name]), (k, name)
    assert any(not torch.equal(state.local[0][n], before[n]) for n in bn)
    eata = job.algorithm
    assert set(eata.fisher) == {0, 1, 2, 3}
    assert set(eata.fisher[0]) == bn
    ctx = ClientCtx(0, job.model, {}, 0.1, 0.0, 1, round=1)
    x = torch.randn(6, 3, 32, 32)
    eata.e_margin = 1e-9  # every sample unreliable: no step at all
    assert eata.objective(ctx, x, None) is None


def test_eata_without_anchor_or_filters_is_entropy_weighted_tent(tmp_path):
    run = trained(tmp_path)
    # E0 = ln C (no softmax is above the uniform's entropy), ε beyond any cosine
    adapt = {"method": "eata", "fisher_alpha": 0.0, "e_margin": 1.0, "d_margin": 2.0,
             "fisher_size": 16}  # fmt: skip
    job, _ = prepare_adapt(adapt, run, tmp_path / "data", tmp_path / "part.json", device="cpu")
    job.algorithm.setup(job.model, 4)
    ctx = ClientCtx(0, job.model, {}, 0.1, 0.0, 1, round=1, data=job.train,
                    idx=job.clients.train[0])  # fmt: skip
    job.algorithm.client_begin(ctx)
    x = torch.randn(6, 3, 32, 32)
    loss = job.algorithm.objective(ctx, x, None)
    out = job.model(x)
    ent = entropy(out)
    expected = (ent * torch.exp(math.log(out.shape[1]) - ent)).mean()
    assert math.isfinite(float(expected.detach()))
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-6)


def test_the_runs_fedthes_ensemble_on_a_fedthe_run_and_trains_nothing(tmp_path):
    run = trained(tmp_path, "fedthe")
    saved = load_file(run / "state.safetensors")
    assert "client0.fedthe_head.weight" in saved and "global.fedthe_global_rep" in saved
    metrics = adapt_run({"method": "the", "the_steps": 5}, run, tmp_path / "data",
                        tmp_path / "part.json", tmp_path / "the", device="cpu")  # fmt: skip
    assert len(metrics["final_acc_per_client"]) == 4
    assert metrics["params"]["trainable"] == 0
    job, _ = prepare_adapt({"method": "the"}, run, tmp_path / "data", tmp_path / "part.json",
                           device="cpu")  # fmt: skip
    assert job.cfg["algorithm"]["lr"] == pytest.approx(0.5)  # 10 × the run's 0.05


def test_online_fedicon_adapts_while_predicting_each_client_on_its_own(tmp_path):
    """§4.2's online variant: the same seed gives the same numbers, adapting moves the
    predictions, and one client's test images never move another client's numbers."""
    run = trained(tmp_path)
    base = {"method": "fedicon_test", "classifier_epochs": 1, "tta_epochs": 0}
    online = {**base, "online": True, "memory": 16, "views": VIEWS}
    args = (run, tmp_path / "data", tmp_path / "part.json")
    plain = adapt_run(base, *args, tmp_path / "plain", device="cpu")
    a = adapt_run(online, *args, tmp_path / "a", device="cpu")
    b = adapt_run(online, *args, tmp_path / "b", device="cpu")
    assert (a["final_acc_per_client"], a["final_loss"]) == (
        b["final_acc_per_client"],
        b["final_loss"],
    )
    assert a["final_loss"] != plain["final_loss"]
    job, _ = prepare_adapt(online, *args, device="cpu")
    idx = job.clients.test[0]
    job.test.images[idx] = 255 - job.test.images[idx]
    moved = job.run(None, log=lambda _: None).history[-1]["acc_per_client"]
    assert moved[1:] == a["final_acc_per_client"][1:]
    with pytest.raises(ValueError, match="online needs tta_epochs: 0"):
        adapt_run({**online, "tta_epochs": 1}, *args, tmp_path / "bad", device="cpu")


def test_online_predictor_trains_the_encoder_only_and_fills_its_memory_with_test_samples():
    torch.manual_seed(0)
    model = FedIconCNN(num_classes=3, in_chans=3, img_size=16)
    head = {n: p.detach().clone() for n, p in model.get_classifier().named_parameters()}
    conv = model.conv1.weight.detach().clone()
    memory = torch.randn(4, 3, 16, 16)
    x = torch.randn(6, 3, 16, 16)
    gen = torch.Generator().manual_seed(0)
    pred = OnlineICONPredictor(model, memory, lambda v, g: v.flip(3), gen, 0.1, 1, 0.05, 0.9, 0.0)
    with torch.no_grad():
        logits = pred(x)
    assert logits.shape == (6, 3)
    assert not torch.equal(model.conv1.weight, conv)
    assert all(torch.equal(p, head[n]) for n, p in model.get_classifier().named_parameters())
    kept = sum(any(torch.equal(m, xi) for xi in x) for m in pred.memory)
    assert 1 <= kept <= 4 and not torch.equal(memory, pred.memory)


def test_online_loss_is_the_twin_against_the_memory():
    g = torch.Generator().manual_seed(0)
    z = F.normalize(torch.randn(6, 8, generator=g), dim=1)
    x, twin, memory = z[:1], z[1:2], z[2:]
    sims = torch.cat([x @ twin.T, x @ memory.T], dim=1).flatten() / 0.5
    want = -(sims[0] - torch.logsumexp(sims, 0))
    assert torch.allclose(online_contrastive_loss(x, twin, memory, 0.5), want)
