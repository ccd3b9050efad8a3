"""A training step's device memory counted on the meta device (fedrepro.bench.job_memory)."""

from __future__ import annotations

import pytest

from fedrepro.bench.job_memory import activation_mb, federation_memory_mb, step_memory_mb

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


def test_clients_of_different_models_hold_each_module_once_and_one_step_at_a_time():
    """Issue 34: five clients of two backbones hold two modules, every client's trainable set,
    and the gradients, momentum and activations of the largest step only."""
    wide, narrow = "vit_tiny_mini", "vit_pfedpt_mini"
    model = {"backbone": wide, "img_size": 16, "tuning": "vpt_deep"}
    train = {"batch_size": 4, "optimizer": "sgd", "momentum": 0.9}
    one = {n: step_memory_mb({"model": {**model, "backbone": n}, "train": train}, 10)
           for n in (wide, narrow)}  # fmt: skip
    clients = [wide, narrow, wide, narrow, wide]
    fed = federation_memory_mb(
        {"model": {**model, "client_backbones": clients}, "train": train}, 10
    )
    assert fed["weights"] == pytest.approx(one[wide]["weights"] + one[narrow]["weights"])
    assert fed["clients"] == pytest.approx(
        3 * one[wide]["gradients"] + 2 * one[narrow]["gradients"]
    )
    for part in ("gradients", "optimizer", "activations"):  # the wider model's step
        assert fed[part] == pytest.approx(one[wide][part])
    assert fed["total"] < fed["copies"]
    same = federation_memory_mb({"model": model, "train": train}, 10)
    assert same["weights"] == pytest.approx(one[wide]["weights"])  # one backbone: one module
