"""Small-sample geometry of client vectors (FedPCE Figs. 1 and 3): silhouette, PCA, t-SNE.

NumPy only; the clients of one run are a few dozen points, so everything is exact (no
approximations, no neighbour trees). Training jobs record the silhouette of the clients'
local tensors by group; figures project them to 2-D.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pca_2d", "silhouette", "silhouette_vs_shuffled", "tsne_2d"]


def _distances(x: np.ndarray) -> np.ndarray:
    sq = (x * x).sum(1)
    return np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * x @ x.T, 0.0))


def silhouette(x: np.ndarray, labels: list) -> float:
    """Mean silhouette (Euclidean) of the points ``x`` (N×D) under ``labels``; a point alone
    in its label scores 0 (Rousseeuw 1987, as scikit-learn). Needs 2 ≤ #labels < N."""
    return _silhouette(_distances(np.asarray(x, dtype=np.float64)), labels)


def _silhouette(d: np.ndarray, labels: list) -> float:
    """``silhouette`` from the points' pairwise distances ``d`` (N×N)."""
    labels = np.asarray([str(v) for v in labels])
    names = np.unique(labels)
    if not 2 <= len(names) < len(labels):
        raise ValueError(f"silhouette: {len(names)} labels over {len(labels)} points")
    scores = np.zeros(len(d))
    for i in range(len(d)):
        own = labels == labels[i]
        if own.sum() == 1:
            continue
        a = d[i, own].sum() / (own.sum() - 1)
        b = min(d[i, labels == other].mean() for other in names if other != labels[i])
        scores[i] = (b - a) / max(a, b) if max(a, b) > 0 else 0.0
    return float(scores.mean())


def silhouette_vs_shuffled(x: np.ndarray, labels: list, shuffles: int = 200, seed: int = 0):
    """(silhouette under ``labels``, mean silhouette under ``shuffles`` seeded permutations
    of them): how much better the groups separate the points than chance labels would. The
    distances are computed once: labels do not change them (FedICON's 80 clients × a whole
    model's tensors took 30–60 s when each permutation recomputed them)."""
    rng = np.random.default_rng(seed)
    labels = list(labels)
    d = _distances(np.asarray(x, dtype=np.float64))
    chance = [_silhouette(d, list(rng.permutation(labels))) for _ in range(shuffles)]
    return _silhouette(d, labels), float(np.mean(chance))


def pca_2d(x: np.ndarray) -> np.ndarray:
    """The first two principal components of ``x`` (N×D), centred, signs fixed so that each
    component's largest loading is positive."""
    x = np.asarray(x, dtype=np.float64)
    centred = x - x.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    vt = vt[:2]
    signs = np.sign(vt[np.arange(len(vt)), np.abs(vt).argmax(1)])
    out = centred @ (vt * signs[:, None]).T
    return np.pad(out, ((0, 0), (0, 2 - out.shape[1])))


def _conditional(d2: np.ndarray, perplexity: float) -> np.ndarray:
    """Row-wise Gaussian affinities with each row's entropy at log(perplexity) (bisection)."""
    n = len(d2)
    p = np.zeros((n, n))
    target = np.log(perplexity)
    for i in range(n):
        row = np.delete(d2[i], i)
        lo, hi, beta = 0.0, np.inf, 1.0
        for _ in range(100):
            w = np.exp(-(row - row.min()) * beta)
            q = w / w.sum()
            entropy = -(q * np.log(np.maximum(q, 1e-300))).sum()
            if abs(entropy - target) < 1e-6:
                break
            if entropy > target:
                lo, beta = beta, beta * 2 if hi == np.inf else (beta + hi) / 2
            else:
                hi, beta = beta, (beta + lo) / 2
        p[i, np.arange(n) != i] = q
    return p


def tsne_2d(x: np.ndarray, perplexity: float = 30.0, iters: int = 1000, seed: int = 0):
    """Exact t-SNE (van der Maaten & Hinton 2008) to 2-D: perplexity capped at (N − 1)/3 as
    scikit-learn requires it below N, early exaggeration 12 for 250 steps, learning rate
    max(N / 48, 50), momentum 0.5 then 0.8, seeded initialisation N(0, 1e-4)."""
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if n < 4:
        raise ValueError(f"t-SNE: {n} points is too few")
    perplexity = min(perplexity, (n - 1) / 3)
    d2 = _distances(x) ** 2
    p = _conditional(d2, perplexity)
    p = np.maximum((p + p.T) / (2 * n), 1e-12)
    y = np.random.default_rng(seed).normal(0.0, 1e-2, (n, 2))
    step, velocity = max(n / 48.0, 50.0), np.zeros_like(y)
    for t in range(iters):
        exaggerate = 12.0 if t < 250 else 1.0
        num = 1.0 / (1.0 + _distances(y) ** 2)
        np.fill_diagonal(num, 0.0)
        q = np.maximum(num / num.sum(), 1e-12)
        pull = (exaggerate * p - q) * num
        grad = 4.0 * (np.diag(pull.sum(1)) - pull) @ y
        velocity = (0.5 if t < 250 else 0.8) * velocity - step * grad
        y = y + velocity
        y -= y.mean(0)
    return y
