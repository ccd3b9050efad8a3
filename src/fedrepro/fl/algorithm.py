"""The algorithm interface; its defaults are FedAvg.

An algorithm says only what differs from FedAvg: which tensors stay local, an
extra gradient term, what a client sends, and the server rule. Tensor roles are
explicit: *shared* tensors are sent and aggregated, *local* tensors persist per
client, everything else (frozen parameters, integer counters) never moves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.fl.eval_batch import eval_batch_size
from fedrepro.fl.tensors import take, weighted_sum


@dataclass
class ClientCtx:
    """What one client's local update sees and reports."""

    client: int
    model: nn.Module
    received: dict[str, torch.Tensor]  # the shared tensors as sent by the server
    lr: float
    momentum: float
    num_samples: int
    steps: int = 0
    round: int = 0
    data: Any = None  # the client's labelled training data (a DeviceData) ...
    idx: torch.Tensor | None = None  # ... and its indices into it (EATA's Fisher, FedTHE)
    downloaded: dict[str, torch.Tensor] = field(default_factory=dict)  # its own downlink


@dataclass
class Payload:
    """What one client sends up; bytes are counted from `tensors` and `extra`."""

    client: int
    num_samples: int
    steps: int
    tensors: dict[str, torch.Tensor]
    extra: dict[str, torch.Tensor] = field(default_factory=dict)

    def all_tensors(self) -> dict[str, torch.Tensor]:
        return {**self.tensors, **{f"extra.{k}": v for k, v in self.extra.items()}}


class Algorithm:
    """FedAvg (McMahan et al. 2017): average all shared tensors by sample count."""

    name = "fedavg"
    exchanged: tuple[str, ...] = ()  # the attributes ``exchange`` sets (``exchange_state``)
    uses_public = False  # whether the run gives it a public data set (FedMD; ``use_public``)

    def __init__(self, weighting: str = "samples", buffers: str = "average", **unknown):
        if unknown:
            raise ValueError(f"algorithm '{self.name}': unknown parameter(s) {sorted(unknown)}")
        if weighting not in ("samples", "uniform"):
            raise ValueError(f"algorithm.weighting: '{weighting}' (allowed: samples, uniform)")
        if buffers not in ("average", "local"):
            raise ValueError(f"algorithm.buffers: '{buffers}' (allowed: average, local)")
        self.weighting = weighting
        self.buffers = buffers
        self.shared: list[str] = []
        self.local: list[str] = []
        self.trainable: list[str] = []
        self.client_sizes: list[int] = []
        self.train_cfg: dict = {}
        self.train_data: Any = None
        self.client_train: list[torch.Tensor] = []
        self.client_models: list[nn.Module] = []
        self.public: Any = None  # the public data (a DeviceData) where the algorithm uses one

    def use_public(self, data: Any) -> None:
        """The run's public data set (``public``: FedMD's), on the device as the job loaded it."""
        if not self.uses_public:
            raise ValueError(f"public: algorithm '{self.name}' reads no public data")
        self.public = data

    def configure(
        self,
        client_sizes: list[int],
        train_cfg: dict,
        data: Any = None,
        client_train: list[torch.Tensor] | None = None,
        client_models: list[nn.Module] | None = None,
    ) -> None:
        """What the run looks like (called by the engine before ``setup``): every client's
        training-set size and the ``train`` block (FedDC scales by them), the training data
        and each client's indices into it (what a predictor may read: FedICON's online
        memory), and each client's model (one module per architecture, the same object for
        clients of one backbone: FedHPL reads every client's latent dimension)."""
        self.client_sizes = list(client_sizes)
        self.train_cfg = dict(train_cfg)
        self.train_data = data
        self.client_train = list(client_train or [])
        self.client_models = list(client_models or [])

    @property
    def eval_batch(self) -> int:
        """The batch of the algorithm's own forward passes without gradients (what a client
        uploads of its images), as evaluation's (``fedrepro.fl.local.eval_batch_size``)."""
        return eval_batch_size(self.train_cfg, getattr(self.train_data, "side", None))

    def prepare_model(self, model: nn.Module) -> None:
        """Add what the algorithm keeps in the model (FedTHE's personal head), right after the
        model is built and before any saved tensors are loaded into it."""

    # ---- tensor roles -------------------------------------------------------------
    def local_keys(self, model: nn.Module) -> set[str]:
        """Tensors that never leave the client (none for FedAvg)."""
        return set()

    def setup(self, model: nn.Module, num_clients: int) -> None:
        """Fix the shared / local / trainable key lists once per run."""
        local = self.local_keys(model)
        self.trainable = [n for n, p in model.named_parameters() if p.requires_grad]
        float_buffers = [n for n, b in model.named_buffers() if b.is_floating_point()]
        candidates = self.trainable + (float_buffers if self.buffers == "average" else [])
        self.shared = [k for k in candidates if k not in local]
        movable = set(self.trainable) | set(float_buffers)
        self.local = sorted(k for k in movable if k not in set(self.shared))
        shared = set(self.shared)
        self.shared_trainable = [k for k in self.trainable if k in shared]
        self.num_clients = num_clients

    def initial_local(self, client: int, tensors: dict[str, torch.Tensor]) -> dict:
        """Client ``client``'s local tensors before it first trains: by default the model's
        initial ones (``tensors``), the same for every client."""
        return tensors

    @property
    def personalized(self) -> bool:
        """Clients evaluate their own models when any tensor stays local."""
        return bool(self.local)

    # ---- client side ----------------------------------------------------------------
    def views(self, r: int) -> int:
        """Augmented views of each training image in round ``r``: ``objective`` then gets the
        batch's views stacked (view 1 of every image, then view 2, ...) and one label each
        image (FedICON's contrastive rounds use 2)."""
        return 1

    def batch_size(self, r: int) -> int | None:
        """Round ``r``'s training batch where it is not the ``train`` block's (FedICON's test
        phase personalises the classifier at the run's batch, then adapts at its own)."""
        return None

    def local_phases(self, r: int, epochs: int) -> list[tuple[set[str], int]] | None:
        """Round ``r``'s local training as phases ``(trainable keys, epochs)``, each with a
        fresh optimiser over its keys only (FedRep: the head, then the body); None: one
        phase of ``epochs`` over every trainable tensor."""
        return None

    def fit_split(self, r: int) -> str:
        """What round ``r`` trains on: ``train`` (labelled training data) or ``test`` (the
        client's own test images, augmented as training images are, their labels hidden:
        every label reads −1; test-time adaptation)."""
        return "train"

    def predictor(
        self, model: nn.Module, client: int = 0, generator: torch.Generator | None = None
    ) -> nn.Module:
        """What evaluates ``client`` (called once per client, its tensors loaded): the model,
        or a module around it that adapts while it predicts (T3A, FedICON online), drawing
        from ``generator`` (seeded by the run, round and client)."""
        return model

    def client_begin(self, ctx: ClientCtx) -> None:
        """Called after the received tensors are loaded, before local training."""

    def correct_gradients(self, ctx: ClientCtx) -> None:
        """Called after backward, before the optimiser step (FedProx, SCAFFOLD)."""

    def objective(self, ctx: ClientCtx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The local loss of one batch: cross-entropy (FedIns, MOON add terms)."""
        return F.cross_entropy(ctx.model(x), y)

    def client_end(self, ctx: ClientCtx) -> Payload:
        return Payload(ctx.client, ctx.num_samples, ctx.steps, take(ctx.model, self.shared))

    # ---- server side ----------------------------------------------------------------
    def weights(self, payloads: list[Payload]) -> list[float]:
        if self.weighting == "uniform":
            return [1.0 / len(payloads)] * len(payloads)
        total = sum(p.num_samples for p in payloads)
        return [p.num_samples / total for p in payloads]

    def aggregate(self, current: dict, payloads: list[Payload]) -> dict[str, torch.Tensor]:
        """The shared tensors of the clients of this algorithm's model from their
        ``payloads`` (in a run of several models, each model's clients only)."""
        return weighted_sum([p.tensors for p in payloads], self.weights(payloads))

    def exchange(self, payloads: list[Payload], r: int) -> None:
        """The server's work on every kept payload of round ``r`` whatever the client's model,
        before ``aggregate`` (FedHPL's per-class logits); nothing for FedAvg. In a run of
        several models the first model's algorithm runs it, and every other one takes its
        ``exchange_state``."""

    def exchange_state(self) -> dict:
        """What ``exchange`` keeps for the clients of every model: the attributes named in
        ``exchanged`` (FedHPL's global logits, FedGH's global head, FedTGP's generator)."""
        return {k: getattr(self, k) for k in self.exchanged}

    def load_exchange_state(self, state: dict) -> None:
        """Take another model's algorithm's ``exchange_state`` (the same objects, no copy)."""
        for k, v in state.items():
            setattr(self, k, v)

    def exchanges(self) -> bool:
        """Whether the server works each round (``exchange``, then ``aggregate``): parameter
        averaging when tensors are shared; an exchange of other payloads (FedHPL's logits)
        says so itself."""
        return bool(self.shared)

    def downlink(self, current: dict[str, torch.Tensor], r: int) -> dict[str, torch.Tensor]:
        """Tensors the server sends to each participating client in round ``r``."""
        return current

    def downlink_to(self, client: int, down: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """What ``client`` receives this round (``ctx.downloaded``; its bytes are counted):
        the common ``down`` when something is shared, by default; a client's own payload
        (FedHPL's per-client logits) otherwise."""
        return down if self.shared else {}

    def server_parameters(self) -> int:
        """Scalars the server itself trains (pFedPG's prompt generator); none by default."""
        return 0

    # ---- checkpointing -------------------------------------------------------------
    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore server and per-client algorithm state from a checkpoint."""
