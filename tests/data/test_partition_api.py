"""make_partition's contract: spec validation, test modes, histogram, JSON file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from fedrepro.data.partitions.make import make_partition, partition_files
from fedrepro.data.prepared import Split, save_split

TRAIN = np.random.default_rng(1).permutation(np.repeat(np.arange(4), 100))
TEST = np.random.default_rng(2).permutation(np.repeat(np.arange(4), 50))
DIR = {"scheme": "dirichlet", "variant": "niid", "beta": 0.5, "clients": 4}


def part(spec: dict, seed: int = 0) -> dict:
    return make_partition(spec, TRAIN, TEST, num_classes=4, seed=seed)


@pytest.mark.parametrize(
    ("spec", "key"),
    [
        ({"scheme": "dirichlett", "clients": 4}, "'scheme'"),
        ({"clients": 4}, "'scheme'"),
        ({"scheme": "iid"}, "'clients'"),
        ({"scheme": "iid", "clients": 0}, "'clients'"),
        ({**DIR, "variant": "fedavg"}, "'variant'"),
        ({k: v for k, v in DIR.items() if k != "variant"}, "'variant'"),
        ({k: v for k, v in DIR.items() if k != "beta"}, "'beta'"),
        ({**DIR, "beta": -1}, "'beta'"),
        ({**DIR, "beta": "0.5"}, "'beta'"),
        ({**DIR, "alpha": 0.5}, "'alpha'"),
        ({**DIR, "min_size": 2.5}, "'min_size'"),
        ({**DIR, "test_mode": "local"}, "'test_mode'"),
        ({**DIR, "seed": 7}, "'seed'"),
        ({**DIR, "variant": "fedhpl_disjoint", "alpha": 0.5}, "'beta' is unknown"),
        ({"scheme": "dirichlet", "variant": "fedhpl_disjoint", "clients": 4}, "'alpha'"),
        ({"scheme": "fedhpl_overlap", "alpha_range": [1.0, 0.1], "clients": 4}, "'alpha_range'"),
        ({"scheme": "fedhpl_overlap", "alpha": 0.5, "draw": "rows", "clients": 4}, "'draw'"),
        ({"scheme": "label_quantity", "k": 5, "clients": 4}, "'k'"),
        (
            {"scheme": "feature_noise", "sigma": 0.1, "noise_param": "sd", "clients": 4},
            "'noise_param'",
        ),
        ({"scheme": "feature_noise", "sigma": 0.1, "clients": 1}, "'denominator'"),
    ],
)
def test_bad_specs_raise_one_line_value_errors_naming_the_key(spec: dict, key: str) -> None:
    with pytest.raises(ValueError, match=key) as info:
        part(spec)
    assert "\n" not in str(info.value)


def test_infeasible_min_size_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="min size"):
        part({**DIR, "min_size": 101})


def test_global_test_mode_leaves_test_lists_empty_and_keeps_train_lists() -> None:
    split = part(DIR)
    glob = part({**DIR, "test_mode": "global"})
    assert glob["test_mode"] == "global"
    assert all(c["test"] == [] for c in glob["clients"])
    assert np.asarray(glob["histogram"]["test"]).sum() == 0
    assert [c["train"] for c in glob["clients"]] == [c["train"] for c in split["clients"]]


def test_split_test_mode_follows_each_clients_label_proportions() -> None:
    result = part(DIR)
    assert result["test_mode"] == "split"
    tests = [np.asarray(c["test"]) for c in result["clients"]]
    joined = np.concatenate(tests)
    assert sorted(joined.tolist()) == list(range(len(TEST)))  # disjoint cover
    train_hist = np.asarray(result["histogram"]["train"])
    test_hist = np.asarray(result["histogram"]["test"])
    assert np.abs(test_hist - train_hist * len(TEST) / len(TRAIN)).max() <= 1


def test_same_scheme_partitions_the_test_split_independently() -> None:
    result = part({**DIR, "test_mode": "same_scheme", "min_size": 5})
    tests = [np.asarray(c["test"]) for c in result["clients"]]
    assert sorted(np.concatenate(tests).tolist()) == list(range(len(TEST)))
    train_hist = np.asarray(result["histogram"]["train"])
    test_hist = np.asarray(result["histogram"]["test"])
    assert np.abs(test_hist - train_hist * len(TEST) / len(TRAIN)).max() > 3  # not proportional


def test_histogram_counts_the_listed_indices() -> None:
    result = part({"scheme": "label_quantity", "k": 2, "clients": 4})
    for c, h_train, h_test in zip(result["clients"], *result["histogram"].values(), strict=True):
        assert h_train == np.bincount(TRAIN[c["train"]], minlength=4).tolist()
        assert h_test == np.bincount(TEST[c["test"]], minlength=4).tolist()
    assert set(result) >= {"scheme", "params", "seed", "num_clients", "num_classes", "test_mode"}
    assert set(result["clients"][0]) == {"train", "test", "transform", "domain", "new"}


def test_partition_files_writes_the_json_from_prepared_splits(tmp_path: Path) -> None:
    def save(name: str, labels: np.ndarray) -> Path:
        split = Split(
            images=torch.zeros(len(labels), 2, 2, 1, dtype=torch.uint8),
            labels=torch.as_tensor(labels, dtype=torch.int64),
            domains=None,
            classes=["a", "b", "c", "d"],
            domain_names=[],
        )
        save_split(tmp_path / f"{name}.safetensors", split, {"dataset": "toy", "split": name})
        return tmp_path / f"{name}.safetensors"

    out = tmp_path / "partitions" / "p.json"
    partition_files(DIR, save("train", TRAIN), save("test", TEST), out, seed=3)
    assert json.loads(out.read_text()) == part(DIR, seed=3)
    assert [p.name for p in out.parent.iterdir()] == ["p.json"]  # no temporary left behind


def test_train_fraction_keeps_a_seeded_share_of_each_clients_images_in_order() -> None:
    full = part({"scheme": "iid", "clients": 4})
    kept = part({"scheme": "iid", "clients": 4, "train_fraction": 0.3})
    assert kept == part({"scheme": "iid", "clients": 4, "train_fraction": 0.3})
    assert kept["params"]["train_fraction"] == 0.3 and "train_fraction" not in full["params"]
    for whole, share in zip(full["clients"], kept["clients"], strict=True):
        assert len(share["train"]) == round(0.3 * len(whole["train"]))
        positions = [whole["train"].index(i) for i in share["train"]]
        assert positions == sorted(positions)  # a subset, in the client's own order
    with pytest.raises(ValueError, match="'train_fraction'"):
        part({"scheme": "iid", "clients": 4, "train_fraction": 0})
