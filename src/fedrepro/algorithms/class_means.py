"""Heterogeneous-model baselines that exchange per-class means (FedHPL §4.1, App. B.4, C.1.2;
docs/methods/fedhpl.md): FedHE, FedProto, FedGH.

Each client keeps its whole model (nothing is averaged; the methods are meant for clients
with different models) and uploads, per class, a mean vector and the class's count (the
count doubles as the "label space" Table 9 adds to every per-class upload):

- **FedHE** (Chan & Ngai 2021): the mean logit of each class over the samples the client
  trained on this round; the server's global logit of class c is the count-weighted mean
  Σ_j n_c^j z̄_c^j / Σ_j n_c^j (``weighting: samples``; ``uniform`` weighs every client that
  holds c once, as the released code's server does); the local loss is
  CE + λ·MSE(z, ẑ_y) (λ = 0.5).
- **FedProto** (Tan et al. 2022): the same with the mapped representation (the prototype) in
  place of the logit, each client holding c weighing once (``uniform``), λ = 1, and a
  client predicting the class of the nearest global prototype (``predict: prototype``) or
  with its head (``head``).
- **FedGH** (Yi et al. 2023): after local training (CE) the client's class-mean mapped
  representations over its training images; the server trains a global head on those
  (mean, class) pairs only, and every client's head is replaced by it at the start of each
  round and for evaluation.

What is averaged per class is what the client's classifier reads (its input, taken by a
forward pre-hook: any model), so a client's model decides the width. The heterogeneous
clients of FedHPL's Table 2 are ``model.tuning: head_split`` (``fedrepro.models.head_split``),
whose body maps its latent to a common ``feature_dim`` (FedProto: pooled to 2048, then a
2048 × 512 mapping; FedGH: a linear 512 layer; Table 7): what crosses between clients is then
C·512 + C scalars up whatever the backbone (C·C + C for FedHE), the global means or the
global head down.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.fl.algorithm import Algorithm, ClientCtx, Payload
from fedrepro.fl.local import outputs_of
from fedrepro.fl.logits import class_sums
from fedrepro.fl.sampling import derive_seed
from fedrepro.fl.tensors import moved, named_state

PREDICTIONS = ("prototype", "head")
SERVER_HEAD_SEED = 0x6768  # FedGH's server batches: shuffled from (this, round); ours


def combine(
    means: torch.Tensor, counts: torch.Tensor, weighting: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """The global mean of every class from the clients' class means ``[J, C, D]`` and counts
    ``[J, C]``, and which classes any client holds. ``samples``: weighted by the counts
    (the class mean over every client's samples); ``uniform``: every client holding the class
    weighs once. A class no client holds gets a zero row."""
    held = counts > 0
    w = counts.double() if weighting == "samples" else held.double()
    total = w.sum(0)
    out = torch.einsum("jc,jcd->cd", w, means.double()) / total.clamp(min=1)[:, None]
    return out.float(), total > 0


def with_features(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's logits of ``x`` and what its classifier read to make them."""
    seen: list[torch.Tensor] = []
    hook = model.get_classifier().register_forward_pre_hook(lambda _, args: seen.append(args[0]))
    try:
        logits = model(x)
    finally:
        hook.remove()
    return logits, seen[-1]


def mse_to_global(q: torch.Tensor, y: torch.Tensor, teacher: tuple) -> torch.Tensor:
    """MSE(q, ĝ_y) over the batch's elements; a sample whose class has no global mean is its
    own target (it adds 0), as both released codes do."""
    means, present = teacher
    target = torch.where(present[y][:, None], means[y].to(q.dtype), q.detach())
    return F.mse_loss(q, target)


def trained_class_means(
    ctx: ClientCtx, num_classes: int, dim: int, batch_size: int
) -> dict[str, torch.Tensor]:
    """The class means (``means`` ``[C, dim]``) and counts (``counts`` ``[C]``) of what the
    classifier reads (the mapped representation) of the client's training images after local
    training (evaluation mode, no augmentation): FedGH's and FedTGP's uploads. A client without
    data (a structure job counting what is sent) holds ``num_samples`` images of class 0."""
    if ctx.data is None:  # shapes only (no bincount: it has no meta kernel)
        counts = torch.zeros(num_classes)
        counts[0] = ctx.num_samples
        return {"means": torch.zeros(num_classes, dim), "counts": counts}
    q, y = outputs_of(ctx.model, ctx.data, ctx.idx, lambda m, x: with_features(m, x)[1], batch_size)
    sums, counts = class_sums(q, y, num_classes)
    return {"means": sums / counts.clamp(min=1)[:, None], "counts": counts}


class FedHE(Algorithm):
    name = "fedhe"
    exchanged = ("global_means", "global_present")

    # λ = 0.5: ChanYunHin/FedHe@a53d7e0:parameters.py (``alpha``, the MSE term's weight)
    def __init__(self, lam: float = 0.5, **kw):
        super().__init__(**kw)
        self.lam = float(lam)
        self.global_means: torch.Tensor | None = None  # [C, D] after the first round
        self.global_present: torch.Tensor | None = None  # [C] bool
        self.teacher: tuple[torch.Tensor, torch.Tensor] | None = None

    def local_keys(self, model: nn.Module) -> set[str]:
        return set(named_state(model))

    def setup(self, model: nn.Module, num_clients: int) -> None:
        super().setup(model, num_clients)
        self.num_classes = model.get_classifier().out_features

    def exchanges(self) -> bool:
        return True

    def width(self, model: nn.Module) -> int:
        """The width of what is averaged per class: the logits."""
        return self.num_classes

    def outputs(self, model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch's logits and the vector its class means are taken of (the logits)."""
        logits = model(x)
        return logits, logits

    def downlink_to(self, client: int, down: dict) -> dict[str, torch.Tensor]:
        if self.global_means is None:
            return {}
        return {"means": self.global_means, "present": self.global_present}

    def client_begin(self, ctx: ClientCtx) -> None:
        device = next(ctx.model.parameters()).device
        width = self.width(ctx.model)
        self._sums = torch.zeros(self.num_classes, width, device=device)
        self._counts = torch.zeros(self.num_classes, device=device)
        self.teacher = None
        if self.lam > 0 and "means" in ctx.downloaded:
            d = ctx.downloaded
            self.teacher = d["means"].to(device), d["present"].to(device)

    def objective(self, ctx: ClientCtx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits, q = self.outputs(ctx.model, x)
        loss = F.cross_entropy(logits, y)
        sums, counts = class_sums(q.detach().float(), y, self.num_classes)
        self._sums += sums
        self._counts += counts
        if self.teacher is not None:
            loss = loss + self.lam * mse_to_global(q, y, self.teacher)
        return loss

    def client_end(self, ctx: ClientCtx) -> Payload:
        means = self._sums / self._counts.clamp(min=1)[:, None]
        extra = {"means": means, "counts": self._counts.clone()}
        return Payload(ctx.client, ctx.num_samples, ctx.steps, {}, extra)

    def exchange(self, payloads: list[Payload], r: int) -> None:
        """The global mean of every class from every client's upload, whatever its model."""
        means = torch.stack([p.extra["means"].cpu() for p in payloads])
        counts = torch.stack([p.extra["counts"].cpu() for p in payloads])
        self.global_means, self.global_present = combine(means, counts, self.weighting)

    def state_dict(self) -> dict:
        return {"global_means": self.global_means, "global_present": self.global_present}

    def load_state_dict(self, state: dict) -> None:
        self.global_means = state.get("global_means")
        self.global_present = state.get("global_present")


class NearestPrototype(nn.Module):
    """Scores −MSE(q, prototype_c) for every class with a global prototype (the nearest wins);
    a class without one scores below every class."""

    def __init__(self, model: nn.Module, prototypes: torch.Tensor, present: torch.Tensor):
        super().__init__()
        self.model = model
        self.prototypes, self.present = prototypes, present

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = with_features(self.model, x)[1].float()
        p = self.prototypes.to(q.device)
        score = -(q[:, None, :] - p[None]).pow(2).mean(-1)
        floor = score.min(1, keepdim=True).values - 1
        return torch.where(self.present.to(q.device)[None], score, floor)


class FedProto(FedHE):
    name = "fedproto"

    # λ = 1: TsingZ0/HtFLlib@61b9a19:system/main.py (``lamda``); the nearest prototype
    # predicts: TsingZ0/HtFLlib@61b9a19:system/flcore/clients/clientproto.py (``test_metrics``);
    # each client holding a class weighs once:
    # TsingZ0/HtFLlib@61b9a19:system/flcore/servers/serverproto.py (``proto_aggregation``)
    def __init__(
        self, lam: float = 1.0, predict: str = "prototype", weighting: str = "uniform", **kw
    ):
        super().__init__(lam=lam, weighting=weighting, **kw)
        if predict not in PREDICTIONS:
            raise ValueError(f"algorithm fedproto: predict {predict!r} (allowed: prototype, head)")
        self.predict = predict

    def width(self, model: nn.Module) -> int:
        return model.get_classifier().in_features

    def outputs(self, model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The logits and the prototype space's vector: what the classifier reads."""
        return with_features(model, x)

    def predictor(self, model: nn.Module, client: int = 0, generator=None) -> nn.Module:
        if self.predict == "head" or self.global_means is None:
            return model
        return NearestPrototype(model, self.global_means, self.global_present)


class FedGH(Algorithm):
    name = "fedgh"
    exchanged = ("global_head",)

    # server_lr 0.01, server_epochs 100: TsingZ0/HtFLlib@61b9a19:system/main.py
    # (``server_learning_rate``, ``server_epochs``); server_batch 10: the client ``batch_size``
    # its server reads (TsingZ0/HtFLlib@61b9a19:system/flcore/servers/servergh.py, main.py)
    def __init__(
        self, server_lr: float = 0.01, server_epochs: int = 100, server_batch: int = 10, **kw
    ):
        super().__init__(**kw)
        self.server_lr, self.server_epochs = float(server_lr), int(server_epochs)
        self.server_batch = int(server_batch)
        self.global_head: dict[str, torch.Tensor] = {}

    def local_keys(self, model: nn.Module) -> set[str]:
        return set(named_state(model))

    def setup(self, model: nn.Module, num_clients: int) -> None:
        super().setup(model, num_clients)
        head = linear_classifier(model, self.name)
        self.num_classes, self.dim = head.out_features, head.in_features
        # the server's head starts as the clients' common initial head (on the model's device:
        # a structure job's is on the meta device); the server trains it on the CPU
        self.global_head = {k: v.detach().clone() for k, v in head.state_dict().items()}

    def exchanges(self) -> bool:
        return True

    def downlink_to(self, client: int, down: dict) -> dict[str, torch.Tensor]:
        """The global head, every round (round 1: the initial head)."""
        return {f"head.{k}": v for k, v in self.global_head.items()}

    def client_begin(self, ctx: ClientCtx) -> None:
        """The client's head is replaced by the global one before it trains."""
        put_head(ctx.model, {k.removeprefix("head."): v for k, v in ctx.downloaded.items()})

    def client_end(self, ctx: ClientCtx) -> Payload:
        extra = trained_class_means(ctx, self.num_classes, self.dim, self.eval_batch)
        return Payload(ctx.client, ctx.num_samples, ctx.steps, {}, extra)

    def exchange(self, payloads: list[Payload], r: int) -> None:
        """Trains the global head on the uploaded (class mean, class) pairs of every client,
        whatever its model, and on nothing else: SGD at ``server_lr``, ``server_epochs`` passes
        in shuffled batches of ``server_batch`` (the last one kept), cross-entropy."""
        reps, labels = [], []
        for p in payloads:
            held = p.extra["counts"].cpu() > 0
            reps.append(p.extra["means"].cpu()[held])
            labels.append(torch.nonzero(held).flatten())
        start = moved(self.global_head, "cpu")
        self.global_head = train_head(
            start, torch.cat(reps).float(), torch.cat(labels), self.server_lr,
            self.server_epochs, self.server_batch, derive_seed(SERVER_HEAD_SEED, r),
        )  # fmt: skip

    def predictor(self, model: nn.Module, client: int = 0, generator=None) -> nn.Module:
        """Every client is evaluated with the global head on its own representation (the
        reference code evaluates after sending the head)."""
        put_head(model, self.global_head)
        return model

    def state_dict(self) -> dict:
        return {"global_head": moved(self.global_head, "cpu")}

    def load_state_dict(self, state: dict) -> None:
        self.global_head = moved(state["global_head"], "cpu")


def linear_classifier(model: nn.Module, algorithm: str) -> nn.Linear:
    """``model``'s classifier, which must be a linear layer with a bias (FedGH's and FedGen's
    heads are trained or averaged as one)."""
    head = model.get_classifier()
    if not isinstance(head, nn.Linear) or head.bias is None:
        raise ValueError(
            f"algorithm {algorithm}: the classifier must be a linear layer; got {head}"
        )
    return head


@torch.no_grad()
def put_head(model: nn.Module, head: dict[str, torch.Tensor]) -> None:
    """Copy a linear head (``weight``, ``bias``) into ``model``'s classifier, in place."""
    layer = model.get_classifier()
    layer.weight.copy_(head["weight"])
    layer.bias.copy_(head["bias"])


def train_head(
    head: dict[str, torch.Tensor],
    reps: torch.Tensor,
    labels: torch.Tensor,
    lr: float,
    epochs: int,
    batch: int,
    seed: int,
) -> dict[str, torch.Tensor]:
    """A linear head (``weight``, ``bias``) trained from ``head`` on ``(reps, labels)`` alone."""
    weight = head["weight"].clone().requires_grad_(True)
    bias = head["bias"].clone().requires_grad_(True)
    opt = torch.optim.SGD([weight, bias], lr=lr)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        order = torch.randperm(len(labels), generator=gen)
        for start in range(0, len(order), batch):
            b = order[start : start + batch]
            loss = F.cross_entropy(F.linear(reps[b], weight, bias), labels[b])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return {"weight": weight.detach(), "bias": bias.detach()}
