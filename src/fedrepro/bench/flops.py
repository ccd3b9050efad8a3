"""Model FLOPs per sample, counted by ``torch.utils.flop_counter`` on the meta device.

The count is of one training step as the engine runs it (the algorithm's objective and
its backward) and of one evaluation forward, so algorithm extras (MOON's two reference
forwards, FedIns's query pass) are included. Shapes are real; no weights or memory are
needed, so paper-scale models are counted on any machine.
"""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from fedrepro.arithmetic import CLASSES
from fedrepro.models.registry import get_spec
from fedrepro.structure.payload import begin_client, sender


def _counted(fn) -> dict[str, int]:
    """FLOPs of ``fn`` by class of operation (fedrepro.arithmetic.CLASSES): convolutions
    (forward and backward: cuDNN's), and every other counted operation (matmuls, batched
    matmuls, attention: cuBLAS's)."""
    with FlopCounterMode(display=False) as counter:
        fn()
    out = dict.fromkeys(CLASSES, 0)
    for op, n in counter.get_flop_counts()["Global"].items():
        out["conv" if "convolution" in str(op) else "matmul"] += int(n)
    return out


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
    its own model}``."""
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
        train = _counted(lambda: algorithm.objective(ctx, views, y).backward())
    except NotImplementedError:  # a data-dependent selection (EATA) has no meta version:
        # count the plain step over the whole batch, the most the selection can cost
        model.zero_grad(set_to_none=True)
        train = _counted(lambda: model(views).logsumexp(1).sum().backward())
    model.eval()
    with torch.no_grad():
        forward = _counted(lambda: model(x))
    return {
        "train": sum(train.values()) / batch,
        "eval": sum(forward.values()) / batch,
        "by_class": {
            "train": {c: n / batch for c, n in train.items()},
            "eval": {c: n / batch for c, n in forward.items()},
        },
        "personalized": algorithm.personalized,
    }
