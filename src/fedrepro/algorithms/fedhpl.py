"""FedHPL: prompt tuning with per-class logit distillation (FedHPL §3; docs/methods/fedhpl.md).

Every client keeps its own trainable tensors (with ``tuning: vpt_deep`` the prompts and the
head on a frozen backbone); nothing is averaged. Each round a client trains with
cross-entropy plus λ·KD against the global logit of each sample's label that the server
sent it (round 1: none), then uploads the logits of its correctly classified training
samples (``upload: all``, FedHPL's own rows: App. C.2, Table 9) or their per-class means
and counts (``average``, Table 9's FedHPL+). The server
combines them per client with latent-dimension weights (Eq. 7–8, ``fedrepro.fl.logits``)
and sends each client its C×C matrix; both directions are counted in the run's bytes.
``lam: 0`` is local prompt tuning (Fig. 3c's "Local"). ``average: [prompts]`` / ``[head]``
also averages the prompts / the head among clients of the same latent dimension (Table 3
right, "exploiting homogeneous parameters"). Clients of different models (a run's
``model.client_backbones``) each read their latent dimension from their own model; the
logits cross every model, the averaged tensors only the clients of one model.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.fl import logits as lx
from fedrepro.fl.algorithm import Algorithm, ClientCtx, Payload
from fedrepro.fl.local import outputs_of
from fedrepro.fl.tensors import named_state, take
from fedrepro.models.registry import head_keys

UPLOADS = ("average", "all")
AVERAGED = ("prompts", "head")


class FedHPL(Algorithm):
    name = "fedhpl"
    exchanged = ("global_logits",)  # every client's global logits cross models

    def __init__(
        self,
        lam: float = 1.0,
        temperature: float = 3.5,
        upload: str = "all",
        correct_only: bool = True,
        logit_weighting: str = "ratio",
        kappa: float = 1.0,
        logit_denominator: str = "weighted",
        kd_reduction: str = "mean_over_samples",
        tau_squared: bool = True,
        dims: list[int] | None = None,
        average: list[str] | None = None,
        **kw,
    ):
        super().__init__(**kw)
        if upload not in UPLOADS:
            raise ValueError(f"algorithm fedhpl: upload {upload!r} (allowed: average, all)")
        if logit_weighting not in lx.WEIGHTINGS or logit_denominator not in lx.DENOMINATORS:
            raise ValueError(
                f"algorithm fedhpl: logit_weighting in {lx.WEIGHTINGS}, logit_denominator in "
                f"{lx.DENOMINATORS}; got {logit_weighting!r}, {logit_denominator!r}"
            )
        if kd_reduction not in lx.KD_REDUCTIONS:
            raise ValueError(f"algorithm fedhpl: kd_reduction in {lx.KD_REDUCTIONS}")
        self.lam, self.temperature = float(lam), float(temperature)
        self.upload, self.correct_only = upload, bool(correct_only)
        self.logit_weighting, self.kappa = logit_weighting, float(kappa)
        self.logit_denominator = logit_denominator
        self.kd_reduction = kd_reduction
        self.tau_squared = bool(tau_squared)
        self.dims = None if dims is None else [int(d) for d in dims]
        self.average = list(average or [])
        if set(self.average) - set(AVERAGED):
            raise ValueError(f"algorithm fedhpl: average {self.average} (allowed: {AVERAGED})")
        self.global_logits: torch.Tensor | None = None  # [K, C, C], after the first round
        self.teacher: tuple[torch.Tensor, torch.Tensor] | None = None  # this client's, this round

    def local_keys(self, model: nn.Module) -> set[str]:
        """Everything but the tensors ``average`` shares."""
        every = set(named_state(model))
        return every - self._averaged(model)

    def _averaged(self, model: nn.Module) -> set[str]:
        keys = set()
        if "prompts" in self.average:
            keys |= {n for n, _ in model.named_parameters() if n.rsplit(".", 1)[-1] == "prompts"}
        if "head" in self.average:
            keys |= set(head_keys(model))
        return keys

    def setup(self, model: nn.Module, num_clients: int) -> None:
        super().setup(model, num_clients)
        self.num_classes = model.get_classifier().out_features
        models = self.client_models or [model] * num_clients
        dims = self.dims or [int(getattr(m, "num_features", 1)) for m in models]
        if len(dims) != num_clients:
            raise ValueError(f"algorithm fedhpl: {len(dims)} dims for {num_clients} clients")
        self.weights_kj = lx.dimension_weights(dims, self.logit_weighting)
        mine = {d for d, m in zip(dims, models, strict=True) if m is model}
        if self.average and len(mine) > 1:
            raise ValueError("algorithm fedhpl: average needs clients of one latent dimension")

    def exchanges(self) -> bool:
        return True

    def downlink_to(self, client: int, down: dict) -> dict[str, torch.Tensor]:
        """Client ``client``'s C×C global logits (nothing before the first aggregation). A
        class that no correct logit supports arrives as a zero row (Eq. 8's numerator is 0):
        the client reads it as "no teacher"."""
        shared = down if self.shared else {}
        if self.global_logits is None:
            return shared
        return {**shared, "logits": self.global_logits[client]}

    def client_begin(self, ctx: ClientCtx) -> None:
        """The round's teacher, once per client: its downloaded logits on the model's device
        and which classes have one (none in round 1)."""
        self.teacher = None
        if self.lam > 0 and "logits" in ctx.downloaded:
            device = next(ctx.model.parameters()).device
            teacher = ctx.downloaded["logits"].to(device)
            self.teacher = teacher, lx.has_teacher(teacher)

    def objective(self, ctx: ClientCtx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = ctx.model(x)
        loss = F.cross_entropy(logits, y)
        if self.teacher is not None:
            teacher, available = self.teacher
            loss = loss + self.lam * lx.kd_loss(
                logits, teacher.to(logits.dtype), y, available, self.temperature,
                self.kd_reduction, self.tau_squared,
            )  # fmt: skip
        return loss

    def client_end(self, ctx: ClientCtx) -> Payload:
        sent = take(ctx.model, self.shared)  # the averaged prompts / head, if any
        z, y = self._train_logits(ctx)
        if self.upload == "all":
            kept, labels = lx.upload_all(z, y, self.correct_only)
            extra = {"logits": kept, "labels": labels}
        else:
            means, counts = lx.upload_average(z, y, self.num_classes, self.correct_only)
            extra = {"means": means, "counts": counts}
        return Payload(ctx.client, ctx.num_samples, ctx.steps, sent, extra)

    def _train_logits(self, ctx: ClientCtx) -> tuple[torch.Tensor, torch.Tensor]:
        """The client's logits on its own training images (evaluation mode, no augmentation).
        A client without data (a structure job counting what is sent, Table 9) holds
        ``num_samples`` images it classifies correctly: its upload has their shapes."""
        if ctx.data is None:
            y = torch.zeros(ctx.num_samples, dtype=torch.long, device="cpu")
            return F.one_hot(y, self.num_classes).float(), y
        return outputs_of(ctx.model, ctx.data, ctx.idx, batch_size=self.eval_batch)

    def exchange(self, payloads: list[Payload], r: int) -> None:
        """Every client's global logits (Eq. 8) from what every client uploaded."""
        c = self.num_classes
        sums = torch.zeros(self.num_clients, c, c, dtype=torch.float64)
        counts = torch.zeros(self.num_clients, c, dtype=torch.float64)
        for p in payloads:
            if self.upload == "all":
                s, n = lx.class_sums(p.extra["logits"].double().cpu(), p.extra["labels"].cpu(), c)
            else:
                n = p.extra["counts"].double().cpu()
                s = p.extra["means"].double().cpu() * n[:, None]
            sums[p.client], counts[p.client] = s, n
        z = lx.aggregate(sums, counts, self.weights_kj, self.kappa, self.logit_denominator)
        self.global_logits = z.float()

    def aggregate(self, current: dict, payloads: list[Payload]) -> dict[str, torch.Tensor]:
        """The averaged prompts / head of one model's clients, if any."""
        return super().aggregate(current, payloads) if self.shared else current

    def state_dict(self) -> dict:
        return {"global_logits": self.global_logits}

    def load_state_dict(self, state: dict) -> None:
        self.global_logits = state.get("global_logits")
