"""Adaptation of a trained run (the ``adapt`` stage): the registry of methods.

An adapt job starts from a finished training run's saved state and never writes into the
run's directory. Each method turns the run's config and its own options into the config
of an engine run (``fedrepro.fl.engine.run_rounds``), so adaptation checkpoints, resumes
and evaluates exactly as training does. The experiment schema's ``adapt.method`` enum
(``fedrepro/schemas/adapt.yaml``) lists these keys; a test keeps the two equal.
"""

from __future__ import annotations

from fedrepro.tta.client_train import CLIENT_TRAIN
from fedrepro.tta.finetune import FINETUNE, AdaptMethod
from fedrepro.tta.test_time import EATA, EVALUATE, FEDICON_TEST, T3A, TENT, THE

ADAPT_METHODS: dict[str, AdaptMethod] = {
    m.name: m for m in (FINETUNE, CLIENT_TRAIN, EVALUATE, TENT, EATA, T3A, THE, FEDICON_TEST)
}


def adapt_method(adapt: dict) -> AdaptMethod:
    """The method an ``adapt`` block names (``{"method": ..., **options}``)."""
    name = adapt.get("method")
    if name not in ADAPT_METHODS:
        raise ValueError(f"adapt.method: unknown {name!r} (allowed: {', '.join(ADAPT_METHODS)})")
    return ADAPT_METHODS[name]
