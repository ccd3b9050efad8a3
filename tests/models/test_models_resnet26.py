"""Rebuffi's ResNet-26 and its parallel residual adapters (adapters paper §III)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.models.adapters import conv_tasks, merge_adapters
from fedrepro.models.registry import create_backbone
from fedrepro.models.resnet26 import BasicBlock, ConvTask, ResNet26
from fedrepro.models.tuning import apply_tuning, frozen_keys


def test_spatial_path_and_rebuffi_key_names():
    model = ResNet26(10)
    sizes = []
    for stage in (model.layer1, model.layer2, model.layer3):
        stage.register_forward_hook(lambda m, i, o: sizes.append(o.shape[-1]))
    with torch.no_grad():
        model(torch.randn(1, 3, 72, 72))
    assert sizes == [36, 18, 9]
    keys = set(model.state_dict())
    assert {
        "pre_layers_conv.conv.weight",
        "pre_layers_conv.bns.0.running_var",
        "layer1.0.conv1.conv.weight",
        "layer1.0.conv2.1.bns.0.weight",
        "end_bns.0.0.weight",
        "linears.0.weight",
        "linears.0.bias",
    } <= keys
    assert all(m.bias is None for m in model.modules() if isinstance(m, nn.Conv2d))
    apply_tuning(model, "adapters")
    assert "layer3.3.conv2.1.parallel_conv.0.conv.weight" in model.state_dict()


def test_zero_pad_shortcut_is_parameter_free_and_handles_odd_sizes():
    block = BasicBlock(4, 8, stride=2)
    conv_and_bn = 9 * 4 * 8 + 9 * 8 * 8 + 2 * (8 + 8)
    assert sum(p.numel() for p in block.parameters()) == conv_and_bn
    x = torch.randn(2, 4, 9, 9)
    short = block.shortcut(x)
    assert short.shape == (2, 8, 5, 5) == block(x).shape
    assert torch.equal(short[:, 4:], torch.zeros_like(short[:, 4:]))
    assert torch.allclose(short[:, :4, :4, :4], F.avg_pool2d(x[..., :8, :8], 2))
    with pytest.raises(ValueError):
        BasicBlock(8, 4)


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("size", [8, 9])
def test_one_conv_task_merges_exactly(stride, size):
    torch.manual_seed(stride * 10 + size)
    task = ConvTask(5, 7, stride).double()
    task.add_adapter()
    task.double()
    task.bns[0].running_mean.normal_()
    task.bns[0].running_var.uniform_(0.5, 2.0)
    task.eval()
    x = torch.randn(3, 5, size, size, dtype=torch.float64)
    with torch.no_grad():
        before = task(x)
        task.merge_adapter()
        after = task(x)
    assert task.parallel_conv is None
    assert (before - after).abs().max() < 1e-12


def test_whole_network_merge_gives_the_base_topology_and_the_same_outputs():
    torch.manual_seed(0)
    model = apply_tuning(ResNet26(10), "adapters").double().eval()
    base_keys = set(ResNet26(10).state_dict())
    x = torch.randn(2, 3, 72, 72, dtype=torch.float64)
    with torch.no_grad():
        adapted = model(x)
        merge_adapters(model)
        merged = model(x)
    assert set(model.state_dict()) == base_keys  # the same number of parameters as the base
    assert (adapted - merged).abs().max() < 1e-10
    with pytest.raises(ValueError, match="no adapter"):
        conv_tasks(model)[0].merge_adapter()


def test_adapters_change_the_function_and_start_from_one_seeded_init():
    def build(seed):
        torch.manual_seed(seed)
        return apply_tuning(create_backbone("resnet26_mini", 5), "adapters")

    a, b, c = build(1), build(1), build(2)
    key = "layer1.0.conv1.parallel_conv.0.conv.weight"
    assert torch.equal(a.state_dict()[key], b.state_dict()[key])
    assert not torch.equal(a.state_dict()[key], c.state_dict()[key])
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        base = a.eval()(x)
        for task in conv_tasks(a):
            nn.init.zeros_(task.parallel_conv[0].conv.weight)
        assert not torch.allclose(base, a(x))


def test_trainable_and_frozen_sets_per_variant():
    full = apply_tuning(ResNet26(10), "full")
    assert frozen_keys(full) == []
    adapted = apply_tuning(ResNet26(10), "adapters")
    frozen = frozen_keys(adapted)
    assert len(frozen) == 25 and all(k.endswith(".conv.weight") for k in frozen)
    assert not any("parallel_conv" in k for k in frozen)
    trainable = {n: p for n, p in adapted.named_parameters() if p.requires_grad}
    adapters = sum(p.numel() for n, p in trainable.items() if "parallel_conv" in n)
    bn = sum(p.numel() for n, p in trainable.items() if ".bns." in n or "end_bns" in n)
    fc = sum(p.numel() for n, p in trainable.items() if n.startswith("linears"))
    assert (adapters, bn, fc) == (645_216, 7_744, 2_570)  # docs/methods/adapters.md#model
    assert adapters + bn + fc == sum(p.numel() for p in trainable.values())
    with pytest.raises(ValueError, match="allowed: full, adapters"):
        apply_tuning(ResNet26(10), "lora")
    with pytest.raises(ValueError, match="no 3×3 convolutions"):
        apply_tuning(nn.Linear(2, 2), "adapters")


@pytest.mark.parametrize("algorithm", ["fedavg", "fedprox", "fednova"])
def test_training_with_adapters_never_moves_the_frozen_kernels(algorithm):
    from fedrepro.algorithms import make_algorithm
    from fedrepro.fl.engine import run_rounds
    from fedrepro.fl.tensors import nbytes
    from tests.fl_helpers import problem, train_cfg

    data, clients = problem(num_clients=3, per_client=16)
    torch.manual_seed(0)
    model = apply_tuning(create_backbone("resnet26_mini", 3), "adapters")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    alg = make_algorithm({"name": algorithm, **({"mu": 0.01} if algorithm == "fedprox" else {})})
    state = run_rounds(train_cfg(rounds=2), model, alg, data, data, clients, log=lambda _: None)
    frozen = set(frozen_keys(model))
    assert frozen and not frozen & set(alg.shared)
    running = {k for k in before if k.endswith(("running_mean", "running_var"))}
    assert set(alg.shared) == set(alg.trainable) | running
    for key in frozen:
        assert torch.equal(model.state_dict()[key], before[key]), key
    moved = [
        k
        for k in alg.shared
        if "parallel_conv" in k and not torch.equal(state.shared[k], before[k])
    ]
    assert moved, "adapters were not trained"
    extra = 4 if algorithm == "fednova" else 0  # FedNova also sends its a_i
    assert state.history[0]["up_bytes"] == 3 * (nbytes(state.shared) + extra)
