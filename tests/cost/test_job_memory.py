"""A training step's device memory counted on the meta device (fedrepro.cost.job_memory)."""

from __future__ import annotations

import pytest
import torch

from fedrepro.cost.job_memory import (
    LivePeak,
    activation_mb,
    device_mb,
    evaluation_mb,
    federation_memory_mb,
    step_memory_mb,
)
from fedrepro.fl.eval_batch import eval_batch_size

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


VIT_B = {"backbone": "vit_base_patch16_224.augreg_in21k_ft_in1k", "img_size": 224}


def test_live_peak_counts_what_is_alive_at_once_not_what_was_made():
    live = LivePeak()
    with live:
        x = torch.empty(1000, device="meta")  # 4 kB
        for _ in range(5):
            y = x * 2  # each 4 kB, the previous freed when y is rebound
            y.add_(1)  # in place: nothing new
        del y
    assert live.peak == 3 * 4000  # x, the old y and the new one while it is assigned
    assert live.live == 4000  # x


def test_evaluation_at_224_px_no_longer_sets_a_vit_jobs_peak():
    """Issue 51: the evaluation batch of 1,024 held 10.6 GB in a ViT-B's forward at 224 px, more
    than its training step (5.5 GB); the default batch is now 1,024 images' pixels at 64 px
    (83 images at 224 px) and the step sets the peak again."""
    run = {"model": {**VIT_B, "tuning": "full"}, "partition": {"clients": 6},
           "algorithm": {"name": "fedavg"},
           "train": {"batch_size": 32, "optimizer": "sgd", "momentum": 0.9}}  # fmt: skip
    assert eval_batch_size(run["train"], 224) == 83
    assert eval_batch_size(run["train"], 32) == eval_batch_size(run["train"], None) == 1024
    assert eval_batch_size({"eval_batch_size": 128}, 224) == 128  # a run's own
    old = evaluation_mb(run["model"], 10, 1024)["total"]
    mem = device_mb(run, 10, data_mb=100.0)
    assert old > 10_000 > mem["step"] > mem["evaluate"]
    assert mem["peak"] == pytest.approx(mem["step"] + mem["state"] + 100.0)


def test_per_client_state_counts_feddc_twice_and_scaffold_once_a_client():
    model = {"backbone": "cnn_fedicon", "img_size": 32}
    train = {"batch_size": 8, "optimizer": "sgd", "momentum": 0.0}

    def state(name, clients):
        run = {"model": model, "train": train, "algorithm": {"name": name},
               "partition": {"clients": clients}}  # fmt: skip
        return device_mb(run, 10, 0.0)["state"]

    trainable = step_memory_mb({"model": model, "train": train}, 10)["gradients"]
    assert state("fedavg", 10) == 0.0
    assert state("scaffold", 10) == pytest.approx(11 * trainable)
    assert state("feddc", 10) == pytest.approx(21 * trainable)


def test_an_older_default_batch_leaves_a_runs_own_evaluation_batch_alone():
    model = {"backbone": "cnn_fedicon", "img_size": 32}
    train = {"batch_size": 8, "optimizer": "sgd", "momentum": 0.0}
    base = {"model": model, "algorithm": {"name": "fedavg"}, "partition": {"clients": 2}}
    own = {**base, "train": {**train, "eval_batch_size": 16}}
    assert device_mb(own, 10, 0.0, eval_batch=1024) == device_mb(own, 10, 0.0)
    default = {**base, "train": train}
    assert (
        device_mb(default, 10, 0.0, eval_batch=4096)["evaluate"]
        > device_mb(default, 10, 0.0)["evaluate"]
    )
