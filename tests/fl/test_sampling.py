"""Cross-device client sampling (adapters paper §III: a fraction f drawn with replacement)."""

from __future__ import annotations

from collections import Counter

import numpy as np

from fedrepro.fl.sampling import sample_clients
from tests.fl_helpers import problem, run, train_cfg


def test_cross_device_draws_twenty_of_a_hundred_each_round_reproducibly():
    rounds = [sample_clients(100, 0.2, r, seed=3, replacement=True) for r in range(1, 51)]
    assert all(len(p) == 20 and all(0 <= k < 100 for k in p) for p in rounds)
    assert rounds == [sample_clients(100, 0.2, r, seed=3, replacement=True) for r in range(1, 51)]
    assert len({tuple(p) for p in rounds}) == 50  # a new draw every round
    assert rounds != [sample_clients(100, 0.2, r, seed=4, replacement=True) for r in range(1, 51)]
    # With replacement, a client can be drawn twice in one round (P(no repeat) ≈ 0.13).
    assert sum(len(set(p)) < len(p) for p in rounds) > 25
    without = [sample_clients(100, 0.2, r, seed=3) for r in range(1, 51)]
    assert all(len(set(p)) == 20 for p in without)


def test_every_client_is_drawn_about_equally_often():
    counts = Counter(k for r in range(1, 2001) for k in sample_clients(100, 0.2, r, 0, True))
    expected = 2000 * 20 / 100
    chi2 = sum((counts[k] - expected) ** 2 / expected for k in range(100))
    assert len(counts) == 100
    assert chi2 < 160  # 99 degrees of freedom: p ≈ 1e-4 at 160


def test_engine_trains_a_client_drawn_twice_twice():
    data, clients = problem(num_clients=10, per_client=8)
    cfg = train_cfg(rounds=6, fraction=0.5)
    cfg["train"]["replacement"] = True
    state, _, _ = run({"name": "fedavg"}, cfg, data, clients)
    plain, _, _ = run({"name": "fedavg"}, train_cfg(rounds=6, fraction=0.5), data, clients)
    picks = [sample_clients(10, 0.5, r, 0, True) for r in range(1, 7)]
    assert any(len(set(p)) < len(p) for p in picks)
    assert [r["clients"] for r in state.history] == [len(p) for p in picks] == [5] * 6
    assert all(np.isfinite(r["acc"]) for r in state.history)
    assert state.history[-1]["loss"] != plain.history[-1]["loss"]  # other draws, other model
