"""Client partitions: the scheme registry, test-split handling and the partition JSON.

``make_partition`` turns a spec (``scheme`` + its parameters, ``clients``, ``test_mode``)
and the label arrays of the prepared splits into the dict of docs/contracts.md
"Partition JSON"; ``partition_files`` does the same from prepared split files. Everything
is a function of ``seed``: the scheme draws from ``default_rng(seed)``, the test-split
allocation and ``same_scheme`` from their own child streams, so changing ``test_mode``
never changes the training partition.

Test modes: ``split`` (the scheme's own test cut where it has one, otherwise each
(domain, class) stratum of the test split is shared out disjointly in proportion to the
clients' train counts), ``global`` (every client evaluates on the whole test split; empty
lists), ``same_scheme`` (the scheme applied afresh to the test split),
``held_out_domain`` (leave-one-domain-out only: every client lists the held-out domain), and
``train_holdout`` (each class of a client's training images cut into train and a held-out
``holdout`` share, 0.2 by default: the test lists then index the *training* split, and the
test split is not used; FedHPL App. C.3's protocol of the heterogeneous-model baselines).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedrepro.atomic import write_json
from fedrepro.data.partitions.common import (
    ClientPart,
    Params,
    PartitionData,
    class_pools,
    cut_points,
)
from fedrepro.data.partitions.domain import domain, leave_one_domain_out
from fedrepro.data.partitions.feature import feature_noise, fedpce_degradation
from fedrepro.data.partitions.label import dirichlet, fedhpl_overlap, iid, label_quantity
from fedrepro.data.transforms.styles import assign_styles

SchemeFn = Callable[[Params, PartitionData, np.random.Generator], list[ClientPart]]

_ANY_TEST = ("split", "global", "same_scheme", "train_holdout")


@dataclass(frozen=True)
class Scheme:
    """A partition scheme and the test modes it supports (the first is the default)."""

    build: SchemeFn
    test_modes: tuple[str, ...] = _ANY_TEST


SCHEMES: dict[str, Scheme] = {
    "iid": Scheme(iid),
    "dirichlet": Scheme(dirichlet),
    "fedhpl_overlap": Scheme(fedhpl_overlap),
    "label_quantity": Scheme(label_quantity),
    "feature_noise": Scheme(feature_noise),
    "domain": Scheme(domain),
    "leave_one_domain_out": Scheme(leave_one_domain_out, ("held_out_domain",)),
    "fedpce_degradation": Scheme(fedpce_degradation),
}

META_KEYS = (
    "scheme",
    "clients",
    "test_mode",
    "seed",
    "styles",
    "styled_fraction",
    "train_fraction",
    "holdout",
)


def make_partition(
    spec: dict[str, Any],
    train_labels: np.ndarray,
    test_labels: np.ndarray,
    *,
    train_domains: np.ndarray | None = None,
    test_domains: np.ndarray | None = None,
    domain_names: list[str] | None = None,
    num_classes: int,
    seed: int,
) -> dict[str, Any]:
    """The partition dict of docs/contracts.md for ``spec``, deterministic in ``seed``.

    ``domain_names`` (optional) names the domain ids; without it domains are named "0", "1", ...
    Raises a one-line ValueError naming the offending key for any bad spec.
    """
    if not isinstance(spec, dict):
        raise ValueError(f"partition spec must be a dict, got {type(spec).__name__}")
    name = spec.get("scheme")
    if not isinstance(name, str) or name not in SCHEMES:
        raise ValueError(
            f"partition spec: key 'scheme' is {name!r}; expected one of {list(SCHEMES)}"
        )
    scheme = SCHEMES[name]
    num_clients = spec.get("clients")
    if not isinstance(num_clients, int) or isinstance(num_clients, bool) or num_clients < 1:
        raise ValueError(f"partition spec: key 'clients' is {num_clients!r}; expected an int >= 1")
    test_mode = spec.get("test_mode", scheme.test_modes[0])
    if test_mode not in scheme.test_modes:
        raise ValueError(
            f"partition scheme {name!r}: key 'test_mode' is {test_mode!r}; "
            f"expected one of {list(scheme.test_modes)}"
        )
    if "seed" in spec and spec["seed"] != seed:
        raise ValueError(
            f"partition spec: key 'seed' is {spec['seed']!r} but seed={seed} was given"
        )
    data = _partition_data(
        train_labels,
        test_labels,
        train_domains,
        test_domains,
        domain_names,
        num_classes,
        num_clients,
    )
    params = Params(name, spec, META_KEYS)
    clients = scheme.build(params, data, np.random.default_rng(seed))
    params.check_all_read()
    if len(clients) != num_clients:
        raise AssertionError(f"scheme {name} built {len(clients)} clients, not {num_clients}")

    streams = np.random.SeedSequence(seed).spawn(3)
    test_rng, rerun_rng, style_rng = (np.random.default_rng(s) for s in streams)
    resolved = dict(params.resolved)
    if test_mode == "train_holdout":
        resolved |= _hold_out(spec, clients, data, test_rng)
    tests = _test_lists(scheme, name, spec, test_mode, clients, data, test_rng, rerun_rng)
    if "train_fraction" in spec:
        resolved |= _keep_fraction(spec, clients, np.random.SeedSequence(seed).spawn(4)[3])
    if spec.get("styles"):
        resolved |= _assign_styles(spec, clients, style_rng)
    return _to_json_dict(name, resolved, seed, test_mode, clients, tests, data)


def _hold_out(
    spec: dict[str, Any], clients: list[ClientPart], data: PartitionData, rng: np.random.Generator
) -> dict[str, Any]:
    """``train_holdout``: each client's images of each class cut at random into a train share
    and a ``holdout`` share (round(), at least one image left to train on) that becomes the
    client's test list, indices into the training split."""
    share = spec.get("holdout", 0.2)
    ok = isinstance(share, int | float) and not isinstance(share, bool)
    if not ok or not 0 < share < 1:
        raise ValueError(f"partition spec: key 'holdout' is {share!r}; expected a number in (0, 1)")
    for client in clients:
        keep, held = [], []
        for pool in class_pools(data.train_labels[client.train], data.num_classes):
            if not len(pool):
                continue
            pool = rng.permutation(client.train[pool])
            cut = min(int(round(share * len(pool))), len(pool) - 1)
            held.append(pool[:cut])
            keep.append(pool[cut:])
        client.train = np.sort(np.concatenate(keep)) if keep else client.train
        client.test = np.sort(np.concatenate(held)) if held else np.zeros(0, dtype=np.int64)
    return {"holdout": share}


def _keep_fraction(
    spec: dict[str, Any], clients: list[ClientPart], stream: np.random.SeedSequence
) -> dict[str, Any]:
    """FedHPL Fig. 3b's share of local training samples: each client keeps a seeded random
    ``train_fraction`` of its training images (at least one), after the scheme drew them."""
    fraction = spec["train_fraction"]
    ok = isinstance(fraction, int | float) and not isinstance(fraction, bool)
    if not ok or not 0 < fraction <= 1:
        raise ValueError(
            f"partition spec: key 'train_fraction' is {fraction!r}; expected a number in (0, 1]"
        )
    rng = np.random.default_rng(stream)
    for client in clients:
        keep = max(1, int(round(fraction * len(client.train)))) if len(client.train) else 0
        client.train = client.train[np.sort(rng.choice(len(client.train), keep, replace=False))]
    return {"train_fraction": fraction}


def _assign_styles(
    spec: dict[str, Any], clients: list[ClientPart], rng: np.random.Generator
) -> dict[str, Any]:
    """FedIns's intra-client knob (``fedrepro.data.transforms.styles``): a style id per training
    image."""
    styles, fraction = spec["styles"], spec.get("styled_fraction")
    if not isinstance(styles, int) or isinstance(styles, bool) or styles < 0:
        raise ValueError(f"partition spec: key 'styles' is {styles!r}; expected an int >= 0")
    for client in clients:
        client.style = assign_styles(len(client.train), styles, rng, fraction)
    return {"styles": styles, "styled_fraction": fraction}


def partition_files(
    spec: dict[str, Any],
    train_path: str | Path,
    test_path: str | Path,
    out_json: str | Path,
    seed: int,
) -> None:
    """Partition the prepared splits at ``train_path``/``test_path``; write ``out_json``
    atomically (a reader never sees a half-written file)."""
    # Imported here: prepared files load through torch, make_partition needs only numpy.
    from fedrepro.data.prepared import load_split

    train, test = load_split(train_path), load_split(test_path)
    result = make_partition(
        spec,
        train.labels.cpu().numpy(),
        test.labels.cpu().numpy(),
        train_domains=None if train.domains is None else train.domains.cpu().numpy(),
        test_domains=None if test.domains is None else test.domains.cpu().numpy(),
        domain_names=list(train.domain_names) or None,
        num_classes=len(train.classes),
        seed=seed,
    )
    write_json(out_json, result)


def _partition_data(
    train_labels: np.ndarray,
    test_labels: np.ndarray,
    train_domains: np.ndarray | None,
    test_domains: np.ndarray | None,
    domain_names: list[str] | None,
    num_classes: int,
    num_clients: int,
) -> PartitionData:
    """Validate the label/domain arrays and fill in default domain names."""
    if not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"partition: num_classes is {num_classes!r}; expected an int >= 1")
    arrays = {"train_labels": train_labels, "test_labels": test_labels}
    if (train_domains is None) != (test_domains is None):
        raise ValueError("partition: give both train_domains and test_domains, or neither")
    if train_domains is not None:
        arrays |= {"train_domains": train_domains, "test_domains": test_domains}
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    for key, arr in arrays.items():
        if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
            raise ValueError(f"partition: {key} must be a 1-D integer array")
        arrays[key] = arr.astype(np.int64)
    for key in ("train", "test"):
        labels = arrays[f"{key}_labels"]
        if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
            raise ValueError(f"partition: {key}_labels outside [0, {num_classes})")
        if f"{key}_domains" in arrays and len(arrays[f"{key}_domains"]) != len(labels):
            raise ValueError(f"partition: {key}_domains and {key}_labels differ in length")
    names: list[str] = []
    if train_domains is not None:
        ids = np.concatenate([arrays["train_domains"], arrays["test_domains"]])
        n_domains = int(ids.max()) + 1 if ids.size else 0
        names = list(domain_names) if domain_names else [str(d) for d in range(n_domains)]
        if ids.size and (ids.min() < 0 or n_domains > len(names)):
            raise ValueError(f"partition: domain ids outside [0, {len(names)}) (domain_names)")
    return PartitionData(
        train_labels=arrays["train_labels"],
        test_labels=arrays["test_labels"],
        train_domains=arrays.get("train_domains"),
        test_domains=arrays.get("test_domains"),
        domain_names=names,
        num_classes=num_classes,
        num_clients=num_clients,
    )


def _test_lists(
    scheme: Scheme,
    name: str,
    spec: dict[str, Any],
    test_mode: str,
    clients: list[ClientPart],
    data: PartitionData,
    test_rng: np.random.Generator,
    rerun_rng: np.random.Generator,
) -> list[np.ndarray]:
    """Each client's test indices under ``test_mode``."""
    if test_mode == "global":
        return [np.zeros(0, dtype=np.int64) for _ in clients]
    if test_mode == "same_scheme":
        no_domains = None if data.test_domains is None else np.zeros(0, dtype=np.int64)
        on_test = PartitionData(
            train_labels=data.test_labels,
            test_labels=np.zeros(0, dtype=np.int64),
            train_domains=data.test_domains,
            test_domains=no_domains,
            domain_names=data.domain_names,
            num_classes=data.num_classes,
            num_clients=data.num_clients,
        )
        return [c.train for c in scheme.build(Params(name, spec, META_KEYS), on_test, rerun_rng)]
    if test_mode == "train_holdout" or all(c.test is not None for c in clients):
        return [c.test for c in clients if c.test is not None]
    return proportional_test_split([c.train for c in clients], data, test_rng)


def proportional_test_split(
    train_lists: list[np.ndarray], data: PartitionData, rng: np.random.Generator
) -> list[np.ndarray]:
    """Share each (domain, class) stratum of the test split out disjointly among the clients
    in proportion to their train counts in that stratum (round() cuts)."""
    train_strata, test_strata, n_strata = _strata(data)
    counts = np.stack([np.bincount(train_strata[idx], minlength=n_strata) for idx in train_lists])
    parts: list[list[np.ndarray]] = [[] for _ in train_lists]
    pools = class_pools(test_strata, n_strata)
    for s in np.flatnonzero(counts.sum(axis=0)):
        pool = rng.permutation(pools[s])
        props = counts[:, s] / counts[:, s].sum()
        for k, piece in enumerate(np.split(pool, cut_points(props, len(pool), "round"))):
            if len(piece):
                parts[k].append(piece)
    return [np.sort(np.concatenate(x)) if x else np.zeros(0, dtype=np.int64) for x in parts]


def _strata(data: PartitionData) -> tuple[np.ndarray, np.ndarray, int]:
    """Stratum ids: the class, or domain·C + class for multi-domain data."""
    if data.train_domains is None or data.test_domains is None:
        return data.train_labels, data.test_labels, data.num_classes
    c = data.num_classes
    return (
        data.train_domains * c + data.train_labels,
        data.test_domains * c + data.test_labels,
        len(data.domain_names) * c,
    )


def _to_json_dict(
    name: str,
    params: dict[str, Any],
    seed: int,
    test_mode: str,
    clients: list[ClientPart],
    tests: list[np.ndarray],
    data: PartitionData,
) -> dict[str, Any]:
    c = data.num_classes
    records = [
        {
            "train": client.train.tolist(),
            "test": test.tolist(),
            "transform": client.transform,
            "domain": client.domain,
            "new": bool(client.new),
            **({} if client.style is None else {"style": client.style.tolist()}),
            **({} if client.group is None else {"group": client.group}),
            **({} if client.alpha is None else {"alpha": client.alpha}),
        }
        for client, test in zip(clients, tests, strict=True)
    ]
    tested = data.train_labels if test_mode == "train_holdout" else data.test_labels
    histogram = {
        "train": [np.bincount(data.train_labels[x.train], minlength=c).tolist() for x in clients],
        "test": [np.bincount(tested[t], minlength=c).tolist() for t in tests],
    }
    return {
        "scheme": name,
        "params": params,
        "seed": seed,
        "num_clients": len(clients),
        "num_classes": c,
        "test_mode": test_mode,
        "clients": records,
        "histogram": histogram,
    }


def test_lists_from(
    partition: dict[str, Any],
    train_labels: np.ndarray,
    test_labels: np.ndarray,
    num_classes: int,
    seed: int,
) -> list[list[int]]:
    """Every client's test list drawn afresh from another test split (FedICON's attribute
    shift: CIFAR-10.1 shared out following each client's label distribution): each class of
    that split is shared out disjointly in proportion to the clients' train counts, as the
    ``split`` test mode does; seeded by ``seed`` alone."""
    data = _partition_data(
        train_labels, test_labels, None, None, None, num_classes, len(partition["clients"])
    )
    train_lists = [np.asarray(c["train"], dtype=np.int64) for c in partition["clients"]]
    tests = proportional_test_split(train_lists, data, np.random.default_rng(seed))
    return [t.tolist() for t in tests]
