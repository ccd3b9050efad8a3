"""Local training: the inner loop shared by every algorithm and by centralized pretraining."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.arithmetic import check
from fedrepro.device import on
from fedrepro.fl.data import DeviceData
from fedrepro.fl.eval_batch import EVAL_BATCH
from fedrepro.fl.optim import make_optimizer
from fedrepro.fl.timing import NULL_CLOCK
from fedrepro.models.query_cache import inputs_of


def autocast(x: torch.Tensor, precision: str):
    """The one place mixed precision is entered, for training and evaluation alike: bf16
    autocast on CUDA when the run asks for ``precision: bf16``; fp32 (the papers') enters none."""
    check(precision)
    if precision == "bf16" and x.is_cuda:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def train_epochs(
    model: nn.Module,
    data: DeviceData,
    idx: torch.Tensor,
    train: dict,
    lr: float,
    epochs: int,
    generator: torch.Generator,
    transform=None,
    correct_gradients: Callable[[], None] | None = None,
    objective: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    clock=NULL_CLOCK,
    optimizer: torch.optim.Optimizer | None = None,
    views: int = 1,
) -> tuple[int, float]:
    """`epochs` passes over `idx` in shuffled minibatches; returns (steps, mean loss).

    With ``train.local_steps`` the client instead takes exactly that many steps, starting a
    new shuffled pass whenever one ends (FedPCE's 50 iterations between aggregations), and
    stops early after a pass in which the objective took no step.
    ``optimizer`` (default: a fresh one over the trainable parameters at ``lr``) is the
    engine's when it keeps per-client state or parameter groups.

    ``objective(x, y)`` gives the loss of a batch (default: cross-entropy of ``model(x)``), or
    None to take no step on it;
    with ``views`` > 1, ``x`` stacks that many independently augmented copies of the batch,
    each perturbed by the data's ``views`` (``fedrepro.data.transforms.views``) where it has
    them, in place of its training augmentation.
    A last batch of one sample is dropped (batch norm cannot train on it), every short last
    batch with ``train.drop_last`` (PyTorch's DataLoader flag, as FedIns's code trains).
    ``train.precision`` (default fp32) picks the arithmetic. The loss is summed on the device
    and read once, so steps never wait for the device.
    """
    if objective is None:

        def objective(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return F.cross_entropy(model(x), y)

    if optimizer is None:
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            return 0, math.nan  # nothing trains: the client is only evaluated
        optimizer = make_optimizer(params, train, lr)
    opt = optimizer
    bs = int(train["batch_size"])
    model.train()
    steps = 0
    loss_sum = torch.zeros((), dtype=torch.float64, device=idx.device)
    precision = train.get("precision", "fp32")
    drop_last = bool(train.get("drop_last", False))
    budget = train.get("local_steps")
    can_step = len(idx) >= (bs if drop_last else 2)  # else a step budget would never be met
    # a sample's input fixed by its index: a frozen query is computed once per image
    fixed = transform is None and views == 1 and not data.augments
    cache = fixed and bool(train.get("cache_query", True))
    passes = 0
    while (steps < budget and can_step) if budget is not None else passes < epochs:
        passes += 1
        before = steps
        order = idx[torch.randperm(len(idx), generator=generator, device=on(generator, idx.device))]
        for start in range(0, len(order), bs):
            if budget is not None and steps >= budget:
                break
            b = order[start : start + bs]
            if len(b) < 2 or (drop_last and len(b) < bs):
                continue
            with clock.phase("data"):
                if views > 1:  # contrastive views: the data's view perturbations
                    x, y = data.views_batch(b, generator, transform, views)
                else:
                    x, y = data.batch(b, generator, transform, train=True)
            with clock.phase("step"):
                with autocast(x, precision), inputs_of(model, data, b, cache):
                    loss = objective(x, y)
                if loss is None:  # the objective selected nothing in this batch (EATA)
                    continue
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if correct_gradients is not None:
                    correct_gradients()
                opt.step()
            steps += 1
            loss_sum += loss.detach()
        if budget is not None and steps == before:  # a pass the objective took no step in:
            break  # the budget cannot be met (EATA selecting no sample would loop forever)
    mean = float(loss_sum) / steps if steps else math.nan
    return steps, mean


@torch.no_grad()
def outputs_of(
    model: nn.Module,
    data: DeviceData,
    idx: torch.Tensor,
    forward: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None = None,
    batch_size: int = EVAL_BATCH,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``forward(model, x)`` (default: the logits) of samples ``idx`` in evaluation mode,
    without augmentation, in float32, in batches of ``batch_size``, and their labels (what a
    client uploads of its own training images: FedHPL's logits, FedGH's representations;
    FedMD's logits on public images)."""
    model.eval()
    out, labels = [], []
    for part in idx.split(batch_size):
        x, y = data.batch(part)
        out.append((model(x) if forward is None else forward(model, x)).float())
        labels.append(y)
    return torch.cat(out), torch.cat(labels)


@torch.no_grad()
def predict(
    model: nn.Module,
    data: DeviceData,
    idx: torch.Tensor,
    generator: torch.Generator | None = None,
    transform=None,
    batch_size: int = EVAL_BATCH,
    precision: str = "fp32",
    cache_query: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample correctness (bool) and cross-entropy for `idx`, in batches of `batch_size`
    (part of a method whose inference pools over the batch, like FedIns's batch scope).
    Without a client ``transform`` a frozen query is computed once per image
    (``models.query_cache``; off with ``cache_query`` False)."""
    model.eval()
    correct, losses = [], []
    for start in range(0, len(idx), batch_size):
        b = idx[start : start + batch_size]
        x, y = data.batch(b, generator, transform)
        with autocast(x, precision), inputs_of(model, data, b, cache_query and transform is None):
            logits = model(x).float()
        correct.append(logits.argmax(1) == y)
        losses.append(F.cross_entropy(logits, y, reduction="none"))
    if not correct:
        empty = torch.zeros(0, device=idx.device)
        return empty.bool(), empty
    return torch.cat(correct), torch.cat(losses)
