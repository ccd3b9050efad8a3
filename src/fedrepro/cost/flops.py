"""Model FLOPs per sample, counted by ``torch.utils.flop_counter`` on the meta device, and the
device kernels of a step.

The count is of one training step as the engine runs it (the algorithm's objective and
its backward) and of one evaluation forward, so algorithm extras (MOON's two reference
forwards, FedIns's query pass) are included. Shapes are real; no weights or memory are
needed, so paper-scale models are counted on any machine. The kernels are the operators the
same step and forward dispatch that run on the device (every aten operator but views and
allocations, which touch metadata only): a small network's step is bound by their launches,
not by its FLOPs (``fedrepro.cost.work.hours``). Not counted: the optimizer's update (a few
fused ``_foreach`` kernels), the batch's augmentation on the device.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from fedrepro.arithmetic import CLASSES
from fedrepro.models.registry import get_spec
from fedrepro.structure.payload import begin_client, sender

# operators that allocate without computing: no kernel on the device
ALLOCATIONS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}


class KernelCount(TorchDispatchMode):
    """The operators dispatched inside the mode that launch a device kernel: every aten
    operator but a view (``OpOverload.is_view``: a new header on the same storage) and an
    allocation."""

    def __init__(self):
        super().__init__()
        self.kernels = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view and func.overloadpacket.__name__ not in ALLOCATIONS:
            self.kernels += 1
        return func(*args, **(kwargs or {}))


def _counted(fn) -> tuple[dict[str, int], int]:
    """FLOPs of ``fn`` by class of operation (fedrepro.arithmetic.CLASSES): convolutions
    (forward and backward: cuDNN's), and every other counted operation (matmuls, batched
    matmuls, attention: cuBLAS's); and the kernels it launches (``KernelCount``)."""
    with FlopCounterMode(display=False) as counter, KernelCount() as launches:
        fn()
    out = dict.fromkeys(CLASSES, 0)
    for op, n in counter.get_flop_counts()["Global"].items():
        out["conv" if "convolution" in str(op) else "matmul"] += int(n)
    return out, launches.kernels


def per_sample_flops(
    backbone: str,
    num_classes: int,
    img_size: int | None,
    model_cfg: dict,
    algorithm_cfg: dict,
    batch: int = 2,
) -> dict[str, float]:
    """``{"train": FLOPs of one sample's step, "eval": FLOPs of one sample's forward,
    "by_class": the two by class of operation, "personalized": whether each client evaluates
    its own model, "kernels": the device kernels of one training step and of one evaluation
    forward}``."""
    side = img_size or get_spec(backbone).img_size
    with torch.device("meta"):  # built on meta; run outside the mode, which slows every op
        model, algorithm = sender(backbone, num_classes, model_cfg, algorithm_cfg, img_size=side)
        ctx = begin_client(model, algorithm)
    x = torch.empty(batch, 3, side, side, device="meta")
    y = torch.zeros(batch, dtype=torch.long, device="meta")
    ctx.round = 1  # the first round's step stands for every round's
    views = torch.cat([x] * algorithm.views(ctx.round))  # a training step sees every view
    model.train()
    try:
        train, step_kernels = _counted(lambda: algorithm.objective(ctx, views, y).backward())
    except NotImplementedError:  # a data-dependent selection (EATA) has no meta version:
        # count the plain step over the whole batch, the most the selection can cost
        model.zero_grad(set_to_none=True)
        train, step_kernels = _counted(lambda: model(views).logsumexp(1).sum().backward())
    model.eval()
    with torch.no_grad():
        forward, forward_kernels = _counted(lambda: model(x))
    return {
        "train": sum(train.values()) / batch,
        "eval": sum(forward.values()) / batch,
        "by_class": {
            "train": {c: n / batch for c, n in train.items()},
            "eval": {c: n / batch for c, n in forward.items()},
        },
        "personalized": algorithm.personalized,
        "kernels": {"train": step_kernels, "eval": forward_kernels},
    }
