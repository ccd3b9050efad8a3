"""Where a job's random draws happen and how its arithmetic reproduces on a GPU.

A job's generators live on its device (``fedrepro.fl.sampling.seeded_generator``): every draw
names ``device=on(generator, ...)``, so a CUDA step neither copies its draws from the host
nor hands a CUDA kernel a CPU generator (which CUDA refuses: "Expected a 'cuda' device type
for generator"). A draw the host must read to decide what to run (the order of FedPCE's
colour-jitter operations) comes from the generator's host companion instead, which on the
CPU is the generator itself, so CPU runs draw exactly the numbers they always drew.

Where a sync-free computation costs more than one that reads back (FedICON's colour jitter
on the whole batch, kept where drawn, against the jitter of the images drawn for it), the
second runs where reading back is free, on the CPU (``reads_are_free``), and both give the
same numbers (tested); ``gpu_paths`` makes the CPU take the GPU's paths, so that the CPU-side
checks (``fedrepro.discipline``) see what a GPU step runs.

``set_deterministic`` is the one place the run's ``train.deterministic`` reaches torch:
``CUBLAS_WORKSPACE_CONFIG`` (read by cuBLAS when it first starts, so set before any CUDA
work, fork server included), ``torch.use_deterministic_algorithms`` and cuDNN's
deterministic and benchmark switches.
"""

from __future__ import annotations

import os
import weakref
from contextlib import contextmanager

import torch

# cuBLAS reproduces its reductions only with a fixed workspace (CUDA's "Results
# reproducibility" note; PyTorch's reproducibility page names the same two values)
CUBLAS_WORKSPACE = ":4096:8"

_HOSTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_COMPANIONS: weakref.WeakSet = weakref.WeakSet()  # the host companions made
_GPU_PATHS = [False]


def reads_are_free(x: torch.Tensor) -> bool:
    """Whether the host may read ``x``'s values for nothing: ``x`` is on the CPU and no
    check asked for the GPU's paths (``gpu_paths``)."""
    return x.device.type == "cpu" and not _GPU_PATHS[-1]


@contextmanager
def gpu_paths():
    """Inside the block the CPU takes the paths a GPU takes (``reads_are_free`` is False)."""
    _GPU_PATHS.append(True)
    try:
        yield
    finally:
        _GPU_PATHS.pop()


def on(generator: torch.Generator | None, fallback: torch.device | str) -> torch.device:
    """The device a draw from ``generator`` happens on: the generator's own, or, for the
    global generator (``None``), ``fallback`` (the device of the tensors the draw is for)."""
    return torch.device(fallback) if generator is None else generator.device


def host_generator(generator: torch.Generator | None) -> torch.Generator | None:
    """The generator the host draws from for a decision it must read (an order, a count):
    ``generator`` itself on the CPU; for a device generator (or on the GPU's paths,
    ``gpu_paths``) a CPU generator seeded from it, once, and kept as long as it lives."""
    if generator is None or (generator.device.type == "cpu" and not _GPU_PATHS[-1]):
        return generator
    host = _HOSTS.get(generator)
    if host is None:
        host = torch.Generator(device="cpu").manual_seed(generator.initial_seed())
        _HOSTS[generator] = host
        _COMPANIONS.add(host)
    return host


def is_host_companion(generator: torch.Generator) -> bool:
    """Whether ``generator`` is a host companion (its draws stay on the host, by design)."""
    return generator in _COMPANIONS


def set_deterministic(enabled: bool) -> None:
    """Deterministic GPU arithmetic on (``train.deterministic``, the default) or off. On it
    turns every op PyTorch lists without a deterministic CUDA kernel into an error
    (``torch.use_deterministic_algorithms``); the engine uses none (``fedrepro.discipline``
    keeps it so)."""
    if enabled:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    torch.use_deterministic_algorithms(bool(enabled))
    torch.backends.cudnn.deterministic = bool(enabled)
    torch.backends.cudnn.benchmark = False
