"""Layouts and kernels chosen for speed change how a model runs, never what it computes."""

import pytest
import torch

from fedrepro.fl.build import build_model
from fedrepro.models import resnet_cifar
from fedrepro.models.registry import BACKBONES


def _convs(model):
    return [p for p in model.parameters() if p.dim() == 4]


@pytest.mark.parametrize("tuning", ["full", "adapters"])
def test_resnet26_mini_is_built_channels_last_adapters_included(tuning):
    model = build_model({"backbone": "resnet26_mini", "tuning": tuning}, 10, 0, None, "cpu")
    convs = _convs(model)
    assert convs and all(p.is_contiguous(memory_format=torch.channels_last) for p in convs)
    assert not any(p.is_contiguous() for p in convs if p.shape[-1] > 1)


def test_other_backbones_keep_the_default_layout():
    assert not BACKBONES["resnet18_in_mini"].channels_last
    model = build_model({"backbone": "resnet18_in_mini"}, 10, 0, None, "cpu")
    assert all(p.is_contiguous() for p in _convs(model))


def test_channels_last_changes_the_layout_not_the_model():
    model = build_model({"backbone": "resnet26_mini", "tuning": "adapters"}, 10, 0, None, "cpu")
    plain = build_model({"backbone": "resnet26_mini", "tuning": "adapters"}, 10, 0, None, "cpu")
    plain = plain.to(memory_format=torch.contiguous_format)
    assert all(p.is_contiguous() for p in plain.parameters())
    x = torch.randn(4, 3, 16, 16)
    for m in (model, plain):
        m.train()
    torch.testing.assert_close(model(x), plain(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(4, 16, 24, 24), (4, 128, 2, 2)])
def test_instance_norm_is_torchs_in_values_and_gradients(shape):
    torch.manual_seed(0)
    x = torch.randn(*shape, requires_grad=True)
    ours = resnet_cifar.InstanceNorm(shape[1])
    torchs = torch.nn.InstanceNorm2d(shape[1], affine=True, track_running_stats=False)
    with torch.no_grad():
        for m in (ours, torchs):
            m.weight.copy_(torch.linspace(0.5, 1.5, shape[1]))
            m.bias.copy_(torch.linspace(-1, 1, shape[1]))
    grads = []
    for m in (ours, torchs):
        y = m(x)
        (y * torch.arange(y.numel()).view_as(y).sin()).sum().backward()
        grads.append((y.detach(), x.grad.clone(), m.weight.grad, m.bias.grad))
        x.grad = None
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_instance_norm_refuses_a_one_pixel_map_as_torch_does():
    x = torch.randn(2, 8, 1, 1)
    with pytest.raises(ValueError, match="1×1"):
        resnet_cifar.InstanceNorm(8)(x)
    with pytest.raises(ValueError):
        torch.nn.InstanceNorm2d(8, affine=True)(x)


def test_fedpces_network_takes_the_fast_instance_norm_everywhere():
    model = build_model({"backbone": "resnet18_in_mini"}, 10, 0, None, "cpu")
    norms = [m for m in model.modules() if isinstance(m, torch.nn.InstanceNorm2d)]
    assert len(norms) == 12 and all(  # stem, 4 blocks × 2, 3 shortcuts
        type(m) is resnet_cifar.InstanceNorm for m in norms
    )
