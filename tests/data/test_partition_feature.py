"""Feature-skew schemes: NIID's Gau(σ) clients and FedPCE's degradation clients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedrepro.data.partitions.make import make_partition
from fedrepro.data.transforms.clients import apply_transform

TRAIN = np.random.default_rng(1).permutation(np.repeat(np.arange(10), 120))
TEST = np.random.default_rng(2).permutation(np.repeat(np.arange(10), 60))


def part(spec: dict, seed: int = 0) -> dict:
    return make_partition(spec, TRAIN, TEST, num_classes=10, seed=seed)


def test_gaussian_noise_clients_follow_the_niid_code_by_default() -> None:
    result = part({"scheme": "feature_noise", "sigma": 0.1, "clients": 5})
    transforms = [c["transform"] for c in result["clients"]]
    assert transforms[0] is None
    stds = [t["std"] for t in transforms[1:]]
    assert all(t["kind"] == "gaussian_noise" for t in transforms[1:])
    assert stds == pytest.approx([0.025, 0.05, 0.075, 0.1])  # σ·i/(K-1), as std
    sizes = [len(c["train"]) for c in result["clients"]]
    assert max(sizes) - min(sizes) <= 1


def test_gaussian_noise_as_variance_over_n() -> None:
    spec = {"scheme": "feature_noise", "sigma": 0.1, "clients": 5}
    result = part({**spec, "noise_param": "var", "denominator": "N"})
    stds = [c["transform"]["std"] for c in result["clients"][1:]]
    assert stds == pytest.approx([np.sqrt(0.1 * i / 5) for i in range(1, 5)])


def test_last_noise_client_has_empirical_std_sigma_and_client_0_is_unchanged() -> None:
    result = part({"scheme": "feature_noise", "sigma": 0.2, "clients": 4})
    x = torch.rand(16, 3, 16, 16)
    gen = torch.Generator().manual_seed(0)
    first = apply_transform(x, result["clients"][0]["transform"], gen)
    assert torch.equal(first, x)
    last = apply_transform(x, result["clients"][-1]["transform"], gen)
    assert float((last - x).std()) == pytest.approx(0.2, rel=0.03)


def fedpce(m: int = 2, seed: int = 0) -> dict:
    return part({"scheme": "fedpce_degradation", "m": m, "clients": 6 * m}, seed=seed)


def test_fedpce_has_three_groups_of_2m_clients() -> None:
    clients = fedpce()["clients"]
    kinds = [c["transform"]["kind"] if c["transform"] else None for c in clients]
    assert kinds == ["fedpce_noise"] * 4 + ["color_jitter"] * 4 + [None] * 4
    groups = [c["group"] for c in clients]  # what Table 2 reports each client under
    assert groups == ["Gaussian noise"] * 4 + ["ColorJitter"] * 4 + ["Class imbalance"] * 4
    variances = [c["transform"]["var"] for c in clients[:4]]
    assert variances == pytest.approx(np.linspace(0.005, 1.0, 4).tolist())
    train = [np.asarray(c["train"]) for c in clients]
    joined = np.concatenate(train)
    assert sorted(joined.tolist()) == list(range(len(TRAIN)))  # disjoint cover
    # the three degradation parts are equal thirds; noise and jitter clients uniform
    assert sum(len(x) for x in train[8:]) == pytest.approx(len(TRAIN) / 3, abs=10)
    assert all(len(x) == pytest.approx(len(TRAIN) / 12, abs=10) for x in train[:8])
    tests = np.concatenate([np.asarray(c["test"]) for c in clients])
    assert len(np.unique(tests)) == len(tests) == len(TEST)


def test_fedpce_color_jitter_factors_are_fixed_permuted_linspaces() -> None:
    jitter = [c["transform"] for c in fedpce()["clients"][4:8]]
    for name, lo, hi in [("brightness", 0.5, 1.5), ("saturation", 0.5, 1.5), ("hue", -0.5, 0.5)]:
        assert sorted(t[name] for t in jitter) == pytest.approx(np.linspace(lo, hi, 4).tolist())
    assert [c["transform"] for c in fedpce(seed=0)["clients"]] == [
        c["transform"] for c in fedpce(seed=0)["clients"]
    ]


def test_fedpce_imbalance_alphas_are_a_logspace_each_drawing_two_clients() -> None:
    clients = fedpce(m=3)["clients"]
    alphas = [c["alpha"] for c in clients if "alpha" in c]
    assert alphas == pytest.approx(np.repeat(np.logspace(-1, 1, 3), 2).tolist())
    assert all(c["group"] == "Class imbalance" for c in clients if "alpha" in c)


def test_fedpce_imbalance_clients_get_skewed_labels() -> None:
    hist = np.asarray(fedpce(m=3)["histogram"]["train"], dtype=float)
    probs = hist / hist.sum(axis=1, keepdims=True)
    spread = probs.std(axis=1)
    # alpha_0 = 0.1 pair is far more skewed than the uniform noise clients
    assert spread[12:14].mean() > 5 * spread[:6].mean()


def test_fedpce_flags_20_percent_new_clients_per_group() -> None:
    flags = np.array([c["new"] for c in fedpce(m=5)["clients"]])
    assert [int(flags[g * 10 : (g + 1) * 10].sum()) for g in range(3)] == [2, 2, 2]
    other = np.array([c["new"] for c in fedpce(m=5, seed=1)["clients"]])
    assert not np.array_equal(flags, other)


def test_fedpce_needs_6m_clients() -> None:
    with pytest.raises(ValueError, match="'clients'"):
        part({"scheme": "fedpce_degradation", "m": 2, "clients": 10})
