"""A training step's device memory counted on the meta device (fedrepro.bench.job_memory)."""

from __future__ import annotations

import pytest

from fedrepro.bench.job_memory import activation_mb, step_memory_mb

CNN = {"backbone": "cnn_fedicon", "img_size": 32}


def test_activations_grow_with_the_batch_and_exclude_the_weights():
    one, four = activation_mb(CNN, 10, 1), activation_mb(CNN, 10, 4)
    assert one > 0
    assert four == pytest.approx(4 * one, rel=0.01)  # saved tensors are per image


def test_a_frozen_backbone_has_no_gradients_or_momentum_but_still_its_activations():
    vit = {"backbone": "vit_base_patch16_224.augreg_in21k_ft_in1k", "img_size": 224}
    train = {"batch_size": 2, "optimizer": "sgd", "momentum": 0.9}
    full = step_memory_mb({"model": {**vit, "tuning": "full"}, "train": train}, 10)
    vpt = step_memory_mb({"model": {**vit, "tuning": "vpt_deep"}, "train": train}, 10)
    assert full["gradients"] == full["optimizer"] == pytest.approx(full["weights"], rel=0.01)
    assert vpt["gradients"] < 0.01 * full["gradients"]
    assert vpt["activations"] > 0.5 * full["activations"]  # backward still crosses every block
    assert full["total"] == pytest.approx(sum(v for k, v in full.items() if k != "total"))
    adam = step_memory_mb(
        {"model": {**vit, "tuning": "full"}, "train": {**train, "optimizer": "adam"}}, 10
    )
    assert adam["optimizer"] == pytest.approx(2 * full["optimizer"])
