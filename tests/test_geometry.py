"""Silhouette, PCA and t-SNE of a few dozen client vectors (FedPCE Figs. 1, 3 and its
clustering claim)."""

from __future__ import annotations

import numpy as np
import pytest

from fedrepro.geometry import pca_2d, silhouette, silhouette_vs_shuffled, tsne_2d


def test_silhouette_by_hand():
    x = np.array([[0.0], [1.0], [5.0], [7.0]])
    # point 0: a = 1, b = mean(5, 7) = 6 → 5/6; point 1: a = 1, b = 5 → 4/5;
    # point 2: a = 2, b = 4.5 → 2.5/4.5; point 3: a = 2, b = 6.5 → 4.5/6.5
    expected = np.mean([5 / 6, 4 / 5, 2.5 / 4.5, 4.5 / 6.5])
    assert silhouette(x, ["a", "a", "b", "b"]) == pytest.approx(expected)
    with pytest.raises(ValueError, match="labels"):
        silhouette(x, ["a"] * 4)


def _clusters(seed=0, n=8):
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0] * 6, [5.0] * 6, [-5.0, 5.0] * 3])
    x = np.concatenate([c + rng.normal(0, 0.5, (n, 6)) for c in centres])
    return x, [g for g in "abc" for _ in range(n)]


def test_grouped_points_beat_shuffled_labels():
    x, labels = _clusters()
    real, chance = silhouette_vs_shuffled(x, labels, shuffles=50)
    assert real > 0.7 and abs(chance) < 0.2
    noise = np.random.default_rng(1).normal(size=x.shape)
    real, chance = silhouette_vs_shuffled(noise, labels, shuffles=50)
    assert real - chance < 0.15  # no structure: no better than chance


def test_the_shuffled_baseline_is_each_permutation_scored_on_its_own():
    """Distances computed once give exactly what scoring every permutation afresh gives."""
    x, labels = _clusters()
    rng = np.random.default_rng(3)
    alone = [silhouette(x, list(rng.permutation(labels))) for _ in range(20)]
    real, chance = silhouette_vs_shuffled(x, labels, shuffles=20, seed=3)
    assert real == silhouette(x, labels)
    assert chance == float(np.mean(alone))


def test_projections_keep_the_groups_apart():
    x, labels = _clusters()
    for y in (pca_2d(x), tsne_2d(x)):
        assert y.shape == (24, 2) and np.isfinite(y).all()
        assert silhouette(y, labels) > 0.6
    assert np.array_equal(tsne_2d(x, iters=300), tsne_2d(x, iters=300))  # seeded
    line = pca_2d(np.outer(np.arange(5.0), [1.0, 2.0]))  # points on one line: one component
    assert np.allclose(line[:, 1], 0)
    assert np.allclose(np.abs(line[:, 0]), np.abs(np.arange(5.0) - 2) * 5**0.5)


def test_tsne_separates_clear_groups_within_300_steps():
    """scikit-learn's t-SNE (adaptive gains, PCA start) has the three groups apart after 300
    steps; the hand-written plain descent before issue 32 had not yet left its start there
    (silhouette −0.01, its KL divergence 1.45 against 0.56)."""
    x, labels = _clusters()
    y = tsne_2d(x, iters=300)
    assert y.shape == (24, 2) and np.isfinite(y).all()
    assert silhouette(y, labels) > 0.5
    with pytest.raises(ValueError, match="too few"):
        tsne_2d(x[:3])


def test_distances_do_not_depend_on_the_thread_count():
    """Clients' tensors of FedPer's CIFAR-100 head shape (a Slurm job of 1 CPU and a local run
    of 2 gave its silhouette apart in the 8th digit when the Gram matrix was a BLAS product)."""
    from threadpoolctl import threadpool_limits

    x = np.random.default_rng(0).standard_normal((10, 12_900)).astype(np.float32)
    scores = []
    for threads in (1, 2):
        with threadpool_limits(threads):
            scores.append(silhouette_vs_shuffled(x, [0, 1] * 5, shuffles=3))
    assert scores[0] == scores[1]
