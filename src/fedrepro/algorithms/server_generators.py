"""Heterogeneous-model baselines whose server trains a generator (FedHPL §4.1, App. B.4, C.1.2;
docs/methods/fedhpl.md): FedTGP and FedGen. The server models are
``fedrepro.models.server_models``' (Table 9's 0.506 M and 0.507 M); they live in the
algorithm's state and are checkpointed with it. No client's body is averaged.

- **FedTGP** (Zhang et al. 2024): clients upload, as FedGH's do, the class means of what their
  classifier reads over their training images after local training, with the class counts;
  the server trains its prototype generator (a class embedding through two linear layers) so
  that each uploaded prototype lies nearer the global prototype of its class than any other by
  at least the adaptive margin δ = min(max_c min_{c'≠c} ‖P̄_c − P̄_{c'}‖, τ) (P̄_c: the mean of
  the clients' class-c prototypes this round), and sends the C global prototypes; a client
  trains with CE + λ·MSE to the global prototype of the sample's class and predicts the class
  of the nearest one (as FedProto's).
- **FedGen** (Zhu et al. 2021, as the reference code runs it): clients upload their linear head
  and their class counts; the server trains its generator (noise and a label → a feature) so
  that the sample-weighted ensemble of the uploaded heads classifies the feature as its label,
  labels drawn in proportion to every client's counts, then averages the heads; a client
  receives the global head, the generator and the label counts and trains with
  CE(model(x), y) + CE(head(G(ỹ)), ỹ), ỹ drawn from the counts. Only the head is averaged.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.algorithms.class_means import (
    FedProto,
    combine,
    linear_classifier,
    mse_to_global,
    trained_class_means,
    with_features,
)
from fedrepro.fl.algorithm import Algorithm, ClientCtx, Payload
from fedrepro.fl.sampling import derive_seed
from fedrepro.fl.tensors import moved, named_state, take, weighted_sum
from fedrepro.models.server_models import Generator, PrototypeGenerator

# the server's generator is initialised from (this), its draws from (this, round); ours
PROTOTYPES_SEED = 0x7467
GENERATOR_SEED = 0x6765


@contextmanager
def seeded(seed: int):
    """A block whose CPU draws come from ``seed``; the process's CPU generator is left as found
    (the server's models live on the CPU; no device generator is touched)."""
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)
        yield


def adaptive_margin(class_means: torch.Tensor, present: torch.Tensor, threshold: float) -> float:
    """FedTGP's δ: the largest over the classes of each class mean's distance to the nearest
    other class mean, capped at ``threshold``; ``threshold`` where fewer than two classes are
    held (TsingZ0/HtFLlib@61b9a19:system/flcore/servers/servertgp.py, ``receive_protos``:
    a class no other class is measured against takes the smallest gap)."""
    p = class_means[present].double()
    if len(p) < 2:
        return float(threshold)
    d = torch.cdist(p, p)
    d.fill_diagonal_(float("inf"))
    return min(float(d.min(1).values.max()), float(threshold))


def train_prototypes(
    generator: PrototypeGenerator,
    protos: torch.Tensor,
    labels: torch.Tensor,
    margin: float,
    lr: float,
    epochs: int,
    batch: int,
    seed: int,
) -> None:
    """FedTGP's server steps, in place: SGD at ``lr``, ``epochs`` passes over the uploaded
    (prototype, class) pairs in shuffled batches of ``batch`` (the last kept), the loss
    CE(−(d + δ·onehot(y)), y) with d the Euclidean distances of a prototype to every class's
    generated prototype."""
    classes = torch.arange(generator.embedding.num_embeddings)
    opt = torch.optim.SGD(generator.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    generator.train()
    for _ in range(epochs):
        order = torch.randperm(len(labels), generator=gen)
        for start in range(0, len(order), batch):
            b = order[start : start + batch]
            dist = torch.cdist(protos[b], generator(classes))
            margins = margin * F.one_hot(labels[b], len(classes))
            loss = F.cross_entropy(-(dist + margins), labels[b])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    generator.eval()


class FedTGP(FedProto):
    name = "fedtgp"
    exchanged = (*FedProto.exchanged, "generator", "margin")

    # λ = 1 (``lamda``), τ = 100 (``margin_threthold``), server_epochs 100, server_batch 10 (the
    # client ``batch_size`` the server reads): TsingZ0/HtFLlib@61b9a19:system/main.py;
    # server_lr: the client's learning rate unless given (``server_learning_rate =
    # args.local_learning_rate``), the generator's hidden width its feature width, prototypes
    # after training in evaluation mode, nearest-prototype prediction:
    # TsingZ0/HtFLlib@61b9a19:system/flcore/servers/servertgp.py, clients/clienttgp.py
    def __init__(
        self,
        lam: float = 1.0,
        margin_threshold: float = 100.0,
        server_lr: float | None = None,
        server_epochs: int = 100,
        server_batch: int = 10,
        **kw,
    ):
        super().__init__(lam=lam, **kw)
        self.margin_threshold = float(margin_threshold)
        self.server_lr = None if server_lr is None else float(server_lr)
        self.server_epochs, self.server_batch = int(server_epochs), int(server_batch)
        self.generator: PrototypeGenerator | None = None
        self.margin: float | None = None  # δ of the last server step

    def setup(self, model: nn.Module, num_clients: int) -> None:
        super().setup(model, num_clients)
        self.dim = self.width(model)
        if self.generator is None:  # one server model, however often set up (per client group)
            with seeded(PROTOTYPES_SEED):  # on the CPU, where the server trains it
                self.generator = PrototypeGenerator(self.num_classes, self.dim, self.dim)

    def objective(self, ctx: ClientCtx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """CE + λ·MSE(feature, global prototype of y) (CE alone before the first prototypes)."""
        logits, q = with_features(ctx.model, x)
        loss = F.cross_entropy(logits, y)
        if self.teacher is not None:
            loss = loss + self.lam * mse_to_global(q, y, self.teacher)
        return loss

    def client_end(self, ctx: ClientCtx) -> Payload:
        extra = trained_class_means(ctx, self.num_classes, self.dim, self.eval_batch)
        return Payload(ctx.client, ctx.num_samples, ctx.steps, {}, extra)

    def exchange(self, payloads: list[Payload], r: int) -> None:
        """δ from the round's uploads (every client's, whatever its model), the prototype
        generator trained on the uploaded (prototype, class) pairs alone, and the C global
        prototypes it then generates."""
        means = torch.stack([p.extra["means"].cpu() for p in payloads]).float()
        counts = torch.stack([p.extra["counts"].cpu() for p in payloads])
        self.margin = adaptive_margin(
            *combine(means, counts, self.weighting), self.margin_threshold
        )
        held = counts > 0
        lr = self.server_lr if self.server_lr is not None else float(self.train_cfg["lr"])
        train_prototypes(
            self.generator, means[held], torch.nonzero(held)[:, 1], self.margin, lr,
            self.server_epochs, self.server_batch, derive_seed(PROTOTYPES_SEED, r),
        )  # fmt: skip
        with torch.no_grad():
            self.global_means = self.generator(torch.arange(self.num_classes))
        self.global_present = torch.ones(self.num_classes, dtype=torch.bool)

    def server_parameters(self) -> int:
        return sum(p.numel() for p in self.generator.parameters())

    def state_dict(self) -> dict:
        return {**super().state_dict(), "generator": moved(self.generator.state_dict(), "cpu"),
                "margin": self.margin}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.generator.load_state_dict(state["generator"])
        self.margin = state.get("margin")


def train_generator(
    generator: Generator,
    heads: list[tuple[torch.Tensor, torch.Tensor]],
    weights: list[float],
    label_counts: torch.Tensor,
    lr: float,
    steps: int,
    batch: int,
    seed: int,
) -> None:
    """FedGen's server steps, in place: a fresh Adam at ``lr`` (β 0.9, 0.999), ``steps`` batches
    of ``batch`` labels drawn in proportion to ``label_counts``, the loss CE(Σ_k w_k·head_k(G(ỹ)),
    ỹ) over the uploaded linear heads ``(weight, bias)``, which do not train."""
    opt = torch.optim.Adam(generator.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8)
    generator.train()
    with seeded(seed):  # the labels and the generator's noise
        for _ in range(steps):
            labels = torch.multinomial(label_counts.float(), batch, replacement=True)
            z = generator(labels)
            logits = sum(w * F.linear(z, wt, b) for (wt, b), w in zip(heads, weights, strict=True))
            loss = F.cross_entropy(logits, labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


class FedGen(Algorithm):
    name = "fedgen"
    exchanged = ("generator", "label_counts", "global_head")

    # gen_lr 0.005 (``generator_learning_rate``), server_epochs 100 (the generator's steps a
    # round), server_batch 10 (the client ``batch_size`` the server reads), noise_dim and
    # hidden_dim 512: TsingZ0/HtFLlib@61b9a19:system/main.py; Adam, labels drawn from every
    # client's counts, the sample-weighted ensemble of the uploaded heads, the heads averaged
    # by samples: TsingZ0/HtFLlib@61b9a19:system/flcore/servers/servergen.py; the client's
    # CE on G's features as many as its batch, G in training mode:
    # TsingZ0/HtFLlib@61b9a19:system/flcore/clients/clientgen.py
    def __init__(
        self,
        gen_lr: float = 0.005,
        server_epochs: int = 100,
        server_batch: int = 10,
        noise_dim: int = 512,
        hidden_dim: int = 512,
        **kw,
    ):
        super().__init__(**kw)
        self.gen_lr, self.server_epochs = float(gen_lr), int(server_epochs)
        self.server_batch = int(server_batch)
        self.noise_dim, self.hidden_dim = int(noise_dim), int(hidden_dim)
        self.generator: Generator | None = None
        self.label_counts: torch.Tensor | None = None  # [clients, C], as last uploaded
        self.global_head: dict[str, torch.Tensor] = {}  # the averaged (weight, bias)
        self._client_gen: Generator | None = None
        self._draw: torch.Tensor | None = None  # the label counts a client draws from

    def local_keys(self, model: nn.Module) -> set[str]:
        """Everything but the linear head: only heads are averaged."""
        head = {id(p) for p in model.get_classifier().parameters()}
        return {n for n, t in named_state(model).items() if id(t) not in head}

    def setup(self, model: nn.Module, num_clients: int) -> None:
        super().setup(model, num_clients)
        head = linear_classifier(model, self.name)
        self.num_classes, self.dim = head.out_features, head.in_features
        names = {id(p): n for n, p in model.named_parameters()}
        self.head_keys = (names[id(head.weight)], names[id(head.bias)])
        if self.generator is None:  # one server model, however often set up (per client group)
            self.label_counts = torch.zeros(num_clients, self.num_classes, device="cpu")
            with seeded(GENERATOR_SEED):  # on the CPU, where the server trains it
                self.generator = self._new_generator()

    def _new_generator(self) -> Generator:
        return Generator(self.num_classes, self.dim, self.hidden_dim, self.noise_dim)

    def downlink_to(self, client: int, down: dict) -> dict[str, torch.Tensor]:
        """The averaged head; once counts were uploaded, the generator's parameters and the
        label counts too."""
        if not bool(self.label_counts.sum() > 0):
            return dict(down)
        gen = {f"generator.{k}": v.detach() for k, v in self.generator.named_parameters()}
        return {**down, **gen, "label_counts": self.label_counts.sum(0)}

    def client_begin(self, ctx: ClientCtx) -> None:
        self._draw = None
        if "label_counts" not in ctx.downloaded:
            return  # round 1: the server knows no counts yet, CE only
        device = next(ctx.model.parameters()).device
        if self._client_gen is None:
            self._client_gen = self._new_generator().requires_grad_(False)
        self._client_gen.to(device).train()  # batch statistics, as the server trains it
        got = {k.removeprefix("generator."): v for k, v in ctx.downloaded.items()}
        with torch.no_grad():
            for k, p in self._client_gen.named_parameters():
                p.copy_(got[k])
        self._draw = ctx.downloaded["label_counts"].float().to(device)

    def objective(self, ctx: ClientCtx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = F.cross_entropy(ctx.model(x), y)
        if self._draw is not None:
            n = int(self.train_cfg.get("batch_size", len(y)))
            labels = torch.multinomial(self._draw, n, replacement=True)
            with torch.no_grad():
                z = self._client_gen(labels)
            loss = loss + F.cross_entropy(ctx.model.get_classifier()(z), labels)
        return loss

    def client_end(self, ctx: ClientCtx) -> Payload:
        """The head and the client's class counts (a client without data, a structure job
        counting what is sent, holds ``num_samples`` images of class 0)."""
        if ctx.data is None:
            counts = torch.zeros(self.num_classes)
            counts[0] = ctx.num_samples
        else:
            y = ctx.data.labels[ctx.idx]
            counts = torch.bincount(y, minlength=self.num_classes).float()
        wk, bk = self.head_keys
        head = take(ctx.model, self.head_keys)  # named alike whatever the model's names
        extra = {"head.weight": head[wk], "head.bias": head[bk], "counts": counts}
        return Payload(ctx.client, ctx.num_samples, ctx.steps, {}, extra)

    def exchange(self, payloads: list[Payload], r: int) -> None:
        """The generator trained on every client's uploaded head and label counts alone,
        whatever its model, then the heads averaged by samples."""
        for p in payloads:
            self.label_counts[p.client] = p.extra["counts"].cpu()
        heads = [{k: p.extra[f"head.{k}"] for k in ("weight", "bias")} for p in payloads]
        train_generator(
            self.generator, [(h["weight"].cpu().float(), h["bias"].cpu().float()) for h in heads],
            self.weights(payloads), self.label_counts.sum(0), self.gen_lr, self.server_epochs,
            self.server_batch, derive_seed(GENERATOR_SEED, r),
        )  # fmt: skip
        self.global_head = weighted_sum(heads, self.weights(payloads))

    def aggregate(self, current: dict, payloads: list[Payload]) -> dict[str, torch.Tensor]:
        """This model's head is the average of every client's (``exchange``): its own copy,
        as each model's shared tensors are saved apart."""
        wk, bk = self.head_keys
        head = self.global_head
        return {**current, wk: head["weight"].clone(), bk: head["bias"].clone()}

    def server_parameters(self) -> int:
        return sum(p.numel() for p in self.generator.parameters())

    def state_dict(self) -> dict:
        return {"generator": moved(self.generator.state_dict(), "cpu"),
                "label_counts": self.label_counts}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        self.generator.load_state_dict(state["generator"])
        self.label_counts = state["label_counts"]
