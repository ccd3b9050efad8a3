"""FedTHE (Jiang & Lin, ICLR 2023), a baseline of FedICON (§5.1; docs/methods/fedicon.md).

Training: the global model learns with the balanced-softmax cross-entropy (logits plus the
log of the client's training label prior); a personal linear head (no bias, kept on the
client) learns ``head_epochs`` on the frozen representation after each round's local
training; each client records the mean representation of its training images, kept locally
(``fedthe_local_rep``) and sent (``fedthe_global_rep``, averaged by the server as every shared
tensor is: the global mean representation). Test time (``THEPredictor``, adapt method ``the``):
for each test batch the global and personal heads are mixed per sample with weights
e = softmax(a), a optimised by Adam for up to ``steps`` steps on
mean_b[s_b·H(e_g ŷ_g + e_p ŷ_p) + (1 − s_b)(e_g‖h − h_g‖ + e_p‖h − h_l‖)],
s_b = cos(softmax ŷ_g, softmax ŷ_p), h the batch's representation smoothed with the
history of earlier test batches (EMA α = 0.1, mixing β = 0.1), as
``LINs-lab/FedTHE@9eeff19:pcode/local_training/THE_worker.py`` does.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.algorithms.personalized import Local
from fedrepro.fl.algorithm import Algorithm, ClientCtx, Payload
from fedrepro.fl.contrastive import representation
from fedrepro.fl.optim import make_optimizer

HEAD = "fedthe_head"
LOCAL_REP = "fedthe_local_rep"
GLOBAL_REP = "fedthe_global_rep"


def attach_fedthe(model: nn.Module) -> None:
    """Give ``model`` FedTHE's personal head and its two representation buffers (once)."""
    if hasattr(model, HEAD):
        return
    classifier = model.get_classifier()
    dim, classes = classifier.in_features, classifier.out_features
    device = classifier.weight.device
    generator = torch.Generator().manual_seed(0)  # one personal-head init for every client
    weight = (torch.rand(classes, dim, generator=generator) * 2 - 1) / dim**0.5
    head = nn.Linear(dim, classes, bias=False, device=device)
    with torch.no_grad():
        head.weight.copy_(weight.to(device))
    model.add_module(HEAD, head)
    model.register_buffer(LOCAL_REP, torch.zeros(dim, device=device))
    model.register_buffer(GLOBAL_REP, torch.zeros(dim, device=device))


class FedTHE(Algorithm):
    name = "fedthe"

    def __init__(self, head_epochs: int = 1, head_lr: float | None = None, **kw):
        super().__init__(**kw)
        self.head_epochs = int(head_epochs)
        self.head_lr = head_lr

    def local_keys(self, model: nn.Module) -> set[str]:
        return {f"{HEAD}.weight", LOCAL_REP}

    def prepare_model(self, model: nn.Module) -> None:
        attach_fedthe(model)

    def client_begin(self, ctx: ClientCtx) -> None:
        classes = ctx.model.get_classifier().out_features
        if ctx.data is None:  # a client without data (counting FLOPs): a uniform prior
            counts = torch.ones(classes)
        else:
            counts = torch.bincount(ctx.data.labels[ctx.idx], minlength=classes).float()
        self.log_prior = torch.log(counts / counts.sum() + 1e-12)  # balanced softmax

    def objective(self, ctx: ClientCtx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = ctx.model(x)
        return F.cross_entropy(logits + self.log_prior.to(logits.device), y)

    def client_end(self, ctx: ClientCtx) -> Payload:
        model = ctx.model
        self._train_personal_head(ctx)
        with torch.no_grad():
            model.eval()
            reps = [
                representation(model, ctx.data.batch(ctx.idx[s : s + 256])[0])
                for s in range(0, len(ctx.idx), 256)
            ]
            mean = torch.cat(reps).mean(0)
            getattr(model, LOCAL_REP).copy_(mean)
            getattr(model, GLOBAL_REP).copy_(mean)  # averaged by the server: the global rep
        return super().client_end(ctx)

    def _train_personal_head(self, ctx: ClientCtx) -> None:
        model = ctx.model
        head = getattr(model, HEAD)
        lr = float(self.head_lr if self.head_lr is not None else ctx.lr)
        opt = make_optimizer(list(head.parameters()), self.train_cfg, lr)
        gen = torch.Generator(ctx.idx.device).manual_seed(ctx.client * 1009 + ctx.round)
        batch = int(self.train_cfg.get("batch_size", 32))
        model.eval()  # the representation is frozen (its BN statistics too)
        for _ in range(self.head_epochs):
            order = ctx.idx[torch.randperm(len(ctx.idx), generator=gen, device=gen.device)]
            for s in range(0, len(order), batch):
                x, y = ctx.data.batch(order[s : s + batch])
                with torch.no_grad():
                    h = representation(model, x)
                loss = F.cross_entropy(head(h), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()


class THEPredictor(nn.Module):
    """FedTHE's test-time head ensemble for one client (online over its test batches)."""

    def __init__(self, model: nn.Module, lr: float, steps: int = 20, alpha: float = 0.1,
                 beta: float = 0.1):  # fmt: skip
        super().__init__()
        self.model = model
        self.lr, self.steps, self.alpha, self.beta = float(lr), int(steps), alpha, beta
        self.history: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        model = self.model
        with torch.no_grad():
            h_now = representation(model, x)
            g_logits = model.get_classifier()(h_now)
            p_logits = getattr(model, HEAD)(h_now)
            batch_mean = h_now.mean(0)
            self.history = (
                batch_mean
                if self.history is None
                else self.alpha * batch_mean + (1 - self.alpha) * self.history
            )
            h = self.beta * h_now + (1 - self.beta) * self.history
            similar = F.cosine_similarity(g_logits.softmax(1), p_logits.softmax(1), dim=1)
            dist_g = (h - getattr(model, GLOBAL_REP)).norm(dim=1)
            dist_p = (h - getattr(model, LOCAL_REP)).norm(dim=1)
        a = torch.zeros(len(x), 2, device=x.device, requires_grad=True)
        opt = torch.optim.Adam([a], lr=self.lr)
        with torch.enable_grad():  # evaluation runs without gradients; a needs them
            for _ in range(self.steps):
                e = a.softmax(1)
                mixed = e[:, :1] * g_logits + e[:, 1:] * p_logits
                ent = -(mixed.softmax(1) * mixed.log_softmax(1)).sum(1)
                spread = e[:, 0] * dist_g + e[:, 1] * dist_p
                loss = (similar * ent + (1 - similar) * spread).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if a.grad.norm() < 1e-5:
                    break
                opt.step()
        with torch.no_grad():
            e = a.softmax(1)
            return e[:, :1] * g_logits + e[:, 1:] * p_logits


class THETest(Local):
    """FedTHE's test phase as an adaptation (adapt method ``the``): nothing trains; every
    client keeps its tensors and predicts through ``THEPredictor``."""

    name = "fedthe_test"

    def __init__(self, lr: float = 0.1, steps: int = 20, **kw):
        super().__init__(**kw)
        self.lr, self.steps = float(lr), int(steps)

    def prepare_model(self, model: nn.Module) -> None:
        attach_fedthe(model)

    def predictor(self, model: nn.Module, client: int = 0, generator=None) -> nn.Module:
        return THEPredictor(model, self.lr, self.steps)
