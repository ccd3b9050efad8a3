"""What the machine is and what it can do: its name, dense matmul FLOP/s, process memory."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import torch


def describe(device: torch.device) -> dict:
    """Processor, cores, torch threads and version; the GPU's name when running on one."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines()
                 if ln.startswith("model name")]  # fmt: skip
        cpu = names[0] if names else cpu
    out = {
        "cpu": cpu,
        "logical_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "device": device.type,
    }
    if device.type == "cuda":
        out["gpu"] = torch.cuda.get_device_name(device)
    return out


def matmul_flops(device: torch.device, dtype: torch.dtype, n: int, seconds: float = 1.0) -> float:
    """The best dense n×n matmul rate (FLOP/s, 2n³ per product) over about ``seconds``."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    torch.mm(a, b)  # warm-up: thread pools, kernels
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    best, spent = 0.0, 0.0
    while spent < seconds:
        sync()
        t0 = time.perf_counter()
        torch.mm(a, b)
        sync()
        dt = time.perf_counter() - t0
        spent += dt
        best = max(best, 2.0 * n**3 / dt)
    return best
