"""Small-sample geometry of client vectors (FedPCE Figs. 1 and 3): silhouette, PCA, t-SNE.

The clients of one run are a few dozen points, so everything is exact (no approximations, no
neighbour trees): NumPy, and scikit-learn's exact t-SNE. Training jobs record the silhouette
of the clients' local tensors by group; figures project them to 2-D.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pca_2d", "silhouette", "silhouette_vs_shuffled", "tsne_2d"]


def _distances(x: np.ndarray) -> np.ndarray:
    """Pairwise Euclidean distances. The Gram matrix is einsum's own loop, not BLAS: a BLAS
    product's summation order follows its thread count (a 1-CPU Slurm job and a 2-core local
    run gave FedPer's silhouette apart in the 8th digit from identical tensors)."""
    sq = (x * x).sum(1)
    return np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * np.einsum("id,jd->ij", x, x), 0.0))


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


def tsne_2d(x: np.ndarray, perplexity: float = 30.0, iters: int = 1000, seed: int = 0):
    """scikit-learn's exact t-SNE to 2-D (van der Maaten & Hinton 2008, with the reference
    implementation's adaptive gains), seeded; the perplexity capped at (N − 1)/3 (it must
    stay below N); scikit-learn's defaults otherwise (PCA initialisation, learning rate
    max(N / 48, 50), early exaggeration 12)."""
    from sklearn.manifold import TSNE  # 1-2 s to import; training jobs import this module

    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if n < 4:
        raise ValueError(f"t-SNE: {n} points is too few")
    tsne = TSNE(
        perplexity=min(perplexity, (n - 1) / 3), max_iter=iters, method="exact", random_state=seed
    )
    return tsne.fit_transform(x)
