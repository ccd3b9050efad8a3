"""Where a run's time goes: wall seconds per phase, for the benchmarks.

The engine times its phases through a clock. The default clock does nothing, so an
ordinary run pays no synchronisation; a ``PhaseClock`` waits for the device at each phase
edge so GPU work is charged to the phase that queued it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager, nullcontext

import torch

PHASES = ("step", "data", "upload", "aggregate", "evaluate", "checkpoint")


class NullClock:
    """Times nothing (the default)."""

    def phase(self, name: str):
        return nullcontext()

    def take(self) -> dict[str, float]:
        return {}


class PhaseClock(NullClock):
    """Accumulates wall seconds per phase name (`step` = forward + backward + optimizer), and
    keeps each entry's seconds, in order, of the phases named in ``keep``."""

    def __init__(self, device: torch.device | str = "cpu", keep: tuple[str, ...] = ()):
        self.cuda = torch.device(device).type == "cuda"
        self.seconds: dict[str, float] = defaultdict(float)
        self.each: dict[str, list[float]] = {name: [] for name in keep}

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    @contextmanager
    def phase(self, name: str):
        self._sync()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._sync()
            seconds = time.perf_counter() - t0
            self.seconds[name] += seconds
            if name in self.each:
                self.each[name].append(seconds)

    def take(self) -> dict[str, float]:
        """The seconds so far, then start again from zero."""
        out = dict(self.seconds)
        self.seconds.clear()
        return out


NULL_CLOCK = NullClock()
