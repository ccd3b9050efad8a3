"""The CPU-side checks of the GPU discipline (``fedrepro.discipline``): each kind of finding is
seen, and what CUDA runs deterministically or without a wait is not flagged."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fedrepro.device import gpu_paths, host_generator, on, reads_are_free
from fedrepro.discipline import DisciplineClock, watched


def test_ops_without_a_deterministic_cuda_kernel_are_flagged_and_deterministic_ones_are_not():
    x = torch.randn(4, 8, requires_grad=True)
    with watched() as m:
        nn.AdaptiveAvgPool1d(3)(x[:, None]).sum().backward()
        torch.bincount(torch.arange(3), weights=torch.ones(3))
        up = torch.randn(1, 1, 4, 4, requires_grad=True)
        F.interpolate(up, size=8, mode="bilinear").sum().backward()
    assert set(m.nondeterministic) == {
        "_adaptive_avg_pool2d_backward", "bincount", "upsample_bilinear2d_backward"
    }  # fmt: skip
    w = torch.randn(2, 3, requires_grad=True)
    conv = nn.Conv2d(3, 2, 3)
    with watched() as m:
        w.gather(1, torch.zeros(2, 1, dtype=torch.long)).sum().backward()
        torch.zeros(3).index_add_(0, torch.arange(3), torch.ones(3))
        torch.bincount(torch.arange(3), minlength=4)
        conv(torch.randn(1, 3, 5, 5)).sum().backward()
        nn.AdaptiveAvgPool2d(1)(torch.randn(1, 2, 3, 3, requires_grad=True)).sum().backward()
        F.cross_entropy(torch.randn(4, 3, requires_grad=True), torch.arange(4) % 3).backward()
    assert not m.nondeterministic


def test_host_reads_tensors_from_python_and_value_shaped_ops_count_as_synchronisations():
    x = torch.randn(6)
    with watched() as m:
        float(x.sum())
        bool(x[0] > 0)
        x.tolist()
        torch.tensor([1.0, 2.0])
        x[x > 0]
        x.nonzero()
    assert m.syncs == {"_local_scalar_dense": 2, "tolist": 1, "lift_fresh": 1,
                       "index (boolean mask)": 1, "nonzero": 1}  # fmt: skip
    with watched() as m:
        (x * 2).sum()
        torch.where(x > 0, x, 0.0)
        x[torch.arange(3)]
    assert m.sync_count == 0


def test_a_draw_off_its_generators_device_and_a_moved_draw_are_seen():
    gen = torch.Generator().manual_seed(0)
    with watched() as m:
        torch.randperm(4, generator=gen, device="meta")  # meta stands in for a GPU
    assert m.mismatched == {"randperm": 1}
    with watched() as m:
        mask = (torch.rand(4, generator=gen) < 0.5).to("cpu")  # a host draw moved
        mask.to(torch.float32)  # a dtype is no move
        torch.ones(2).to("cpu")  # not a draw
    assert m.moved == 1 and not m.mismatched
    with watched() as m:
        mask = torch.rand(4, generator=gen, device=on(gen, "cpu")) < 0.5
        torch.where(mask, 1.0, 0.0)
    assert m.moved == 0 and not m.mismatched and m.sync_count == 0


def test_the_clock_counts_per_phase_and_a_phase_inside_another_counts_there():
    clock = DisciplineClock()
    x = torch.ones(3)
    for _ in range(2):
        with clock.phase("step"):
            x.sum()
        with clock.phase("upload"):
            float(x.sum())
            with clock.phase("step"):
                float(x.sum())
    assert clock.entries == {"step": 2, "upload": 2}
    assert clock.per_entry("step") == 0 and clock.per_entry("upload") == 2
    assert clock.report()["syncs"] == {"upload": {"_local_scalar_dense": 4}}


def test_the_host_companion_of_a_cpu_generator_is_itself_and_checks_take_the_gpu_paths():
    gen = torch.Generator().manual_seed(1)
    assert host_generator(gen) is gen and host_generator(None) is None
    x = torch.zeros(2)
    assert reads_are_free(x)
    with gpu_paths():
        assert not reads_are_free(x)
    with watched():
        assert not reads_are_free(x)
    assert reads_are_free(x)


def test_a_host_companions_draw_read_by_the_host_is_no_wait():
    gen = torch.Generator().manual_seed(2)
    with watched() as m:
        host = host_generator(gen)  # on the GPU's paths: a CPU companion
        torch.randperm(4, generator=host, device=on(host, "cpu")).tolist()
        torch.randperm(4, generator=gen, device=on(gen, "cpu")).tolist()  # the device's own
    assert host is not gen and m.syncs == {"tolist": 1}
