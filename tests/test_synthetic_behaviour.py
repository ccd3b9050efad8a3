"""The synthetic analogs behave like data (foundation acceptance): learnable but not
trivial, label skew hurts FedAvg, pretraining helps, and shifts lower accuracy."""

from __future__ import annotations

import pytest
import torch

from fedrepro.algorithms import make_algorithm
from fedrepro.data.partition import make_partition
from fedrepro.data.synthetic import synthesize
from fedrepro.fl.data import DeviceData
from fedrepro.fl.engine import Clients, run_rounds
from fedrepro.fl.local import predict, train_epochs
from fedrepro.models.registry import create_backbone

SIZE = 16
TRAIN = {"batch_size": 32, "optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4}


def _data(name, split, per_class, seed=0):
    s = synthesize(name, split, per_class=per_class, size=SIZE, seed=seed)
    return s, DeviceData(s.images, s.labels)


def _fit(model, data, epochs, idx=None, seed=0):
    idx = torch.arange(len(data.labels)) if idx is None else idx
    gen = torch.Generator().manual_seed(seed)
    train_epochs(model, data, idx, TRAIN, TRAIN["lr"], epochs, gen)
    return model


def _acc(model, data, idx=None):
    idx = torch.arange(len(data.labels)) if idx is None else idx
    correct, _ = predict(model, data, idx)
    return 100.0 * float(correct.float().mean())


def _model(num_classes, seed=0):
    torch.manual_seed(seed)
    return create_backbone("resnet26_mini", num_classes=num_classes)


ANALOGS = ["cifar10", "cifar100", "svhn", "fmnist", "mnist", "usps", "synthdigits", "mnistm",
           "tinyimagenet", "domainnet", "office10", "cifar101", "pretrain_source"]  # fmt: skip


@pytest.mark.parametrize("name", ANALOGS)
def test_centralized_training_is_far_from_chance_and_from_perfect(name):
    per_class = 10 if name in ("cifar100", "tinyimagenet", "pretrain_source") else 40
    train, tr = _data(name, "train", per_class)
    _, te = _data(name, "test", max(2, per_class // 2))
    k = len(train.classes)
    acc = _acc(_fit(_model(k), tr, epochs=6), te)
    chance = 100.0 / k
    assert acc > max(3 * chance, chance + 8), f"{name}: {acc:.1f}% vs chance {chance:.1f}%"
    assert acc < 99.5, f"{name}: {acc:.1f}% is too easy"


def test_cifar10c_corruption_lowers_accuracy():
    _, tr = _data("cifar10", "train", 40)
    _, clean = _data("cifar10", "test", 20)
    model = _fit(_model(10), tr, epochs=6)
    corrupted = synthesize("cifar10c", "test", per_class=20, size=SIZE, seed=0)
    severe = corrupted.domains % 5 == 4
    cdata = DeviceData(corrupted.images[severe], corrupted.labels[severe])
    assert _acc(model, cdata) < _acc(model, clean) - 5


def test_domain_shift_lowers_accuracy():
    train, tr = _data("domainnet", "train", 40)
    test, te = _data("domainnet", "test", 20)
    src = torch.nonzero(train.domains == 0).flatten()
    model = _fit(_model(10), tr, epochs=6, idx=src)
    same = torch.nonzero(test.domains == 0).flatten()
    other = torch.nonzero(test.domains != 0).flatten()
    assert _acc(model, te, other) < _acc(model, te, same) - 5


def test_pretrained_backbone_beats_random_init_when_fine_tuned():
    _, src = _data("pretrain_source", "train", 12)
    pre = _fit(create_backbone("resnet26_mini", num_classes=src.labels.max().item() + 1), src, 4)
    state = {k: v for k, v in pre.state_dict().items() if not k.startswith("linears")}
    _, tr = _data("cifar10", "train", 8)
    _, te = _data("cifar10", "test", 20)
    scratch = _fit(_model(10, seed=1), tr, epochs=3)
    tuned = _model(10, seed=1)
    tuned.load_state_dict(state, strict=False)
    tuned = _fit(tuned, tr, epochs=3)
    assert _acc(tuned, te) > _acc(scratch, te) + 3


def _fedavg_acc(partition_spec):
    train, tr = _data("cifar10", "train", 40)
    test, te = _data("cifar10", "test", 20)
    part = make_partition(partition_spec, train.labels.numpy(), test.labels.numpy(),
                          num_classes=10, seed=0)  # fmt: skip
    clients = Clients.from_partition(part, len(test.labels), "cpu")
    cfg = {"seed": 0, "train": {**TRAIN, "rounds": 6, "local_epochs": 2, "fraction": 1.0}}
    state = run_rounds(cfg, _model(10), make_algorithm({"name": "fedavg"}), tr, te, clients,
                       log=lambda _: None)  # fmt: skip
    return state.history[-1]["acc"]


def test_fedavg_under_dirichlet_0_1_loses_against_iid():
    base = {"clients": 10, "test_mode": "global"}
    iid = _fedavg_acc({**base, "scheme": "iid"})
    skewed = _fedavg_acc({**base, "scheme": "dirichlet", "variant": "niid", "beta": 0.1,
                          "min_size": 2})  # fmt: skip
    assert skewed < iid - 5, (iid, skewed)
