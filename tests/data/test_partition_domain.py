"""Domain schemes: one domain per client (or m per domain) and leave-one-domain-out."""

from __future__ import annotations

import numpy as np
import pytest

from fedrepro.data.partitions.make import make_partition

NAMES = ["mnist", "svhn", "usps"]
_RNG = np.random.default_rng(0)
TRAIN_LABELS = _RNG.integers(0, 5, 900)
TRAIN_DOMAINS = np.repeat(np.arange(3), [400, 300, 200])
TEST_LABELS = _RNG.integers(0, 5, 300)
TEST_DOMAINS = np.repeat(np.arange(3), [100, 120, 80])


def part(spec: dict, seed: int = 0) -> dict:
    return make_partition(
        spec,
        TRAIN_LABELS,
        TEST_LABELS,
        train_domains=TRAIN_DOMAINS,
        test_domains=TEST_DOMAINS,
        domain_names=NAMES,
        num_classes=5,
        seed=seed,
    )


def test_one_client_per_domain() -> None:
    clients = part({"scheme": "domain", "clients": 3})["clients"]
    assert [c["domain"] for c in clients] == NAMES
    for d, c in enumerate(clients):
        assert sorted(c["train"]) == np.flatnonzero(d == TRAIN_DOMAINS).tolist()
        assert sorted(c["test"]) == np.flatnonzero(d == TEST_DOMAINS).tolist()


def test_clients_per_domain_split_each_domain_evenly() -> None:
    clients = part({"scheme": "domain", "clients": 6, "clients_per_domain": 2})["clients"]
    assert [c["domain"] for c in clients] == ["mnist", "mnist", "svhn", "svhn", "usps", "usps"]
    for i, c in enumerate(clients):
        assert set(TRAIN_DOMAINS[c["train"]]) == {i // 2}
        assert set(TEST_DOMAINS[c["test"]]) == {i // 2}
    for d in range(3):
        pair = [np.asarray(c["train"]) for c in clients[2 * d : 2 * d + 2]]
        assert abs(len(pair[0]) - len(pair[1])) <= 1
        assert sorted(np.concatenate(pair).tolist()) == np.flatnonzero(d == TRAIN_DOMAINS).tolist()


def test_domain_subset_by_name_and_new_clients() -> None:
    spec = {"scheme": "domain", "clients": 10, "clients_per_domain": 5, "domains": ["usps", "svhn"]}
    result = part({**spec, "new_fraction": 0.2})
    assert [c["domain"] for c in result["clients"]] == ["usps"] * 5 + ["svhn"] * 5
    assert [sum(c["new"] for c in result["clients"][g * 5 : g * 5 + 5]) for g in range(2)] == [1, 1]


def test_leave_one_domain_out_tests_every_client_on_the_held_out_domain() -> None:
    result = part({"scheme": "leave_one_domain_out", "held_out": "svhn", "clients": 2})
    held = np.flatnonzero(TEST_DOMAINS == 1).tolist()
    assert [c["domain"] for c in result["clients"]] == ["mnist", "usps"]
    for c, d in zip(result["clients"], [0, 2], strict=True):
        assert set(TRAIN_DOMAINS[c["train"]]) == {d}
        assert sorted(c["test"]) == held
    assert result["test_mode"] == "held_out_domain"
    assert result["params"]["held_out"] == "svhn"
    by_index = part({"scheme": "leave_one_domain_out", "held_out": 1, "clients": 2})
    assert by_index["clients"] == result["clients"]


@pytest.mark.parametrize(
    ("spec", "key"),
    [
        ({"scheme": "leave_one_domain_out", "held_out": "mnistm", "clients": 2}, "'held_out'"),
        ({"scheme": "leave_one_domain_out", "held_out": 0, "clients": 3}, "'clients'"),
        ({"scheme": "leave_one_domain_out", "clients": 2}, "'held_out'"),
        (
            {"scheme": "leave_one_domain_out", "held_out": 0, "clients": 2, "test_mode": "split"},
            "'test_mode'",
        ),
        ({"scheme": "domain", "clients": 4}, "'clients'"),
        ({"scheme": "domain", "clients": 1, "domains": ["svhn", "svhn"]}, "'domains'"),
    ],
)
def test_bad_domain_specs_name_the_key(spec: dict, key: str) -> None:
    with pytest.raises(ValueError, match=key):
        part(spec)


def test_domain_scheme_needs_domain_ids() -> None:
    with pytest.raises(ValueError, match="domain"):
        make_partition(
            {"scheme": "domain", "clients": 3}, TRAIN_LABELS, TEST_LABELS, num_classes=5, seed=0
        )


def test_cap_fraction_keeps_the_first_images_of_every_domain() -> None:
    """FedIns DomainNet: int(min_len · 0.0125) images per client, the first of each domain."""
    result = part({"scheme": "domain", "clients": 3, "cap_fraction": 0.0125})
    cap = int(200 * 0.0125)
    assert result["params"]["cap"] == cap == 2
    for d, c in enumerate(result["clients"]):
        assert sorted(c["train"]) == np.flatnonzero(d == TRAIN_DOMAINS)[:cap].tolist()
        # the test split stays the whole domain, whatever classes the capped share holds
        assert sorted(c["test"]) == np.flatnonzero(d == TEST_DOMAINS).tolist()
    with pytest.raises(ValueError, match="'cap_fraction'"):
        part({"scheme": "domain", "clients": 6, "clients_per_domain": 2, "cap_fraction": 0.001})
