"""Parallel residual adapters (Rebuffi et al.; the adapters paper's "w/ adapter" arm).

A 1×1 adapter beside every 3×3 convolution of a :class:`~fedrepro.models.resnet26.ResNet26`,
the 3×3 kernels frozen; adapters, every BN (affine and running statistics) and the classifier
stay trainable. After training, :func:`merge_adapters` folds each adapter into its kernel,
giving the base topology back with identical outputs.
"""

from __future__ import annotations

from torch import nn

from fedrepro.models.resnet26 import ConvTask

__all__ = ["add_adapters", "conv_tasks", "merge_adapters"]


def conv_tasks(model: nn.Module) -> list[ConvTask]:
    """Every adapter-capable 3×3 convolution (with its BN), in forward order."""
    return [m for m in model.modules() if isinstance(m, ConvTask)]


def add_adapters(model: nn.Module) -> nn.Module:
    """Adapters beside every 3×3 conv, kernels frozen (in place; returns the model).

    Adapters draw their init from torch's global RNG, so a seeded build gives every client the
    same initial adapters (the server's one common init)."""
    tasks = conv_tasks(model)
    if not tasks:
        raise ValueError(f"{type(model).__name__} has no 3×3 convolutions that take adapters")
    for task in tasks:
        task.add_adapter()
        task.conv.weight.requires_grad_(False)
    return model


def merge_adapters(model: nn.Module) -> nn.Module:
    """Fold every adapter into its 3×3 kernel (in place): the base network, same function."""
    for task in conv_tasks(model):
        if task.parallel_conv is not None:
            task.merge_adapter()
    return model
