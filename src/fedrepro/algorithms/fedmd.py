"""FedMD (Li & Wang 2019): clients of different models learn from each other through their
logits on a public data set (FedHPL §4.1, App. B.3, B.4, C.1.2; docs/methods/fedhpl.md).

Each client's model has two heads on one body (``fedrepro.models.head_split``,
``public_classes``): its private task's and the public set's (Tables 7 and 9 imply a 10-class
public set). Nothing is averaged; per client and round:

- **Transfer learning**, once, at a client's first round: ``pretrain_epochs`` passes over the
  whole public set, cross-entropy on the public head (App. B.3: "50 epochs of pre-training
  and model initialization"; the first round's private epochs are the initialisation, ours).
- **Digest**: ``digest_epochs`` passes over the round's public samples, the mean absolute
  error between the client's logits (both heads) and the consensus the server sent
  (FedMD's code matches logits with ``mean_absolute_error``, one pass:
  diogenes0319/FedMD_clean@a725e0e:FedMD.py;
  diogenes0319/FedMD_clean@b24aecd:conf/CIFAR_balance_conf.json ``N_logits_matching_round``).
- **Revisit**: the engine's local training on the private data, ``train.local_epochs``
  passes (App. B.3: 5), cross-entropy on the private head.
- **Communicate**: both heads' logits on the next round's public samples, and each sample's
  label: C + P + 1 scalars a sample (Table 9: 21 and 111 at C = 10 and 100, P = 10).

A run's ``train.local_steps`` (the smoke's step budget) caps the transfer and the digest as it
caps the private training: that many steps each, whatever their passes.

The server's consensus is the plain mean of the clients' logits (FedMD.py: the parties'
logits summed and divided by their number). A round's public samples are ``samples``
(FedMD's ``N_alignment``, 5,000 in the conf file above) drawn without replacement from the
public training split, fixed by the round, so every client and the server know them. Public
images are fed as test images are (resized to the run's input, the run's normalisation, no
augmentation: FedMD's code augments nothing), so a digest's targets are those of the images
it trains on.
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.fl.algorithm import Algorithm, ClientCtx, Payload
from fedrepro.fl.local import outputs_of, train_epochs
from fedrepro.fl.public import FEDMD_SCHEDULE
from fedrepro.fl.sampling import seeded_generator
from fedrepro.fl.tensors import named_state

# the public samples of a round, the digest's and the pre-training's shuffles: ours
PUBLIC_SEED, DIGEST_SEED, PRETRAIN_SEED = 0x7075, 0x6469, 0x7072


def both_heads(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The private head's logits, then the public head's, of one forward pass of the body."""
    f = model.features(x)
    return torch.cat([model.head(f), model.public_head(f)], 1)


class FedMD(Algorithm):
    name = "fedmd"
    uses_public = True
    exchanged = ("consensus", "consensus_round")

    def __init__(
        self,
        samples: int = FEDMD_SCHEDULE["samples"],
        pretrain_epochs: int = FEDMD_SCHEDULE["pretrain_epochs"],
        digest_epochs: int = FEDMD_SCHEDULE["digest_epochs"],
        weighting: str = "uniform",
        **kw,
    ):
        super().__init__(weighting=weighting, **kw)
        self.samples, self.pretrain_epochs = int(samples), int(pretrain_epochs)
        self.digest_epochs = int(digest_epochs)
        self.consensus: torch.Tensor | None = None  # [samples, C + P] after the first round
        self.consensus_round = 0  # the round whose public samples the consensus is over
        self.round_sent = 0  # the round the server is sending to (``downlink``)
        self.pretrained: list[int] = []  # clients that did their transfer learning

    def local_keys(self, model: nn.Module) -> set[str]:
        return set(named_state(model))

    def setup(self, model: nn.Module, num_clients: int) -> None:
        super().setup(model, num_clients)
        if getattr(model, "public_head", None) is None:
            raise ValueError(
                "algorithm fedmd: the model needs a public head "
                "(model.tuning head_split, tuning_options.public_classes)"
            )
        self.num_classes = model.head.out_features
        self.public_classes = model.public_head.out_features
        if self.public is not None and int(self.public.labels.max()) >= self.public_classes:
            raise ValueError(f"public: the public set's labels reach beyond public_classes "
                             f"{self.public_classes}")  # fmt: skip

    def exchanges(self) -> bool:
        return True

    def public_indices(self, r: int) -> torch.Tensor:
        """Round ``r``'s public samples (indices into the public training split)."""
        n = len(self.public.labels)
        dev = self.public.labels.device
        generator = seeded_generator(PUBLIC_SEED, r, device=dev)
        order = torch.randperm(n, generator=generator, device=dev)
        return order[: min(self.samples, n)]

    def downlink_to(self, client: int, down: dict) -> dict[str, torch.Tensor]:
        """The consensus over this round's public samples; none in round 1, or after a round
        whose every upload was excluded (the last consensus is over other samples)."""
        if self.consensus is None or self.consensus_round != self.round_sent:
            return {}
        return {"consensus": self.consensus}

    def downlink(self, current: dict[str, torch.Tensor], r: int) -> dict[str, torch.Tensor]:
        self.round_sent = r
        return current

    def client_begin(self, ctx: ClientCtx) -> None:
        if self.public is None:  # a structure job: shapes only, no training
            return
        if ctx.client not in self.pretrained:
            self.transfer(ctx)
            self.pretrained = sorted({*self.pretrained, ctx.client})
        if "consensus" in ctx.downloaded:
            self.digest(ctx, ctx.downloaded["consensus"])

    def transfer(self, ctx: ClientCtx) -> None:
        """``pretrain_epochs`` passes over the whole public set, its labels on the public head."""
        model, public = ctx.model, self.public
        every = torch.arange(len(public.labels), device=public.labels.device)
        train_epochs(
            model, public, every, self.train_cfg, ctx.lr, self.pretrain_epochs,
            seeded_generator(PRETRAIN_SEED, ctx.client, device=every.device),
            objective=lambda x, y: F.cross_entropy(model.forward_public(x), y),
        )  # fmt: skip

    def digest(self, ctx: ClientCtx, consensus: torch.Tensor) -> None:
        """``digest_epochs`` passes over the round's public samples towards the consensus."""
        model, idx = ctx.model, self.public_indices(ctx.round)
        target = consensus.to(idx.device)
        # the round's samples, each labelled with its row of the consensus
        rows = replace(
            self.public,
            images=self.public.images[idx],
            labels=torch.arange(len(idx), device=idx.device),
        )
        train_epochs(
            model, rows, rows.labels, self.train_cfg, ctx.lr, self.digest_epochs,
            seeded_generator(DIGEST_SEED, ctx.round, ctx.client, device=idx.device),
            objective=lambda x, i: F.l1_loss(both_heads(model, x).float(), target[i]),
        )  # fmt: skip

    def client_end(self, ctx: ClientCtx) -> Payload:
        """Both heads' logits on the next round's public samples, and their labels."""
        if self.public is None:  # a structure job: what one public sample costs
            extra = {"logits": torch.zeros(1, self.num_classes + self.public_classes),
                     "labels": torch.zeros(1, dtype=torch.long)}  # fmt: skip
        else:
            idx = self.public_indices(ctx.round + 1)
            logits, labels = outputs_of(ctx.model, self.public, idx, both_heads, self.eval_batch)
            extra = {"logits": logits, "labels": labels}
        return Payload(ctx.client, ctx.num_samples, ctx.steps, {}, extra)

    def exchange(self, payloads: list[Payload], r: int) -> None:
        """The consensus: the mean of every client's logits, whatever its model."""
        logits = torch.stack([p.extra["logits"] for p in payloads])
        w = torch.tensor(self.weights(payloads), device=logits.device, dtype=logits.dtype)
        self.consensus = torch.einsum("j,jnc->nc", w, logits)
        self.consensus_round = r + 1

    def state_dict(self) -> dict:
        consensus = None if self.consensus is None else self.consensus.cpu()
        return {"consensus": consensus, "consensus_round": self.consensus_round,
                "pretrained": list(self.pretrained)}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        self.consensus = state.get("consensus")
        self.consensus_round = int(state.get("consensus_round", 0))
        self.pretrained = list(state.get("pretrained", []))
