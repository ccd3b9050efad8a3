"""The batch of a forward pass without gradients (evaluation, a client's uploads): torch-free,
so the cost model (``fedrepro.cost.work``) counts the batches a run evaluates in as the engine
(``fedrepro.fl.local``) forms them."""

from __future__ import annotations

EVAL_BATCH = 1024  # evaluation batch up to EVAL_SIDE px, unless the run sets train.eval_batch_size
EVAL_SIDE = 64  # larger inputs: as many pixels a batch (224 px: 83 images, a ViT-B's forward
# about 0.9 GB where 1,024 images took 10.6 GB, more than its training step; docs/gpu.md)


def eval_batch_size(train: dict, side: int | None) -> int:
    """The batch of a forward pass without gradients (evaluation, a client's uploads) of
    ``side``-px inputs: the run's ``train.eval_batch_size`` where set, else ``EVAL_BATCH``
    images up to ``EVAL_SIDE`` px and as many pixels above. Each image's outputs do not depend
    on the batch it is forwarded in (batch norm evaluates with its running statistics)."""
    if train.get("eval_batch_size") is not None:
        return int(train["eval_batch_size"])
    side = int(side or EVAL_SIDE)
    return max(1, min(EVAL_BATCH, EVAL_BATCH * EVAL_SIDE**2 // side**2))
