"""Test-time adaptation baselines, applied per client to a trained model (FedICON §5.1: Tent,
EATA, T3A "with the FedAvg framework"; docs/methods/fedicon.md). They run on the ``adapt``
stage as engine runs in which every tensor stays on its client and nothing is sent.

- **Tent** (Wang et al., ICLR 2021): minimise the mean softmax entropy of the client's
  unlabelled test batches over the batch-norm affine parameters only, batch norm always
  normalising with the batch's own statistics (training and prediction alike).
- **EATA** (Niu et al., ICML 2022): Tent on the reliable and non-redundant samples only
  (entropy below ``e_margin``·ln C; softmax not within cosine ``d_margin`` of the running mean
  of earlier selected ones), each weighted by exp(E0 − entropy), plus the Fisher-weighted
  anchor ``fisher_alpha`` Σ F (θ − θ0)², F from pseudo-label cross-entropy gradients on up to
  ``fisher_size`` of the client's training images (the in-distribution data it has).
- **T3A** (Iwasawa & Matsuo, NeurIPS 2021): no gradients; the linear classifier is replaced by
  prototypes of support representations that grow with each predicted test batch, the
  ``filter_k`` lowest-entropy supports per class kept (50, FedTHE's setting, which FedICON's
  benchmark follows).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.algorithms.personalized import Local
from fedrepro.fl.algorithm import ClientCtx
from fedrepro.fl.contrastive import representation
from fedrepro.fl.tensors import per_client_moved

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


class EATA(Tent):
    name = "eata"

    def __init__(
        self,
        e_margin: float = 0.4,
        d_margin: float = 0.05,
        fisher_alpha: float = 2000.0,
        fisher_size: int = 2000,
        fisher_batch: int = 64,
        **kw,
    ):
        super().__init__(**kw)
        self.e_margin = float(e_margin)  # × ln C
        self.d_margin = float(d_margin)
        self.fisher_alpha = float(fisher_alpha)
        self.fisher_size = int(fisher_size)
        self.fisher_batch = int(fisher_batch)
        # per client: Fisher information, anchor weights, running mean of selected softmax
        self.fisher: dict[int, dict[str, torch.Tensor]] = {}
        self.anchor: dict[int, dict[str, torch.Tensor]] = {}
        self.probs: dict[int, torch.Tensor] = {}

    def client_begin(self, ctx: ClientCtx) -> None:
        if ctx.client not in self.fisher:  # once per client, at its starting weights
            self._fisher(ctx)

    def _fisher(self, ctx: ClientCtx) -> None:
        model = ctx.model
        params = {n: p for n, p in model.named_parameters() if p.requires_grad}
        fisher = {n: torch.zeros_like(p) for n, p in params.items()}
        # a client without data (counting FLOPs) gets no Fisher information
        idx = ctx.idx[: self.fisher_size] if ctx.data is not None else ()
        batches = 0
        model.train()
        for start in range(0, len(idx), self.fisher_batch):
            x, _ = ctx.data.batch(idx[start : start + self.fisher_batch])
            out = model(x)
            grads = torch.autograd.grad(F.cross_entropy(out, out.argmax(1)), list(params.values()))
            for n, g in zip(params, grads, strict=True):
                fisher[n] += g.detach() ** 2
            batches += 1
        self.fisher[ctx.client] = {n: f / max(batches, 1) for n, f in fisher.items()}
        self.anchor[ctx.client] = {n: p.detach().clone() for n, p in params.items()}

    def objective(self, ctx: ClientCtx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
        k = ctx.client
        out = ctx.model(x)
        margin = self.e_margin * math.log(out.shape[1])
        ent = entropy(out)
        reliable = ent < margin
        probs = out[reliable].softmax(1)
        fresh = torch.ones(len(probs), dtype=torch.bool, device=out.device)
        if k in self.probs and len(probs):
            similar = F.cosine_similarity(self.probs[k].to(out.device)[None], probs, dim=1)
            fresh = similar.abs() < self.d_margin
        chosen = probs[fresh].detach()
        if len(chosen):
            mean = chosen.mean(0)
            old = self.probs.get(k)
            self.probs[k] = mean if old is None else 0.9 * old.to(mean.device) + 0.1 * mean
        picked = ent[reliable][fresh]
        if not len(picked):
            return None
        loss = (picked * torch.exp(margin - picked.detach())).mean()
        params = dict(ctx.model.named_parameters())
        for n, f in self.fisher[k].items():
            p = params[n]
            anchor = self.anchor[k][n].to(p.device)
            loss = loss + self.fisher_alpha * (f.to(p.device) * (p - anchor) ** 2).sum()
        return loss

    def state_dict(self) -> dict:
        return {
            "fisher": per_client_moved(self.fisher, "cpu"),
            "anchor": per_client_moved(self.anchor, "cpu"),
            "probs": {k: v.cpu() for k, v in self.probs.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        self.fisher = per_client_moved(state.get("fisher", {}), "cpu")
        self.anchor = per_client_moved(state.get("anchor", {}), "cpu")
        self.probs = {int(k): v for k, v in state.get("probs", {}).items()}


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

    def predictor(self, model: nn.Module, client: int = 0, generator=None) -> nn.Module:
        return T3APredictor(model, self.filter_k)
