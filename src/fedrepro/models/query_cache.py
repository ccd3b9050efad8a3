"""The frozen query of an instance-wise pool, computed once per image where the image repeats.

FedIns's SSF pool and the prompt pool pick their entries with ``q(x)``, the final-LN CLS token
of a frozen copy of the pretrained ViT. That copy never trains, so ``q`` depends on the input
alone. Where a sample's input is a fixed function of its index in a split — evaluation without
a client transform, and training without augmentation, client transform or extra views — the
engine names the batch's split and indices (``inputs_of``) and ``q`` is computed once per image
and looked up afterwards. Without that naming (training with augmentation: every draw is a new
image) every forward computes ``q``, as before.

Exactness: a cached row was computed in the batch in which its image first appeared, the
uncached path computes it in the current batch; the two are equal where the query forward is
batch-invariant (a row depends on its own input only, to the bit). The evaluation batches of a
split are the same every round, so there the cache reuses the very same computation; in training
(shuffled batches) equality rests on batch invariance, which tests/models/test_query_cache.py
checks on this machine's kernels. ``train.cache_query: false`` turns the cache off.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn


class QueryCache:
    """Per split (keyed by identity, the split held) a table of query rows and which of them
    are filled; ``key``
    names the current batch (the split and its indices) while ``inputs_of`` is open."""

    def __init__(self) -> None:
        self.tables: dict[int, tuple[object, torch.Tensor | None, torch.Tensor]] = {}
        self.key: tuple[object, torch.Tensor] | None = None
        self.computed = 0  # query rows computed (a counter for tests and profiles)

    def __deepcopy__(self, memo: dict) -> QueryCache:
        return QueryCache()  # a copied model (a client's snapshot) starts with an empty cache


def frozen_query(query: nn.Module, cache: QueryCache, x: torch.Tensor) -> torch.Tensor:
    """``q(x)``: the frozen ``query`` model's final-LN CLS token, from ``cache`` where its key
    names the batch; rows not yet cached are computed (the whole batch the first time)."""
    with torch.no_grad():
        if cache.key is None:
            cache.computed += len(x)
            return query.forward_features(x)[:, 0]
        split, idx = cache.key
        # the entry holds its split, so no other object can take that id while it lives
        _, table, filled = cache.tables.get(id(split), (split, None, None))
        if filled is None:
            filled = torch.zeros(len(split.labels), dtype=torch.bool, device=idx.device)
        missing = ~filled[idx]
        if bool(missing.all()):
            rows = query.forward_features(x)[:, 0]
        elif bool(missing.any()):
            rows = query.forward_features(x[missing])[:, 0]
        else:
            return table[idx]
        if table is None:
            table = rows.new_empty((len(filled), rows.shape[1]))
        table[idx[missing]] = rows
        filled[idx[missing]] = True
        cache.tables[id(split)] = (split, table, filled)
        cache.computed += len(rows)
        return table[idx]


@contextmanager
def inputs_of(model: nn.Module, split: object, idx: torch.Tensor, enabled: bool = True):
    """Within the block, the batch ``model`` gets is split ``split``'s samples ``idx``, each a
    fixed function of its index (no augmentation, no client transform). A no-op for a model
    without a query cache, or when not ``enabled``."""
    cache = getattr(model, "query_cache", None)
    if cache is None or not enabled:
        yield
        return
    cache.key = (split, idx)
    try:
        yield
    finally:
        cache.key = None
