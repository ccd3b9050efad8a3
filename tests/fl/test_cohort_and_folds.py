"""FedPCE's client cohorts (collaborative vs new) and 5-fold validation inside each client."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedrepro.data.partitions.folds import kfold
from fedrepro.fl.build import pooled
from fedrepro.fl.data import DeviceData
from fedrepro.fl.engine import Clients


def test_kfold_is_sklearns_shuffled_kfold_with_random_state_1():
    order = np.random.RandomState(1).permutation(11)  # what KFold(shuffle, random_state=1) cuts
    vals = [kfold(11, 5, k)[1] for k in range(5)]
    assert [len(v) for v in vals] == [3, 2, 2, 2, 2]  # the first n mod K folds one longer
    assert np.array_equal(np.concatenate(vals), order)
    for k in range(5):
        fit, val = kfold(11, 5, k)
        assert sorted([*fit, *val]) == list(range(11)) and not set(fit) & set(val)
    with pytest.raises(ValueError, match="fold 5 of 5"):
        kfold(11, 5, 5)


PART = {
    "test_mode": "split",
    "clients": [
        {"train": [0, 1, 2, 3], "test": [0, 1], "new": False, "transform": None},
        {"train": [4, 5, 6, 7], "test": [2, 3], "new": True, "transform": None},
        {"train": [8, 9, 10, 11], "test": [4], "new": False, "transform": {"kind": "x"}},
    ],
}


def test_cohorts_pick_collaborative_or_new_clients():
    assert len(Clients.from_partition(PART, 5, "cpu")) == 3
    collab = Clients.from_partition(PART, 5, "cpu", "collaborative")
    assert [t.tolist() for t in collab.train] == [[0, 1, 2, 3], [8, 9, 10, 11]]
    assert collab.transforms[0] is None and collab.transforms[1] is not None
    new = Clients.from_partition(PART, 5, "cpu", "new")
    assert [t.tolist() for t in new.test] == [[2, 3]]
    with pytest.raises(ValueError, match="cohort"):
        Clients.from_partition(PART, 5, "cpu", "old")


def test_folds_cut_each_clients_pooled_train_and_test_shares():
    seen = {k: set() for k in range(3)}
    for fold in range(2):
        c = Clients.from_partition(PART, 5, "cpu", cv={"folds": 2, "fold": fold}, num_train=12)
        for k in range(3):
            fit, val = set(c.train[k].tolist()), set(c.test[k].tolist())
            assert not fit & val
            pool = set(PART["clients"][k]["train"]) | {12 + i for i in PART["clients"][k]["test"]}
            assert fit | val == pool
            seen[k] |= val
    assert all(seen[k] == set(c.train[k].tolist()) | set(c.test[k].tolist()) for k in range(3))


def test_pooled_data_shares_one_image_tensor_train_first():
    train = DeviceData(
        torch.zeros(12, 2, 2, 3, dtype=torch.uint8), torch.zeros(12).long(), flip=True
    )
    test = DeviceData(torch.ones(5, 2, 2, 3, dtype=torch.uint8), torch.ones(5).long())
    tr, te = pooled(train, test)
    assert tr.images is te.images and len(tr.labels) == 17 and int(tr.labels[12]) == 1
    assert tr.flip and not te.flip  # augmentation only where training reads


def test_accuracy_is_pooled_per_group():
    from fedrepro.fl.engine import group_accuracy

    correct = [torch.tensor([True, False]), torch.tensor([True, True, True]), torch.tensor([False])]
    groups = ["noise", "jitter", "noise"]
    assert group_accuracy(correct, groups) == {"noise": 100 / 3, "jitter": 100.0}
    # FedPCE's Table 2 caption: the mean over a group's clients (50 % and 0 % for noise)
    assert group_accuracy(correct, groups, pooled=False) == {"noise": 25.0, "jitter": 100.0}
    clients = Clients.from_partition(
        {"clients": [{**c, "group": g} for c, g in zip(PART["clients"], "abc", strict=True)]},
        5,
        "cpu",
    )
    assert clients.groups == ["a", "b", "c"]


def test_images_keeps_the_first_training_images_of_each_client():
    c = Clients.from_partition(PART, 5, "cpu", cv={"folds": 2, "fold": 0}, num_train=12, images=2)
    full = Clients.from_partition(PART, 5, "cpu", cv={"folds": 2, "fold": 0}, num_train=12)
    assert [t.tolist() for t in c.train] == [t[:2].tolist() for t in full.train]
    assert [t.tolist() for t in c.test] == [t.tolist() for t in full.test]  # validation kept


def test_test_images_keeps_the_first_test_images_of_each_client():
    c = Clients.from_partition(PART, 5, "cpu", test_images=1)
    full = Clients.from_partition(PART, 5, "cpu")
    assert [t.tolist() for t in c.test] == [t[:1].tolist() for t in full.test]
    assert [t.tolist() for t in c.train] == [t.tolist() for t in full.train]  # training kept


def test_accuracy_per_class_is_each_clients_class_accuracy_averaged_over_clients():
    """FedHPL's Fig. 5: per class, the mean over clients of the client's accuracy on that
    class; a class a client is not tested on does not count for it, nor an untested class."""
    from fedrepro.fl.engine import class_accuracy

    labels = torch.tensor([0, 0, 1, 1, 3])
    idx = [torch.tensor([0, 1, 2]), torch.tensor([0, 2, 3, 4])]
    correct = [torch.tensor([True, False, True]), torch.tensor([True, False, True, False])]
    # client 0: class 0 50 %, class 1 100 %; client 1: class 0 100 %, class 1 50 %, class 3 0 %
    assert class_accuracy(correct, idx, labels) == {"0": 75.0, "1": 75.0, "3": 0.0}
