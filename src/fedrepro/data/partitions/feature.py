"""Feature-skew schemes: NIID's Gaussian-noise clients and FedPCE's degradation clients.

Both split the data uniformly and give each client a fixed transform record that
``fedrepro.data.transforms.clients.apply_transform`` applies to every batch it reads.
"""

from __future__ import annotations

import math

import numpy as np

from fedrepro.data.partitions.common import (
    ClientPart,
    Params,
    PartitionData,
    class_pools,
    dirichlet_label_split,
    mark_new_clients,
    random_split,
    stratified_split,
)

# FedPCE's degradation groups, as its Table 2 names them
NOISE, JITTER, IMBALANCE = "Gaussian noise", "ColorJitter", "Class imbalance"


def feature_noise(p: Params, data: PartitionData, rng: np.random.Generator) -> list[ClientPart]:
    """Gau(σ) (Elvebakken et al. §IV; docs/methods/adapters.md): IID equal split; client i
    adds N(0, s_i²) noise with level σ·i/D, D = K-1 (NIID-Bench's code,
    Xtra-Computing/NIID-Bench@61b901a:utils.py) or K (the paper's text), read as std (code)
    or variance (text)."""
    sigma = p.number("sigma", lo=0)
    noise_param = p.choice("noise_param", ("std", "var"), "std")
    denominator = p.choice("denominator", ("N-1", "N"), "N-1")
    n_clients = data.num_clients
    denom = n_clients - 1 if denominator == "N-1" else n_clients
    if denom == 0:
        raise p.error("denominator", "'N-1' needs at least 2 clients")
    parts = random_split(np.arange(len(data.train_labels)), n_clients, rng)
    clients = []
    for i, part in enumerate(parts):
        level = sigma * i / denom
        std = math.sqrt(level) if noise_param == "var" else level
        transform = {"kind": "gaussian_noise", "std": std} if std > 0 else None
        clients.append(ClientPart(part, transform=transform))
    return clients


def fedpce_degradation(
    p: Params, data: PartitionData, rng: np.random.Generator
) -> list[ClientPart]:
    """FedPCE's 6M clients (FedPCE §4.2, §5.1; somcogo/fedpce@b673d68:utils/ops.py): the
    data is split (class-stratified) into three equal parts; clients 0..2M-1 get Gaussian
    noise of fixed variance, 2M..4M-1 fixed colour-jitter factors, 4M..6M-1 Dirichlet class
    imbalance (M subsets of 2 clients).
    Test images are split the same way, so each client's test set matches its train set."""
    m = p.number("m", 5, lo=1, integer=True)
    min_size = p.number("min_size", 10, lo=0, integer=True)
    new_fraction = p.number("new_fraction", 0.2, lo=0, hi=1)
    if data.num_clients != 6 * m:
        raise ValueError(
            f"partition scheme 'fedpce_degradation': key 'clients' is {data.num_clients}; "
            f"expected 6*m = {6 * m}"
        )
    per_group = 2 * m
    train_thirds = stratified_split(np.arange(len(data.train_labels)), data.train_labels, 3, rng)
    test_thirds = stratified_split(np.arange(len(data.test_labels)), data.test_labels, 3, rng)

    clients = []
    variances = np.linspace(0.005, 1.0, per_group)
    noise_train = stratified_split(train_thirds[0], data.train_labels, per_group, rng)
    noise_test = stratified_split(test_thirds[0], data.test_labels, per_group, rng)
    for j in range(per_group):
        transform = {"kind": "fedpce_noise", "var": float(variances[j])}
        clients.append(ClientPart(noise_train[j], noise_test[j], transform, group=NOISE))

    factors = {
        "brightness": np.linspace(0.5, 1.5, per_group),
        "contrast": np.linspace(0.5, 1.5, per_group),
        "saturation": np.linspace(0.5, 1.5, per_group),
        "hue": np.linspace(-0.5, 0.5, per_group),
    }
    perms = {name: rng.permutation(per_group) for name in factors}
    jitter_train = stratified_split(train_thirds[1], data.train_labels, per_group, rng)
    jitter_test = stratified_split(test_thirds[1], data.test_labels, per_group, rng)
    for j in range(per_group):
        transform = {"kind": "color_jitter"}
        transform |= {name: float(values[perms[name][j]]) for name, values in factors.items()}
        clients.append(ClientPart(jitter_train[j], jitter_test[j], transform, group=JITTER))

    alphas = np.logspace(-1, 1, m)
    subsets_train = stratified_split(train_thirds[2], data.train_labels, m, rng)
    subsets_test = stratified_split(test_thirds[2], data.test_labels, m, rng)
    for alpha, sub_train, sub_test in zip(alphas, subsets_train, subsets_test, strict=True):
        pools = _pools_within(sub_train, data.train_labels, data.num_classes)
        test_pools = None
        if len(sub_test):
            test_pools = _pools_within(sub_test, data.test_labels, data.num_classes)
        train, test = dirichlet_label_split(
            pools,
            2,
            float(alpha),
            rng,
            cap_total=len(sub_train),
            rounding="round",
            min_size=min_size,
            test_pools=test_pools,
        )
        tests = test if test is not None else [np.zeros(0, dtype=np.int64)] * 2
        clients.extend(
            ClientPart(tr, te, group=IMBALANCE, alpha=float(alpha))
            for tr, te in zip(train, tests, strict=True)
        )

    mark_new_clients(clients, per_group, new_fraction, rng)
    return clients


def _pools_within(subset: np.ndarray, labels: np.ndarray, num_classes: int) -> list[np.ndarray]:
    """Per-class pools of a subset, as indices into the full split."""
    return [subset[pool] for pool in class_pools(labels[subset], num_classes)]
