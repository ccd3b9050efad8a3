"""FedICON's contrastive losses (FedICON §4.1.1 Eq. 4–5, §4.2 Eq. 7; docs/methods/fedicon.md):
the invariants every implementation must keep."""

from __future__ import annotations

import math

import pytest
import torch

from fedrepro.fl.contrastive import contrastive_loss, normalized


def _views(b: int = 6, d: int = 5, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return normalized(torch.randn(2 * b, d, generator=gen, dtype=torch.float64))


def _by_the_formula(z, labels, tau):
    """Eq. 4 written out anchor by anchor (A(a) = every other view)."""
    n = len(z)
    total = 0.0
    for a in range(n):
        others = [b for b in range(n) if b != a]
        denom = sum(math.exp(float(z[a] @ z[b]) / tau) for b in others)
        if labels is None:
            pos = [(a + n // 2) % n]
        else:
            pos = [p for p in others if labels[p] == labels[a]]
        total += -sum(math.log(math.exp(float(z[a] @ z[p]) / tau) / denom) for p in pos) / len(pos)
    return total / n


def test_supcon_and_ntxent_equal_the_written_out_formula():
    z = _views()
    y = torch.tensor([0, 1, 0, 2, 1, 1])
    labels = torch.cat([y, y])
    assert float(contrastive_loss(z, labels, 0.1)) == pytest.approx(
        _by_the_formula(z, labels.tolist(), 0.1), rel=1e-10
    )
    assert float(contrastive_loss(z, None, 0.5)) == pytest.approx(
        _by_the_formula(z, None, 0.5), rel=1e-10
    )


def test_supcon_with_distinct_labels_is_ntxent():
    z = _views()
    distinct = torch.arange(6).repeat(2)
    assert torch.equal(contrastive_loss(z, distinct, 0.1), contrastive_loss(z, None, 0.1))


def test_loss_is_invariant_to_permuting_the_batch_and_scaling_features():
    gen = torch.Generator().manual_seed(1)
    h = torch.randn(8, 4, generator=gen, dtype=torch.float64)
    y = torch.tensor([0, 1, 1, 2])
    loss = contrastive_loss(normalized(h), torch.cat([y, y]), 0.1)
    perm = torch.tensor([2, 0, 3, 1])
    both = torch.cat([perm, perm + 4])  # the same permutation of both views keeps twins paired
    permuted = contrastive_loss(normalized(h[both]), torch.cat([y[perm], y[perm]]), 0.1)
    scaled = contrastive_loss(normalized(3.7 * h), torch.cat([y, y]), 0.1)
    assert float(permuted) == pytest.approx(float(loss), rel=1e-12)
    assert float(scaled) == pytest.approx(float(loss), rel=1e-12)


@pytest.mark.parametrize("base", [None, 0.07])
def test_identical_features_give_log_of_the_candidates_for_any_labels(base):
    b = 5
    z = normalized(torch.ones(2 * b, 3, dtype=torch.float64))
    scale = 1.0 if base is None else 0.1 / base
    for labels in (None, torch.zeros(2 * b, dtype=torch.long), torch.arange(2 * b) % 3):
        loss = float(contrastive_loss(z, labels, 0.1, base))
        assert loss == pytest.approx(scale * math.log(2 * b - 1), rel=1e-12)


def test_odd_rows_or_mismatched_labels_are_refused():
    with pytest.raises(ValueError, match="two views"):
        contrastive_loss(_views()[:5])
    with pytest.raises(ValueError, match="labels"):
        contrastive_loss(_views(), torch.zeros(5, dtype=torch.long))
