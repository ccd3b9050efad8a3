"""Shared pieces of the partition schemes: inputs, client records, parameter reading, splits.

Every scheme is a function ``(params, data, rng) -> list[ClientPart]``; this module holds
what several schemes need, so that each scheme file only says what is particular to it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

_REQUIRED = object()

MAX_RESAMPLES = 10_000


@dataclass(frozen=True)
class PartitionData:
    """Labels (and optional domain ids) of the two prepared splits a partition is drawn from."""

    train_labels: np.ndarray
    test_labels: np.ndarray
    train_domains: np.ndarray | None
    test_domains: np.ndarray | None
    domain_names: list[str]
    num_classes: int
    num_clients: int


@dataclass
class ClientPart:
    """One client's share; ``test`` is None when the scheme leaves the test split to the caller."""

    train: np.ndarray
    test: np.ndarray | None = None
    transform: dict[str, Any] | None = None
    domain: str | None = None
    new: bool = False
    style: np.ndarray | None = None  # per training image, 0 = unchanged (data.styles)
    group: str | None = None  # what the paper reports the client under (FedPCE: degradation)
    alpha: float | None = None  # the Dirichlet concentration that drew it (FedPCE imbalance)


class Params:
    """Reads a scheme's parameters from the partition config, validating each and recording
    the resolved value, so that a typo or a missing key fails with a one-line message naming
    it."""

    def __init__(self, scheme: str, spec: dict[str, Any], meta_keys: Sequence[str]) -> None:
        self.scheme = scheme
        self._spec = {k: v for k, v in spec.items() if k not in meta_keys}
        self._read: set[str] = set()
        self.resolved: dict[str, Any] = {}

    def error(self, key: str, what: str) -> ValueError:
        return ValueError(f"partition scheme {self.scheme!r}: key {key!r} {what}")

    def has(self, key: str) -> bool:
        return key in self._spec

    def raw(self, key: str, default: Any = _REQUIRED, allowed: str = "a value") -> Any:
        self._read.add(key)
        if key in self._spec:
            return self._spec[key]
        if default is _REQUIRED:
            raise self.error(key, f"is missing; expected {allowed}")
        return default

    def number(
        self,
        key: str,
        default: Any = _REQUIRED,
        *,
        lo: float | None = None,
        hi: float | None = None,
        lo_open: bool = False,
        integer: bool = False,
    ) -> Any:
        """A real (or integer) in [lo, hi] (or (lo, hi] with ``lo_open``)."""
        bounds = f"{'(' if lo_open else '['}{lo if lo is not None else '-inf'}, "
        bounds += f"{hi if hi is not None else 'inf'}]"
        allowed = f"{'an integer' if integer else 'a number'} in {bounds}"
        value = self.raw(key, default, allowed)
        ok_type = isinstance(value, int | float) and not isinstance(value, bool)
        if integer:
            ok_type = ok_type and float(value).is_integer()
        too_low = lo is not None and ok_type and (value <= lo if lo_open else value < lo)
        too_high = hi is not None and ok_type and value > hi
        if not ok_type or too_low or too_high or (ok_type and not math.isfinite(value)):
            raise self.error(key, f"is {value!r}; expected {allowed}")
        value = int(value) if integer else float(value)
        self.resolved[key] = value
        return value

    def choice(self, key: str, options: Sequence[Any], default: Any = _REQUIRED) -> Any:
        value = self.raw(key, default, f"one of {list(options)}")
        if value not in options:
            raise self.error(key, f"is {value!r}; expected one of {list(options)}")
        self.resolved[key] = value
        return value

    def check_all_read(self) -> None:
        unknown = sorted(set(self._spec) - self._read)
        if unknown:
            raise self.error(unknown[0], f"is unknown; allowed keys: {sorted(self._read)}")


def class_pools(labels: np.ndarray, num_classes: int) -> list[np.ndarray]:
    """Indices of each class in ascending index order (the order NIID's ``np.where`` gives)."""
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(num_classes + 1))
    return [order[bounds[c] : bounds[c + 1]] for c in range(num_classes)]


def stratified_split(
    indices: np.ndarray, labels: np.ndarray, parts: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Uniform class-stratified split: per-class and total sizes of the parts differ by <= 1.

    Each class is shuffled, the classes are laid end to end and dealt round-robin, so the
    remainder of one class continues where the previous one stopped.
    """
    shuffled = indices[rng.permutation(len(indices))]
    dealt = shuffled[np.argsort(labels[shuffled], kind="stable")]
    return [rng.permutation(dealt[p::parts]) for p in range(parts)]


def random_split(indices: np.ndarray, parts: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle and cut into ``parts`` equal pieces (NIID ``homo``: sizes differ by <= 1)."""
    return np.array_split(indices[rng.permutation(len(indices))], parts)


def cut_points(props: np.ndarray, n: int, rounding: str) -> np.ndarray:
    """Where to cut ``n`` shuffled items so piece k gets ~props[k]·n ('floor' = NIID, 'round' =
    FedPCE)."""
    cum = np.cumsum(props) * n
    cum = np.floor(cum) if rounding == "floor" else np.round(cum)
    return np.clip(cum.astype(np.int64), 0, n)[:-1]


def dirichlet_label_split(
    train_pools: Sequence[np.ndarray],
    num_clients: int,
    concentration: float,
    rng: np.random.Generator,
    *,
    cap_total: float | None,
    rounding: str,
    min_size: int,
    test_pools: Sequence[np.ndarray] | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Per-class Dirichlet label skew, resampled whole until every client has ``min_size``.

    For each class: shuffle its pool, draw p ~ Dir(concentration·1_K), zero the share of
    clients already holding >= cap_total/K samples (NIID's balance cap; None = no cap),
    renormalise and cut the pool at ``cut_points``. ``test_pools`` (FedPCE) are cut with the
    same proportions and count towards the minimum size.
    """
    used = sum(len(p) for p in train_pools)
    if min_size * num_clients > used:
        raise ValueError(
            f"partition: min size {min_size} x {num_clients} clients exceeds the {used} samples"
        )
    for _ in range(MAX_RESAMPLES):
        train_parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
        test_parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
        sizes = np.zeros(num_clients, dtype=np.int64)
        test_sizes = np.zeros(num_clients, dtype=np.int64)
        for c, pool in enumerate(train_pools):
            pool = rng.permutation(pool)
            test_pool = rng.permutation(test_pools[c]) if test_pools is not None else None
            props = rng.dirichlet(np.full(num_clients, concentration))
            if cap_total is not None:
                props = props * (sizes < cap_total / num_clients)
            props = props / props.sum()
            for k, piece in enumerate(np.split(pool, cut_points(props, len(pool), rounding))):
                train_parts[k].append(piece)
                sizes[k] += len(piece)
            if test_pool is not None:
                cuts = cut_points(props, len(test_pool), rounding)
                for k, piece in enumerate(np.split(test_pool, cuts)):
                    test_parts[k].append(piece)
                    test_sizes[k] += len(piece)
        smallest = sizes.min() if test_pools is None else min(sizes.min(), test_sizes.min())
        if smallest >= min_size:
            train = [rng.permutation(_concat(parts)) for parts in train_parts]
            test = None
            if test_pools is not None:
                test = [rng.permutation(_concat(parts)) for parts in test_parts]
            return train, test
    raise RuntimeError(
        f"partition: no Dirichlet draw gave every client >= {min_size} samples in "
        f"{MAX_RESAMPLES} tries (concentration {concentration}, {num_clients} clients)"
    )


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def mark_new_clients(
    clients: Sequence[ClientPart], group_size: int, fraction: float, rng: np.random.Generator
) -> None:
    """FedPCE's "new" (client-training) clients: in each consecutive group of ``group_size``
    clients (one degradation or domain) a seeded permutation picks round(fraction·size)."""
    for start in range(0, len(clients), group_size):
        group = np.arange(start, min(start + group_size, len(clients)))
        for i in rng.permutation(group)[: int(round(fraction * len(group)))]:
            clients[i].new = True
