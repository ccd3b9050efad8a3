"""Label-distribution schemes: IID, the Dirichlet family, FedHPL's overlapping Dir, and #C=k.

"Dirichlet" differs between the papers' codebases, so each variant has its own name:
``niid`` (NIID-Bench ``noniid-labeldir``, Xtra-Computing/NIID-Bench@61b901a:utils.py),
``fedins`` (per-class truncation first, chunmeifeng/FedIns@0918734:
utils/cifar_tinyimage_data_utils.py; docs/methods/fedins.md), ``fedpce`` (round() cuts, test
cut alike, somcogo/fedpce@b673d68:utils/partition.py) and ``fedhpl_disjoint`` (FedHPL §4.1,
App. B.2).
NIID-Bench drew from numpy's legacy global RNG; here every scheme draws from one
``default_rng(seed)`` stream, so the algorithms match but not the exact index sets.
"""

from __future__ import annotations

import math

import numpy as np

from fedrepro.data.partitions.common import (
    MAX_RESAMPLES,
    ClientPart,
    Params,
    PartitionData,
    class_pools,
    dirichlet_label_split,
    random_split,
)

DIRICHLET_VARIANTS = ("niid", "fedins", "fedpce", "fedhpl_disjoint")


def iid(p: Params, data: PartitionData, rng: np.random.Generator) -> list[ClientPart]:
    """Shuffle and split into equal parts (NIID ``homo``, FedHPL "IID")."""
    indices = np.arange(len(data.train_labels))
    return [ClientPart(part) for part in random_split(indices, data.num_clients, rng)]


def dirichlet(p: Params, data: PartitionData, rng: np.random.Generator) -> list[ClientPart]:
    """Per-class Dirichlet label skew in one of the named variants."""
    variant = p.choice("variant", DIRICHLET_VARIANTS)
    pools = class_pools(data.train_labels, data.num_classes)
    n_train, n_clients = len(data.train_labels), data.num_clients
    if variant == "fedhpl_disjoint":
        alpha = fedhpl_alpha(p, rng)
        min_size = fedhpl_min_size(p, n_train)
        train, _ = dirichlet_label_split(
            pools, n_clients, alpha, rng, cap_total=None, rounding="floor", min_size=min_size
        )
        return [ClientPart(part) for part in train]
    beta = p.number("beta", lo=0, lo_open=True)
    min_size = p.number("min_size", 10, lo=0, integer=True)
    if variant == "fedins":
        # FedIns keeps the first K·train_num indices of each class, unshuffled, while the
        # balance cap still uses the untruncated N (so it never binds).
        train_num = p.number("train_num", 2, lo=1, integer=True)
        pools = [pool[: n_clients * train_num] for pool in pools]
    test_pools = None
    if variant == "fedpce" and len(data.test_labels):
        test_pools = class_pools(data.test_labels, data.num_classes)
    train, test = dirichlet_label_split(
        pools,
        n_clients,
        beta,
        rng,
        cap_total=n_train,
        rounding="round" if variant == "fedpce" else "floor",
        min_size=min_size,
        test_pools=test_pools,
    )
    if test is None:
        return [ClientPart(part) for part in train]
    return [ClientPart(tr, te) for tr, te in zip(train, test, strict=True)]


OVERLAP_DRAWS = ("per_class", "per_client")


def fedhpl_overlap(p: Params, data: PartitionData, rng: np.random.Generator) -> list[ClientPart]:
    """FedHPL "Dir" (App. B.2): clients hold overlapping samples.

    ``draw: per_class`` (the text: "for each class c, the number of samples in class c on
    client k"): each class's shares over the K clients are drawn from Dir_K(α) and cut as
    the disjoint Non-IID split cuts them (so the counts are the Non-IID split's), then every
    client samples its count of class c from the whole class pool, independently of the
    others: together the clients hold about the training set, with overlap.
    ``draw: per_client`` (the other reading): client k draws q_k ~ Dir_C(α) over the classes
    and takes ⌊q_kc·N_c⌋ images of class c, so a client holds about N/C images.
    """
    draw = p.choice("draw", OVERLAP_DRAWS, "per_class")
    alpha = fedhpl_alpha(p, rng)
    pools = class_pools(data.train_labels, data.num_classes)
    counts = np.array([len(pool) for pool in pools])
    min_size = fedhpl_min_size(p, len(data.train_labels))
    if draw == "per_class":
        parts, _ = dirichlet_label_split(
            pools, data.num_clients, alpha, rng, cap_total=None, rounding="floor",
            min_size=min_size,
        )  # fmt: skip
        sizes = np.stack([np.bincount(data.train_labels[x], minlength=len(pools)) for x in parts])
    else:
        sizes = _per_client_sizes(p, data, alpha, counts, min_size, rng)
    clients = []
    for k in range(data.num_clients):
        taken = [rng.choice(pools[c], n, replace=False) for c, n in enumerate(sizes[k]) if n]
        train = np.concatenate(taken) if taken else np.zeros(0, dtype=np.int64)
        clients.append(ClientPart(rng.permutation(train)))
    return clients


def _per_client_sizes(
    p: Params,
    data: PartitionData,
    alpha: float,
    counts: np.ndarray,
    min_size: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``draw: per_client``: client k's count of class c is ⌊q_kc·N_c⌋, q_k ~ Dir_C(α),
    resampling a client until it holds ``min_size``."""
    if min_size > counts.max():
        raise p.error(
            "min_share",
            f"asks for {min_size} samples; a client can get at most "
            f"{counts.max()} (the largest class)",
        )
    shares = rng.dirichlet(np.full(data.num_classes, alpha), size=data.num_clients)
    for _ in range(MAX_RESAMPLES):
        sizes = np.floor(shares * counts).astype(np.int64)
        short = sizes.sum(axis=1) < min_size
        if not short.any():
            return sizes
        # Clients are independent, so redrawing only the short ones is resample-until-min.
        shares[short] = rng.dirichlet(np.full(data.num_classes, alpha), size=int(short.sum()))
    raise RuntimeError(f"partition: fedhpl_overlap could not reach {min_size} per client")


def label_quantity(p: Params, data: PartitionData, rng: np.random.Generator) -> list[ClientPart]:
    """#C=k (NIID ``noniid-#label{k}``): client i owns class i mod C plus k-1 further distinct
    random classes; each class is split evenly among its owners. ``k`` may also be a list, one
    count per client (FedHPL Figs. 7-9: the baselines' own protocol, 2, 4, ..., 10 classes)."""
    n_classes, n_clients = data.num_classes, data.num_clients
    counts = _class_counts(p, n_classes, n_clients)
    owned = []
    for i, k in enumerate(counts):
        if k == n_classes:
            owned.append(list(range(n_classes)))
            continue
        others = np.setdiff1d(np.arange(n_classes), [i % n_classes])
        owned.append([i % n_classes, *rng.choice(others, k - 1, replace=False).tolist()])
    parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
    for c, pool in enumerate(class_pools(data.train_labels, n_classes)):
        owners = [i for i in range(n_clients) if c in owned[i]]
        if len(owners) > len(pool):
            raise p.error(
                "k", f"gives class {c} {len(owners)} owners but it has {len(pool)} samples"
            )
        if not owners:
            continue
        pieces = np.array_split(rng.permutation(pool), len(owners))
        for owner, piece in zip(owners, pieces, strict=True):
            parts[owner].append(piece)
    return [ClientPart(rng.permutation(np.concatenate(x))) for x in parts]


def _class_counts(p: Params, n_classes: int, n_clients: int) -> list[int]:
    """The classes each client owns: ``k`` for all, or a list of one count per client."""
    if not isinstance(p.raw("k", None), list):
        return [p.number("k", lo=1, hi=n_classes, integer=True)] * n_clients
    counts = p.raw("k")
    ok = len(counts) == n_clients and all(
        isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= n_classes for k in counts
    )
    if not ok:
        raise p.error("k", f"is {counts!r}; expected {n_clients} ints in [1, {n_classes}]")
    p.resolved["k"] = list(counts)
    return list(counts)


def fedhpl_alpha(p: Params, rng: np.random.Generator) -> float:
    """FedHPL's α: given, or drawn once from U(lo, hi) ("randomly generated", range lost)."""
    if p.has("alpha") == p.has("alpha_range"):
        p.raw("alpha", None)
        p.raw("alpha_range", None)
        raise p.error("alpha", "and 'alpha_range' ([lo, hi]): give exactly one of the two")
    if p.has("alpha"):
        return p.number("alpha", lo=0, lo_open=True)
    bounds = p.raw("alpha_range")
    ok = (
        isinstance(bounds, list | tuple)
        and len(bounds) == 2
        and all(isinstance(b, int | float) and not isinstance(b, bool) for b in bounds)
        and 0 < bounds[0] <= bounds[1] < math.inf
    )
    if not ok:
        raise p.error("alpha_range", f"is {bounds!r}; expected [lo, hi] with 0 < lo <= hi")
    alpha = float(rng.uniform(bounds[0], bounds[1]))
    p.resolved["alpha_range"] = [float(b) for b in bounds]
    p.resolved["alpha"] = alpha
    return alpha


def fedhpl_min_size(p: Params, n_train: int) -> int:
    """FedHPL's per-client minimum share of the training data, as a sample count (>= 1)."""
    share = p.number("min_share", 0.0, lo=0, hi=1)
    return max(1, math.ceil(share * n_train))
