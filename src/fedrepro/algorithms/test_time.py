"""Test-time adaptation baselines, applied per client to a trained model (FedICON §5.1: Tent,
EATA, T3A "with the FedAvg framework"; docs/methods/fedicon.md). They run on the ``adapt``
stage as engine runs in which every tensor stays on its client and nothing is sent.

- **Tent** (Wang et al., ICLR 2021): minimise the mean softmax entropy of the client's
  unlabelled test batches over the batch-norm affine parameters only, batch norm always
  normalising with the batch's own statistics (training and prediction alike).
- **T3A** (Iwasawa & Matsuo, NeurIPS 2021): no gradients; the linear classifier is replaced by
  prototypes of support representations that grow with each predicted test batch, the
  ``filter_k`` lowest-entropy supports per class kept (50, FedTHE's setting, which FedICON's
  benchmark follows).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.algorithms.personalized import Local
from fedrepro.fl.algorithm import ClientCtx
from fedrepro.fl.contrastive import representation

BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Softmax entropy of each row."""
    return -(logits.softmax(1) * logits.log_softmax(1)).sum(1)


def batch_norm_affine(model: nn.Module) -> set[str]:
    """Names of every batch-norm weight and bias (what Tent and EATA adapt)."""
    return {
        f"{name}.{p}" if name else p
        for name, m in model.named_modules()
        if isinstance(m, BATCH_NORMS)
        for p, _ in m.named_parameters(recurse=False)
    }


def use_batch_statistics(model: nn.Module) -> None:
    """Batch norm normalises with each batch's own statistics from now on (Tent's
    ``configure_model``): running statistics dropped, in eval mode too."""
    norms = [m for m in model.modules() if isinstance(m, BATCH_NORMS)]
    if not norms:
        raise ValueError(f"tent: {type(model).__name__} has no batch norm to adapt")
    for m in norms:
        m.track_running_stats = False
        m.running_mean = None
        m.running_var = None
        m.num_batches_tracked = None


class Tent(Local):
    name = "tent"

    def setup(self, model: nn.Module, num_clients: int) -> None:
        use_batch_statistics(model)
        super().setup(model, num_clients)

    def fit_split(self, r: int) -> str:
        return "test"

    def objective(self, ctx: ClientCtx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return entropy(ctx.model(x)).mean()


class T3APredictor(nn.Module):
    """The model's representation scored against class prototypes of support
    representations: first the classifier's rows, then every predicted test representation
    (labelled by its prediction, ranked by its entropy), ``filter_k`` kept per class
    (``None``: all)."""

    def __init__(self, model: nn.Module, filter_k: int | None):
        super().__init__()
        self.model = model
        self.filter_k = filter_k
        head = model.get_classifier()
        w = head.weight.detach()
        self.num_classes = len(w)
        self.supports = w.clone()
        self.labels = torch.arange(len(w), device=w.device)
        self.entropies = entropy(head(w))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = representation(self.model, x)
        logits = self.model.get_classifier()(z)
        self.supports = torch.cat([self.supports, z])
        self.labels = torch.cat([self.labels, logits.argmax(1)])
        self.entropies = torch.cat([self.entropies, entropy(logits)])
        self._keep_lowest_entropy()
        return self.scores(z)

    def scores(self, z: torch.Tensor) -> torch.Tensor:
        """Each representation against the normalised mean of each class's supports."""
        onehot = F.one_hot(self.labels, self.num_classes).to(z.dtype)
        prototypes = F.normalize(self.supports, dim=1).T @ onehot
        return z @ F.normalize(prototypes, dim=0)

    def _keep_lowest_entropy(self) -> None:
        if self.filter_k is None:
            return
        keep = []
        for c in self.labels.unique():
            idx = (self.labels == c).nonzero().flatten()
            order = torch.sort(self.entropies[idx], stable=True).indices
            keep.append(idx[order[: self.filter_k]])
        kept = torch.cat(keep).sort().values
        self.supports, self.labels = self.supports[kept], self.labels[kept]
        self.entropies = self.entropies[kept]


class T3A(Local):
    name = "t3a"

    def __init__(self, filter_k: int | None = 50, **kw):
        super().__init__(**kw)
        self.filter_k = None if filter_k is None else int(filter_k)

    def predictor(self, model: nn.Module) -> nn.Module:
        return T3APredictor(model, self.filter_k)
