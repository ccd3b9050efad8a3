"""Partial sharing: FedBN keeps normalisation layers local, FedPer keeps the head local."""

from __future__ import annotations

from fedrepro.fl.algorithm import Algorithm
from fedrepro.models.registry import head_keys, norm_keys


class FedBN(Algorithm):
    """Li et al. 2021: norm affine parameters and running statistics never leave a client."""

    name = "fedbn"

    def local_keys(self, model) -> set[str]:
        return set(norm_keys(model))


class FedPer(Algorithm):
    """Arivazhagan et al. 2019: the classifier head is personal, the base is averaged."""

    name = "fedper"

    def local_keys(self, model) -> set[str]:
        return set(head_keys(model))


class Local(Algorithm):
    """Local / SOLO: every client trains alone for the same budget; nothing is sent."""

    name = "local"

    def local_keys(self, model) -> set[str]:
        return {n for n, _ in model.named_parameters()} | {n for n, _ in model.named_buffers()}
