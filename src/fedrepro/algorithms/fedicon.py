"""FedICON's federated training (FedICON §4.1, Eq. 3–6; docs/methods/fedicon.md).

Local invariance extraction: each client trains its encoder with the supervised contrastive
loss (Eq. 4–5) on two augmented views of every image, the L2-normalised representation
(``pre_logits``, 64-d for the simple CNN) as the contrastive feature. Global invariance
sharing: the server averages the encoder by training-set size (Eq. 6 without its printed
extra 1/m, which would make the weights sum to 1/m); a client sends only what its round
changes (``FedICON.sent``). Classifier: the last
``classifier_rounds`` rounds train only the linear classifier with cross-entropy on the frozen
encoder and the server averages it (§4.1.2 "multiple federated training steps at first";
5 rounds as the authors' code, ``SonyResearch/COALA@e55ac8a``); each client personalises it
afterwards on the ``adapt`` stage, before its test-time adaptation.

Knobs: ``supervised: false`` drops the labels (SimCLR / NT-Xent, FedICON-us, Table 4);
``sharing: false`` keeps every tensor on its client (Table 5 without global invariance
sharing); ``base_temperature`` multiplies by τ/τ_b as the released code does (the paper's
Eq. 4 has no such factor); ``frozen_bn: train`` lets the frozen encoder's BN statistics move
during the classifier rounds, as the released code leaves the model in train mode (the
default ``eval`` keeps a frozen encoder frozen).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.algorithms.personalized import Local
from fedrepro.device import on
from fedrepro.fl.algorithm import Algorithm, ClientCtx, Payload
from fedrepro.fl.contrastive import (
    contrastive_loss,
    normalized,
    online_contrastive_loss,
    representation,
)
from fedrepro.fl.tensors import named_state, take
from fedrepro.models.registry import head_keys


class FedICON(Algorithm):
    name = "fedicon"

    def __init__(
        self,
        temperature: float = 0.1,
        base_temperature: float | None = None,
        supervised: bool = True,
        sharing: bool = True,
        classifier_rounds: int = 5,
        frozen_bn: str = "eval",
        **kw,
    ):
        super().__init__(**kw)
        if frozen_bn not in ("eval", "train"):
            raise ValueError(f"algorithm fedicon: frozen_bn {frozen_bn!r} (allowed: eval, train)")
        if int(classifier_rounds) < 0:
            raise ValueError("algorithm fedicon: classifier_rounds must be >= 0")
        self.temperature = float(temperature)
        self.base_temperature = None if base_temperature is None else float(base_temperature)
        self.supervised = bool(supervised)
        self.sharing = bool(sharing)
        self.classifier_rounds = int(classifier_rounds)
        self.frozen_bn = frozen_bn

    def local_keys(self, model: nn.Module) -> set[str]:
        if self.sharing:
            return set()
        return set(named_state(model))

    def setup(self, model: nn.Module, num_clients: int) -> None:
        if not hasattr(model, "forward_head") or not hasattr(model, "get_classifier"):
            raise ValueError(f"fedicon needs forward_head/get_classifier; {type(model).__name__}")
        super().setup(model, num_clients)
        head = set(head_keys(model))
        self.head = [k for k in self.shared if k in head]
        self.encoder = [k for k in self.shared if k not in head]
        self.encoder_stats = [k for k in self.encoder if k not in set(self.trainable)]

    def sent(self, r: int) -> list[str]:
        """What a client sends in round ``r``: what the round can change. Contrastive rounds
        the feature encoder θ_i (§4.1.2, Eq. 6), its BN statistics included, as the code
        averages the whole state (``buffers: local`` keeps them on the client instead);
        classifier rounds the classifier, trained "in a federated learning manner" (§4.1.2),
        and, with ``frozen_bn: train``, the encoder's BN statistics, which then move."""
        if not self.classifier_round(r):
            return self.encoder
        return self.head + (self.encoder_stats if self.frozen_bn == "train" else [])

    def downlink(self, current: dict[str, torch.Tensor], r: int) -> dict[str, torch.Tensor]:
        """What the server sends in round ``r``: what its last aggregate changed, ``sent(r -
        1)`` (every client took part in it and holds the rest: the classifier untouched in
        contrastive rounds, the frozen encoder in classifier rounds); everything in round 1,
        or where a client may have missed a round (``fraction`` < 1). The client's model is
        the server's state either way: only what is counted as sent changes."""
        if r == 1 or float(self.train_cfg.get("fraction", 1.0)) < 1:
            return current
        return {k: current[k] for k in self.sent(r - 1)}

    def client_end(self, ctx: ClientCtx) -> Payload:
        return Payload(
            ctx.client, ctx.num_samples, ctx.steps, take(ctx.model, self.sent(ctx.round))
        )

    def aggregate(self, current: dict, payloads: list[Payload]) -> dict[str, torch.Tensor]:
        """The averaged tensors replace their old values; what was not sent stays."""
        return {**current, **super().aggregate(current, payloads)}

    def classifier_round(self, r: int) -> bool:
        """Rounds after ``rounds - classifier_rounds`` train only the classifier."""
        rounds = self.train_cfg.get("rounds")
        return rounds is not None and r > int(rounds) - self.classifier_rounds

    def views(self, r: int) -> int:
        return 1 if self.classifier_round(r) else 2

    def classifier_loss(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Cross-entropy of the classifier on the frozen encoder's representation."""
        if self.frozen_bn == "eval":
            model.eval()
        with torch.no_grad():
            h = representation(model, x)
        return F.cross_entropy(model.get_classifier()(h), y)

    def objective(self, ctx: ClientCtx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        model = ctx.model
        if self.classifier_round(ctx.round):
            return self.classifier_loss(model, x, y)
        z = normalized(representation(model, x))  # 2B rows: view 1 of the batch, then view 2
        labels = torch.cat([y, y]) if self.supervised else None
        return contrastive_loss(z, labels, self.temperature, self.base_temperature)


class FedICONTest(Local):
    """FedICON's test phase for one client (§4.1.2, §4.2 Eq. 7; docs/methods/fedicon.md),
    on the ``adapt`` stage with every tensor kept on its client: first ``classifier_epochs``
    epochs personalise the linear classifier on the client's labelled training data (frozen
    encoder, as in the federated classifier rounds; in batches of ``classifier_batch_size``,
    the engine's own batch where None), then ``tta_epochs`` epochs of test-time
    adaptation minimise the unsupervised contrastive loss (Eq. 7) of two augmented views of
    the client's unlabelled test images over the encoder. ``tta_epochs: 0`` is Table 5's
    variant without test-time adaptation. ``online: true`` adapts while predicting instead
    (``OnlineICONPredictor``: ``memory`` training images, ``online_steps`` steps a sample)."""

    name = "fedicon_test"

    def __init__(
        self,
        classifier_epochs: int = 5,
        classifier_batch_size: int | None = None,
        temperature: float = 0.1,
        base_temperature: float | None = None,
        frozen_bn: str = "eval",
        online: bool = False,
        memory: int = 256,
        online_steps: int = 1,
        **kw,
    ):
        super().__init__(**kw)
        self.classifier_epochs = int(classifier_epochs)
        self.classifier_batch = (
            None if classifier_batch_size is None else int(classifier_batch_size)
        )
        self.online, self.memory, self.online_steps = bool(online), int(memory), int(online_steps)
        if self.online and (self.memory < 1 or self.online_steps < 1):
            raise ValueError("algorithm fedicon_test: online needs memory >= 1, online_steps >= 1")
        self.frozen = FedICON(frozen_bn=frozen_bn)  # the classifier rounds' objective
        self.temperature = float(temperature)
        self.base_temperature = None if base_temperature is None else float(base_temperature)

    def configure(self, client_sizes, train_cfg, data=None, client_train=None, **kw) -> None:
        super().configure(client_sizes, train_cfg, data, client_train, **kw)
        adapts = self.online or int(train_cfg.get("rounds", 0)) > self.classifier_epochs
        if adapts and data is not None and not data.views_differ:
            why = f"views {data.views} perturb nothing" if data.views else "no augmentation"
            raise ValueError(
                f"algorithm fedicon_test: Eq. 7's two views would be the same image ({why}): "
                "set adapt.views with a crop or a probability above 0"
            )

    def adapting(self, r: int) -> bool:
        return r > self.classifier_epochs

    def fit_split(self, r: int) -> str:
        return "test" if self.adapting(r) else "train"

    def views(self, r: int) -> int:
        return 2 if self.adapting(r) else 1

    def batch_size(self, r: int) -> int | None:
        return None if self.adapting(r) else self.classifier_batch

    def objective(self, ctx: ClientCtx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if not self.adapting(ctx.round):
            return self.frozen.classifier_loss(ctx.model, x, y)
        z = normalized(representation(ctx.model, x))
        return contrastive_loss(z, None, self.temperature, self.base_temperature)

    def predictor(self, model: nn.Module, client: int = 0, generator=None) -> nn.Module:
        if not self.online:
            return model
        idx = self.client_train[client]
        # the draw on its generator's device (a CPU generator drawing straight onto CUDA is
        # refused by CUDA's kernels: "Expected a 'cuda' device type for generator")
        order = torch.randperm(len(idx), generator=generator, device=on(generator, idx.device))
        pick = idx[order[: self.memory]]
        memory, _ = self.train_data.batch(pick)
        tcfg = self.train_cfg
        return OnlineICONPredictor(
            model, memory, self.train_data.view_of, generator, self.temperature,
            self.online_steps, float(tcfg["lr"]), float(tcfg.get("momentum", 0.0)),
            float(tcfg.get("weight_decay", 0.0)),
        )  # fmt: skip


class OnlineICONPredictor(nn.Module):
    """FedICON's online test-time adaptation for one client (§4.2, last paragraph): the test
    samples arrive one by one; for each, ``steps`` SGD steps on the encoder minimise the
    online Eq. 7 against a memory of the client's training images (its twin view the
    positive), then the sample is predicted and replaces a random memory entry."""

    def __init__(self, model: nn.Module, memory: torch.Tensor, view, generator,
                 temperature: float, steps: int, lr: float, momentum: float,
                 weight_decay: float):  # fmt: skip
        super().__init__()
        self.model, self.memory, self.view, self.generator = model, memory.clone(), view, generator
        self.temperature, self.steps = temperature, steps
        head = {id(p) for p in model.get_classifier().parameters()}
        encoder = [p for p in model.parameters() if p.requires_grad and id(p) not in head]
        self.opt = torch.optim.SGD(encoder, lr=lr, momentum=momentum, weight_decay=weight_decay)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = []
        for i in range(len(x)):
            xi = x[i : i + 1]
            with torch.enable_grad():  # evaluation runs without gradients
                self.model.train()
                for _ in range(self.steps):
                    both = torch.cat([xi, self.view(xi, self.generator), self.memory])
                    z = normalized(representation(self.model, both))
                    loss = online_contrastive_loss(z[:1], z[1:2], z[2:], self.temperature)
                    self.opt.zero_grad(set_to_none=True)
                    loss.backward()
                    self.opt.step()
            self.model.eval()
            with torch.no_grad():
                out.append(self.model(xi))
            # the slot stays a tensor (no read back): the memory is written on the device
            slot = torch.randint(len(self.memory), (1,), generator=self.generator,
                                 device=on(self.generator, self.memory.device))  # fmt: skip
            self.memory.index_copy_(0, slot, xi)
        return torch.cat(out)
