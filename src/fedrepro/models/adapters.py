"""Tuning variants: full fine-tuning, or parallel residual adapters on a frozen base.

``tuning: adapters`` is the adapters paper's "w/ adapter" arm: a 1×1 adapter beside every 3×3
convolution, the 3×3 kernels frozen; adapters, every BN (affine and running statistics) and the
classifier stay trainable and are therefore what the engine sends. ``tuning: full`` ("w/o
adapter") trains and sends everything. After training, :func:`merge_adapters` folds each adapter
into its kernel, giving the base topology back with identical outputs.
"""

from __future__ import annotations

from torch import nn

from fedrepro.models.resnet26 import ConvTask

__all__ = ["TUNINGS", "apply_tuning", "conv_tasks", "frozen_keys", "merge_adapters"]

TUNINGS = ("full", "adapters")


def conv_tasks(model: nn.Module) -> list[ConvTask]:
    """Every adapter-capable 3×3 convolution (with its BN), in forward order."""
    return [m for m in model.modules() if isinstance(m, ConvTask)]


def apply_tuning(model: nn.Module, tuning: str = "full") -> nn.Module:
    """Give ``model`` the trainable set of a tuning variant (in place; returns the model).

    Adapters draw their init from torch's global RNG, so a seeded build gives every client the
    same initial adapters (the server's one common init)."""
    if tuning not in TUNINGS:
        raise ValueError(f"model.tuning: '{tuning}' (allowed: {', '.join(TUNINGS)})")
    if tuning == "full":
        return model
    tasks = conv_tasks(model)
    if not tasks:
        raise ValueError(f"{type(model).__name__} has no 3×3 convolutions that take adapters")
    for task in tasks:
        task.add_adapter()
        task.conv.weight.requires_grad_(False)
    return model


def frozen_keys(model: nn.Module) -> list[str]:
    """Names of the parameters that are not trained (and so never sent)."""
    return [n for n, p in model.named_parameters() if not p.requires_grad]


def merge_adapters(model: nn.Module) -> nn.Module:
    """Fold every adapter into its 3×3 kernel (in place): the base network, same function."""
    for task in conv_tasks(model):
        if task.parallel_conv is not None:
            task.merge_adapter()
    return model
