"""K-fold cross-validation inside each client (FedPCE §4.3): a client's images (its train and
test shares pooled) are cut into K folds; fold ``fold`` validates, the rest trains.

The cut is scikit-learn's ``KFold(K, shuffle=True, random_state=1)`` as FedPCE's code uses it
(somcogo/fedpce@b673d68:utils/data_loader.py): positions shuffled by NumPy's legacy
``RandomState(1)``, then K consecutive folds, the first ``n mod K`` one longer.
"""

from __future__ import annotations

import numpy as np

FOLD_SEED = 1  # FedPCE's random_state


def kfold(n: int, folds: int, fold: int, seed: int = FOLD_SEED) -> tuple[np.ndarray, np.ndarray]:
    """(train positions, validation positions) of fold ``fold`` among ``folds`` over ``n``."""
    if folds < 2 or not 0 <= fold < folds:
        raise ValueError(f"cv: fold {fold} of {folds} (need folds >= 2 and 0 <= fold < folds)")
    if n < folds:
        raise ValueError(f"cv: {n} images cannot make {folds} folds")
    order = np.arange(n)
    np.random.RandomState(seed).shuffle(order)
    sizes = np.full(folds, n // folds)
    sizes[: n % folds] += 1
    start = int(sizes[:fold].sum())
    val = order[start : start + sizes[fold]]
    train = np.concatenate([order[:start], order[start + sizes[fold] :]])
    return train, val
