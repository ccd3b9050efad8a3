"""Per-class logit exchange (FedHPL §3.3–3.4, Eq. 7–10, App. C.1–C.4; docs/methods/fedhpl.md).

Clients exchange logits, not weights. After local training a client keeps the training
samples it classifies correctly and uploads either every such logit with its label
(*all-upload*, C + 1 scalars a sample) or, per class, their mean and count (*average-upload*,
Eq. 10: C·C + C scalars). The server gives client k, for every class c, one global logit

    ẑ^k_c = κ · Σ_j ω_{k←j} Σ_{i ∈ S_c^j} z_i^j / (Σ_j ω_{k←j} n_c^j + 1)

(Eq. 8 as reconstructed: the seed lost its symbols), ω_{k←j} a weight from the two clients'
latent dimensions (Eq. 7; 1 when they are equal), and sends client k its C×C matrix. Since a
class mean times its count is the class sum, both uploads give the same ẑ (App. C.4's
cosine 1). ``weighted`` denominators carry ω as above; ``unweighted`` ones are
Σ_j n_c^j + 1. The local loss adds λ·τ²·KL(softmax(ẑ_y/τ) ‖ softmax(z/τ)) (Eq. 9, lost:
the τ² factor is ours, ``tau_squared``); a class no client classified correctly has no
teacher, and its samples fall back to their own logits (KD 0, App. C.4).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

WEIGHTINGS = ("ratio", "linear", "uniform")
DENOMINATORS = ("weighted", "unweighted")
KD_REDUCTIONS = ("mean_over_samples", "mean_over_classes")


def correct(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Which samples the client classifies correctly (only these are uploaded)."""
    return logits.argmax(1) == labels


def class_sums(
    logits: torch.Tensor, labels: torch.Tensor, num_classes: int, keep: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per class, the sum of the kept samples' logits (C×C) and their count (C). Samples not
    kept add exact zeros (no read of how many are kept: a GPU upload waits for nothing; the
    sums are those of the kept samples alone, bit for bit)."""
    sums = torch.zeros(num_classes, logits.shape[1], dtype=logits.dtype, device=logits.device)
    if keep is None:
        sums.index_add_(0, labels, logits)
        return sums, torch.bincount(labels, minlength=num_classes).to(logits.dtype)
    sums.index_add_(0, labels, torch.where(keep[:, None], logits, 0.0))
    counts = sums.new_zeros(num_classes).index_add_(0, labels, keep.to(logits.dtype))
    return sums, counts


def upload_all(
    logits: torch.Tensor, labels: torch.Tensor, correct_only: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """All-upload: every kept logit with its label (``correct_only: false`` keeps every
    sample, Fig. 3c's "uploading all logits" ablation)."""
    if not correct_only:
        return logits, labels
    kept = correct(logits, labels).nonzero().flatten()  # the upload's one read: its size
    return logits[kept], labels[kept]


def upload_average(
    logits: torch.Tensor, labels: torch.Tensor, num_classes: int, correct_only: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Average-upload (Eq. 10): per class the mean kept logit (zeros for an empty class)
    and the count."""
    keep = correct(logits, labels) if correct_only else None
    sums, counts = class_sums(logits, labels, num_classes, keep)
    return sums / counts.clamp(min=1)[:, None], counts


def dimension_weights(dims: list[int], kind: str = "ratio") -> torch.Tensor:
    """ω[k, j] = ω_{k←j} from the clients' latent dimensions (Eq. 7 reconstructed): ``ratio``
    min/max, ``linear`` 1 − |d_k − d_j| / max d, ``uniform`` 1 (the "average aggregation"
    ablation). Equal dimensions weigh 1 under every kind."""
    if kind not in WEIGHTINGS:
        raise ValueError(f"logit weighting: {kind!r} (allowed: {', '.join(WEIGHTINGS)})")
    d = torch.tensor(dims, dtype=torch.float64)
    if kind == "uniform":
        return torch.ones(len(dims), len(dims), dtype=torch.float64)
    if kind == "ratio":
        return torch.minimum(d[:, None], d[None, :]) / torch.maximum(d[:, None], d[None, :])
    return 1 - (d[:, None] - d[None, :]).abs() / d.max()


def aggregate(
    sums: torch.Tensor,
    counts: torch.Tensor,
    weights: torch.Tensor,
    kappa: float = 1.0,
    denominator: str = "weighted",
) -> torch.Tensor:
    """Every client's global per-class logits ``[K, C, C]`` (Eq. 8) from the clients' class
    sums ``[J, C, C]`` and counts ``[J, C]`` and the weights ``[K, J]``."""
    if denominator not in DENOMINATORS:
        raise ValueError(f"logit denominator: {denominator!r} (allowed: {', '.join(DENOMINATORS)})")
    w = weights.to(sums.dtype)
    numerator = torch.einsum("kj,jcd->kcd", w, sums)
    if denominator == "weighted":
        den = w @ counts.to(sums.dtype)  # [K, C]
    else:
        den = counts.to(sums.dtype).sum(0).expand(len(w), -1)
    return kappa * numerator / (den + 1)[..., None]


def has_teacher(global_logits: torch.Tensor) -> torch.Tensor:
    """Which classes of one client's C×C global logits rest on any correct logit: Eq. 8's
    numerator is 0 exactly when no client kept a sample of the class, so its row is zero
    (the rows are what a client downloads; nothing else is sent)."""
    return global_logits.abs().sum(-1) > 0


def kd_loss(
    student: torch.Tensor,
    global_logits: torch.Tensor,
    labels: torch.Tensor,
    available: torch.Tensor,
    temperature: float,
    reduction: str = "mean_over_samples",
    tau_squared: bool = True,
) -> torch.Tensor:
    """Eq. 9 for one client: τ²·KL(softmax(ẑ_{y_i}/τ) ‖ softmax(z_i/τ)) per sample, its
    teacher the global logit of its label (``global_logits``: C×C, ``available``: C); a
    sample whose class has no teacher is its own (KD 0). ``mean_over_classes`` averages the
    per-class means over the classes present instead of over samples; ``tau_squared: False``
    drops the τ² factor (the equation is lost; Hinton et al.'s factor is our default)."""
    if reduction not in KD_REDUCTIONS:
        raise ValueError(f"kd reduction: {reduction!r} (allowed: {', '.join(KD_REDUCTIONS)})")
    teacher = torch.where(available[labels][:, None], global_logits[labels], student.detach())
    t = temperature
    per_sample = F.kl_div(
        F.log_softmax(student / t, dim=1),
        F.log_softmax(teacher / t, dim=1),
        reduction="none",
        log_target=True,
    ).sum(1)
    if tau_squared:
        per_sample = per_sample * t * t
    if reduction == "mean_over_samples":
        return per_sample.mean()
    present = labels.unique()
    return torch.stack([per_sample[labels == c].mean() for c in present]).mean()


def upload_scalars(kind: str, num_correct: int, num_classes: int) -> int:
    """Scalars one client uploads a round (App. Table 9): all-upload C + 1 per kept sample,
    average-upload C·C + C."""
    if kind == "all":
        return num_correct * (num_classes + 1)
    if kind == "average":
        return num_classes * num_classes + num_classes
    raise ValueError(f"logit upload: {kind!r} (allowed: all, average)")


def download_scalars(num_classes: int) -> int:
    """Scalars one client downloads a round: its C×C global logits."""
    return num_classes * num_classes
