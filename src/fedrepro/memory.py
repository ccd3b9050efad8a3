"""Process memory, now and at its peak: every job records it, the benchmark reports it."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import torch


def current_rss_mb() -> float:
    """Resident memory of this process now (MB = 10⁶ bytes); NaN where /proc is missing."""
    statm = Path("/proc/self/statm")
    if not statm.exists():
        return float("nan")
    pages = int(statm.read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def peak_rss_mb() -> float:
    """The most resident memory this process has held (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


def peak_gpu_mb(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 1e6 if device.type == "cuda" else None
