"""Label-skew schemes: IID, the Dirichlet variants, FedHPL's overlapping Dir and #C=k."""

from __future__ import annotations

import numpy as np
import pytest

from fedrepro.data.partitions.common import cut_points
from fedrepro.data.partitions.make import make_partition


def balanced_labels(per_class: int, num_classes: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(num_classes), per_class))


TRAIN = balanced_labels(200, 10, seed=1)
TEST = balanced_labels(40, 10, seed=2)


def part(spec: dict, seed: int = 0, train: np.ndarray = TRAIN, test: np.ndarray = TEST) -> dict:
    return make_partition(spec, train, test, num_classes=10, seed=seed)


def trains(result: dict) -> list[np.ndarray]:
    return [np.asarray(c["train"]) for c in result["clients"]]


def assert_disjoint(lists: list[np.ndarray]) -> np.ndarray:
    joined = np.concatenate(lists)
    assert len(np.unique(joined)) == len(joined), "clients share indices"
    return joined


def mean_label_entropy(result: dict) -> float:
    hist = np.asarray(result["histogram"]["train"], dtype=float)
    probs = hist / hist.sum(axis=1, keepdims=True)
    logs = np.log(np.where(probs > 0, probs, 1.0))
    return float(-(probs * logs).sum(axis=1).mean())


def test_iid_is_an_equal_disjoint_cover() -> None:
    lists = trains(part({"scheme": "iid", "clients": 7}))
    assert sorted(assert_disjoint(lists).tolist()) == list(range(len(TRAIN)))
    sizes = [len(x) for x in lists]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize(
    "params",
    [
        {"variant": "niid", "beta": 0.5},
        {"variant": "fedpce", "beta": 0.5},
        {"variant": "fedhpl_disjoint", "alpha": 0.5},
    ],
)
def test_dirichlet_variants_are_disjoint_covers(params: dict) -> None:
    result = part({"scheme": "dirichlet", "clients": 8, **params})
    assert sorted(assert_disjoint(trains(result)).tolist()) == list(range(len(TRAIN)))


def test_dirichlet_is_reproducible_by_seed_and_differs_across_seeds() -> None:
    spec = {"scheme": "dirichlet", "variant": "niid", "beta": 0.5, "clients": 8}
    assert part(spec, seed=3) == part(spec, seed=3)
    assert trains(part(spec, seed=3))[0].tolist() != trains(part(spec, seed=4))[0].tolist()


def test_dirichlet_min_size_is_respected() -> None:
    # at beta=0.3 about 3 in 4 unconstrained draws leave some client below 40 samples
    spec = {"scheme": "dirichlet", "variant": "niid", "beta": 0.3, "clients": 20, "min_size": 40}
    for seed in range(5):
        assert min(len(x) for x in trains(part(spec, seed=seed))) >= 40


def test_small_beta_is_more_skewed_than_large_beta() -> None:
    def entropy(beta: float) -> float:
        spec = {"scheme": "dirichlet", "variant": "niid", "beta": beta, "clients": 10}
        return np.mean([mean_label_entropy(part(spec, seed=s)) for s in range(3)])

    assert entropy(0.1) < entropy(1.0) - 0.3
    assert entropy(1.0) < entropy(100.0)
    assert entropy(100.0) > 0.95 * np.log(10)  # beta -> inf gives near-equal class shares


def test_fedins_truncates_each_class_to_its_first_k_times_train_num_indices() -> None:
    spec = {"scheme": "dirichlet", "variant": "fedins", "beta": 0.2, "clients": 5, "min_size": 1}
    used = np.sort(assert_disjoint(trains(part(spec))))
    assert len(used) == 10 * 5 * 2  # C·K·train_num
    expected = np.sort(np.concatenate([np.flatnonzero(c == TRAIN)[:10] for c in range(10)]))
    assert used.tolist() == expected.tolist()
    spec_3 = {**spec, "train_num": 3}
    assert sum(len(x) for x in trains(part(spec_3))) == 10 * 5 * 3


def test_fedpce_cuts_test_with_the_train_proportions() -> None:
    spec = {"scheme": "dirichlet", "variant": "fedpce", "beta": 0.3, "clients": 6}
    result = part(spec)
    train_hist = np.asarray(result["histogram"]["train"])
    test_hist = np.asarray(result["histogram"]["test"])
    ratio = len(TEST) / len(TRAIN)
    # round() cuts put each piece within 1 of p·n, in train and in test alike
    assert np.abs(test_hist - train_hist * ratio).max() <= 1 + ratio
    assert min(len(c["test"]) for c in result["clients"]) >= 10
    assert_disjoint([np.asarray(c["test"]) for c in result["clients"]])


def test_fedhpl_alpha_is_drawn_from_its_range_with_the_seed() -> None:
    spec = {
        "scheme": "dirichlet",
        "variant": "fedhpl_disjoint",
        "alpha_range": [0.2, 0.9],
        "min_share": 0.05,
        "clients": 5,
    }
    alphas = [part(spec, seed=s)["params"]["alpha"] for s in range(4)]
    assert all(0.2 <= a <= 0.9 for a in alphas)
    assert len(set(alphas)) == 4
    assert part(spec, seed=1)["params"]["alpha"] == alphas[1]
    for s in range(3):
        assert min(len(x) for x in trains(part(spec, seed=s))) >= 0.05 * len(TRAIN)


def test_fedhpl_dir_draws_each_class_over_the_clients_and_the_clients_overlap() -> None:
    """App. B.2's Dir ("for each class c, the number of samples in class c on client k"):
    each class's shares over the K clients follow Dir_K(α) and every client samples its
    share from the whole class pool, so together the clients hold the training set (Table
    10 prices Dir's upload as IID's) and they overlap. The other reading (a client's shares
    over the classes) gave the five clients about K/C of it."""
    labels = balanced_labels(50, 100, seed=3)  # 5,000 images, 100 classes
    alpha, k = 0.5, 5
    squares = []
    for seed in range(3):
        spec = {"scheme": "fedhpl_overlap", "alpha": alpha, "clients": k, "test_mode": "global"}
        result = make_partition(spec, labels, labels[:0], num_classes=100, seed=seed)
        lists = trains(result)
        assert all(len(np.unique(x)) == len(x) for x in lists)  # no repeats within a client
        joined = np.concatenate(lists)
        assert len(joined) == len(labels)  # the clients together: the whole training set
        assert len(np.unique(joined)) < 0.9 * len(joined)  # ... with overlap
        shares = np.asarray(result["histogram"]["train"]) / 50  # [K, C]
        assert np.allclose(shares.sum(axis=0), 1.0)  # every class shared out over the clients
        squares += (shares**2).sum(axis=0).tolist()
    # E[Σ_k q_k²] = (α + 1) / (Kα + 1) under Dir_K(α): 0.43 here (Dir_C(α) per client: 0.02)
    assert abs(np.mean(squares) - (alpha + 1) / (k * alpha + 1)) < 0.05


def test_fedhpl_dir_per_client_reading_takes_floor_shares_of_each_class() -> None:
    """``draw: per_client``, the other reading: client k's shares over the classes, so each
    client holds about one class's worth of images."""
    spec = {"scheme": "fedhpl_overlap", "draw": "per_client", "alpha": 0.5, "clients": 5}
    result = part(spec)
    lists = trains(result)
    assert all(len(np.unique(x)) == len(x) for x in lists)  # no duplicates within a client
    joined = np.concatenate(lists)
    assert len(np.unique(joined)) < len(joined)  # ... but clients overlap
    hist = np.asarray(result["histogram"]["train"])
    assert hist.max() <= 200
    # client shares q_k sum to 1, so each client holds ~ one class's worth of samples
    assert np.all(hist.sum(axis=1) >= 200 - 10) and np.all(hist.sum(axis=1) <= 200)


@pytest.mark.parametrize(("k", "clients"), [(1, 10), (2, 10), (3, 25)])
def test_label_quantity_gives_k_labels_and_even_class_splits(k: int, clients: int) -> None:
    result = part({"scheme": "label_quantity", "k": k, "clients": clients})
    hist = np.asarray(result["histogram"]["train"])
    assert np.all((hist > 0).sum(axis=1) == k)
    assert all(hist[i, i % 10] > 0 for i in range(clients))
    for c in range(10):
        owned = hist[:, c][hist[:, c] > 0]
        assert owned.sum() == 200 and owned.max() - owned.min() <= 1
    assert_disjoint(trains(result))


def test_label_quantity_with_k_equal_c_splits_every_class_over_all_clients() -> None:
    hist = np.asarray(
        part({"scheme": "label_quantity", "k": 10, "clients": 7})["histogram"]["train"]
    )
    assert np.all(hist.max(axis=0) - hist.min(axis=0) <= 1)
    assert np.all(hist.sum(axis=0) == 200)


def test_cut_points_floor_for_niid_round_for_fedpce() -> None:
    props = np.array([0.35, 0.65])
    assert cut_points(props, 10, "floor").tolist() == [3]
    assert cut_points(props, 10, "round").tolist() == [4]


OWN_PROTOCOL = {"scheme": "label_quantity", "k": [2, 4, 6, 8, 10], "clients": 5}


def test_label_quantity_takes_one_class_count_per_client() -> None:
    """FedHPL Figs. 7-9: the five clients hold 2, 4, 6, 8 and 10 classes."""
    hist = np.asarray(part(OWN_PROTOCOL)["histogram"]["train"])
    assert (hist > 0).sum(axis=1).tolist() == [2, 4, 6, 8, 10]
    assert hist.sum() == len(TRAIN)  # every class is owned (client 4 holds all ten)
    with pytest.raises(ValueError, match="'k'"):
        part({**OWN_PROTOCOL, "k": [2, 4, 6]})


def test_train_holdout_tests_each_client_on_a_fifth_of_its_own_training_images() -> None:
    """App. C.3's protocol: each class of a client's share cut 80/20, the 20 % its test list,
    indices into the training split; the training partition is otherwise the scheme's."""
    scheme = part(OWN_PROTOCOL)
    held = part({**OWN_PROTOCOL, "test_mode": "train_holdout"})
    assert held["test_mode"] == "train_holdout" and held["params"]["holdout"] == 0.2
    for whole, client in zip(scheme["clients"], held["clients"], strict=True):
        train, test = np.asarray(client["train"]), np.asarray(client["test"])
        assert not set(train) & set(test)
        assert sorted([*train, *test]) == sorted(whole["train"])
        for c in np.unique(TRAIN[whole["train"]]):
            owned = int((TRAIN[whole["train"]] == c).sum())
            assert int((TRAIN[test] == c).sum()) == round(0.2 * owned)
    hist = np.asarray(held["histogram"]["test"])  # counted on the training labels
    assert (hist > 0).sum(axis=1).tolist() == [2, 4, 6, 8, 10]
    with pytest.raises(ValueError, match="'holdout'"):
        part({**OWN_PROTOCOL, "test_mode": "train_holdout", "holdout": 1.0})
