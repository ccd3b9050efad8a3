"""The paper scale's GPU findings, each checked on the CPU (``fedrepro.discipline``): draws on
their generator's device, nothing read back or built from Python values inside a step, no op
without a deterministic CUDA kernel, memory bounded where a split was copied in float, and a
GPU job that finds no GPU refused in one line. Each test fails on the code before the fix."""

from __future__ import annotations

import os

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from fedrepro.algorithms import make_algorithm
from fedrepro.algorithms.fedicon import OnlineICONPredictor
from fedrepro.data.transforms.clients import apply_transform
from fedrepro.data.transforms.styles import stylize_split
from fedrepro.device import CUBLAS_WORKSPACE, gpu_paths, set_deterministic
from fedrepro.discipline import DisciplineClock, watched
from fedrepro.fl.build import pick_device
from fedrepro.fl.data import DeviceData
from fedrepro.fl.engine import run_rounds
from fedrepro.fl.evaluation import class_accuracy
from fedrepro.fl.tensors import all_finite
from fedrepro.models.cnn import FedIconCNN
from tests.algorithms.test_fedicon import TinyEncoder
from tests.fl_helpers import TinyNet, problem, train_cfg

JITTER = {"p": 0.8, "brightness": 0.4, "contrast": 0.4, "saturation": 0.4, "hue": 0.1}
VIEWS = {"crop": {"scale": [0.2, 1.0]}, "flip": 0.5, "grayscale": 0.2, "jitter": JITTER}


def test_fedicon_online_draws_its_memory_on_its_generators_device():
    """The crash: a CPU generator drawing straight onto the GPU (meta stands in for it)."""
    images = torch.zeros(8, 6, 6, 3, dtype=torch.uint8, device="meta")
    data = DeviceData(images, torch.zeros(8, dtype=torch.long, device="meta"), views=VIEWS)
    alg = make_algorithm({"name": "fedicon_test", "online": True, "memory": 4})
    alg.configure([8], {"lr": 0.1, "rounds": 1}, data, [torch.arange(8, device="meta")])
    model = TinyEncoder().to("meta")
    with watched() as m:
        alg.predictor(model, 0, torch.Generator().manual_seed(0))
    assert not m.mismatched


def test_fedicon_online_predictor_reads_nothing_back_per_sample():
    torch.manual_seed(0)
    model = FedIconCNN(num_classes=3, in_chans=3, img_size=16)
    gen = torch.Generator().manual_seed(0)
    pred = OnlineICONPredictor(model, torch.randn(4, 3, 16, 16), lambda v, g: v.flip(3), gen,
                               0.1, 1, 0.05, 0.9, 0.0)  # fmt: skip
    with torch.no_grad(), watched() as m:
        pred(torch.randn(5, 3, 16, 16))
    assert m.sync_count == 0, m.syncs


def test_a_training_batch_builds_nothing_from_python_values_and_moves_no_draw():
    data, _ = problem(num_clients=1, per_client=16)
    erase = {"p": 0.5, "scale": [0.02, 0.33]}
    aug = DeviceData(data.images, data.labels, img_size=8, crop_pad=2, flip=True, rotate=15,
                     rotate_p=0.5, erase=erase, views=VIEWS)  # fmt: skip
    gen, idx = torch.Generator().manual_seed(0), torch.arange(16)
    aug.batch(idx, gen, train=True)  # the normalisation's constants are made once
    noise = {"kind": "fedpce_noise", "var": 0.01}
    with watched() as m:
        aug.batch(idx, gen, lambda x, g: apply_transform(x, noise, g), train=True)
        aug.views_batch(idx, gen, None, 2)
        aug.view_of(aug.batch(idx)[0], gen)
    assert m.sync_count == 0 and m.moved == 0 and not m.mismatched, (m.syncs, m.moved)


def test_a_round_waits_for_nothing_in_a_step_and_once_per_client_in_an_upload_or_evaluation():
    data, clients = problem(num_clients=3, per_client=16)
    clock = DisciplineClock()
    torch.manual_seed(0)
    with gpu_paths():  # the optimiser a GPU run makes (fused: its step count on the device)
        run_rounds(train_cfg(rounds=1, optimizer="adam"), TinyNet(),
                   make_algorithm({"name": "fedavg"}), data, data, clients,
                   log=lambda _: None, clock=clock)  # fmt: skip
    assert clock.entries["step"] > 0
    assert clock.per_entry("step") == clock.per_entry("data") == 0, clock.report()
    assert clock.per_entry("upload") <= 1
    # the union of the test sets, the sums, the per-class hits, and the class count once a job:
    # four reads an evaluation, whatever the number of clients
    assert sum(clock.syncs["evaluate"].values()) <= 4, clock.report()
    assert sum(clock.syncs["aggregate"].values()) <= len(clients) + 1, clock.report()
    assert not clock.nondeterministic and not clock.mismatched and not clock.moved


def test_class_accuracy_sums_by_index_without_a_weighted_bincount():
    labels = torch.tensor([0, 1, 1, 2, 2, 2])
    correct = [torch.tensor([True, False, True]), torch.tensor([True, True, False])]
    idx = [torch.tensor([0, 1, 2]), torch.tensor([3, 4, 5])]
    with watched() as m:
        acc = class_accuracy(correct, idx, labels, 3)
    assert not m.nondeterministic
    assert acc == pytest.approx({"0": 100.0, "1": 50.0, "2": 200 / 3})


def test_the_head_splits_pooling_has_a_deterministic_backward_with_the_same_bits():
    from fedrepro.models.head_split import BinMean  # noqa: PLC0415 (the fix's own name)

    for length, size in [(2048, 512), (768, 512), (384, 512)]:
        x = torch.randn(3, length, requires_grad=True)
        weight = torch.randn(3, size)
        (nn.AdaptiveAvgPool1d(size)(x) * weight).sum().backward()
        want, x.grad = x.grad.clone(), None
        with watched() as m:  # a fresh one: its bins made on the device, nothing read
            (BinMean(size)(x) * weight).sum().backward()
        assert not m.nondeterministic and m.sync_count == 0
        assert torch.equal(x.grad, want)


def test_a_payload_is_checked_for_finite_values_in_one_read():
    tensors = {f"w{i}": torch.ones(3) for i in range(5)}
    with watched() as m:
        assert all_finite(tensors)
    assert m.sync_count == 1
    assert not all_finite({**tensors, "bad": torch.tensor([float("nan")])})


class _LargestFloat(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.most = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor) and out.is_floating_point():
            self.most = max(self.most, out.numel())
        return out


def test_stylizing_a_split_holds_one_chunk_in_float_not_the_split():
    images = torch.randint(0, 256, (40, 4, 4, 3), dtype=torch.uint8)
    part = {"clients": [{"train": list(range(0, 40, 2)), "style": [1, 2] * 10}]}
    whole = stylize_split(images, part, chunk=1000)
    with _LargestFloat() as mode:
        chunked = stylize_split(images, part, chunk=4)
    assert torch.equal(chunked, whole)
    assert mode.most <= 4 * 4 * 4 * 3  # one chunk of 4 images
    assert torch.equal(chunked[1::2], images[1::2])  # unstyled images as they were


def test_a_gpu_job_without_a_gpu_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(RuntimeError, match="CUDA_VISIBLE_DEVICES") as err:
        pick_device("cuda")
    assert "\n" not in str(err.value) and "gpu resource" in str(err.value)
    assert pick_device("auto").type == "cpu"


def test_a_gpu_job_sets_the_cublas_workspace_and_torchs_deterministic_switches(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    try:
        assert pick_device("cuda").type == "cuda"  # names the device; CUDA starts later
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == CUBLAS_WORKSPACE
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    finally:
        set_deterministic(False)
    assert not torch.are_deterministic_algorithms_enabled()


def test_an_average_upload_waits_for_nothing_and_sums_the_kept_logits_bit_for_bit():
    from fedrepro.fl.logits import correct, upload_average

    gen = torch.Generator().manual_seed(0)
    logits, labels = torch.randn(64, 5, generator=gen), torch.randint(0, 5, (64,), generator=gen)
    with watched() as m:
        means, counts = upload_average(logits, labels, 5)
    assert m.sync_count == 0, m.syncs
    keep = correct(logits, labels)
    kept, kept_labels = logits[keep], labels[keep]
    sums = torch.zeros(5, 5).index_add_(0, kept_labels, kept)
    want = torch.bincount(kept_labels, minlength=5).float()
    assert torch.equal(counts, want) and torch.equal(means, sums / want.clamp(min=1)[:, None])
