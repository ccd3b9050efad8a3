"""A job's log: where a Snakemake ``script:`` job's output and traceback go, and the lines
a training or adaptation job writes as it works: time-stamped lines (``job_log``), the pace
and time left of a job's work (``Pace``, ``duration``, ``rate``) and the progress lines of a
long step (``Progress``)."""

from __future__ import annotations

import logging
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path


@contextmanager
def log_to(path: str | Path) -> Iterator[None]:
    """Send stdout and stderr (and the traceback of a failure) to ``path``."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh, redirect_stdout(fh), redirect_stderr(fh):
        try:
            yield
        except BaseException:
            traceback.print_exc(file=fh)
            raise


def job_log(message: str) -> None:
    """One line of a job's log (its rounds, its members), time-stamped on standard error and
    written at once, so ``tail -f`` shows it and a kill keeps it (``print`` into a file is
    block-buffered: a job showed nothing for many rounds)."""
    logger = logging.getLogger("fedrepro.job")
    if not logger.handlers:  # set up in the job's own process (a fork server's job too)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    logger.info(message)


def duration(seconds: float) -> str:
    """``1h02m``, ``3m05s`` or ``12s``: a remaining time at a glance."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def rate(per_second: float, unit: str) -> str:
    """``2.4 MB/s`` for bytes (decimal prefixes), ``37.5 images/s`` or ``1,250 rounds/s`` for
    anything else: three significant digits, never an exponent."""
    if unit == "bytes":
        for prefix in ("", "k", "M"):
            if per_second < 999.5:
                return f"{per_second:.3g} {prefix}B/s"
            per_second /= 1000
        return f"{per_second:,.3g} GB/s" if per_second < 999.5 else f"{per_second:,.0f} GB/s"
    return f"{per_second:.3g} {unit}/s" if per_second < 999.5 else f"{per_second:,.0f} {unit}/s"


class Pace:
    """The time left of a job's ``total`` units of work (rounds over all its runs, epochs,
    bytes) from its pace since ``start`` (default: now): the seconds so far per unit done,
    times the units left. Work found already done (a kept run, a run's resumed rounds) is
    ``skip``ped: off the total, not counted as done, so it does not make the pace look fast."""

    def __init__(self, total: float, start: float | None = None) -> None:
        self.total, self.done = total, 0.0
        self.start = time.monotonic() if start is None else start

    def skip(self, n: float) -> None:
        self.total -= n

    def add(self, n: float = 1) -> None:
        self.done += n

    def left(self) -> float:
        """Units of work still to do (0 where the total is unknown)."""
        return max(self.total - self.done, 0.0)

    def per_second(self, now: float | None = None) -> float:
        elapsed = (time.monotonic() if now is None else now) - self.start
        return self.done / max(elapsed, 1e-6)  # a clock that has not moved yet: fast

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left at the pace so far; None before any unit is done or without a total."""
        if not self.done or self.total <= 0:
            return None
        elapsed = (time.monotonic() if now is None else now) - self.start
        return elapsed / self.done * self.left()

    def text(self, unit: str, now: float | None = None) -> str:
        """``<rate>, eta <time>`` (the eta left out where it is unknown)."""
        now = time.monotonic() if now is None else now
        eta = self.eta(now)
        shown = rate(self.per_second(now), unit)
        return shown if eta is None else f"{shown}, eta {duration(eta)}"


class Progress:
    """Progress lines of a long step through ``job_log``: ``<what>: <done> of <total> <unit>
    (<pct> %), <rate>, eta <time>`` at each tenth of the total or after ``every`` seconds
    without a line, whichever comes first (a total of 0: unknown, by time only, with the rate
    and no eta, and a last line on ``finish``). Downloads count bytes, preparation images."""

    def __init__(self, what: str, total: int, unit: str, every: float = 30.0) -> None:
        self.what, self.total, self.unit, self.every = what, total, unit, every
        self.done, self.tenth = 0, 0
        self.last = time.monotonic()
        self.pace = Pace(total, self.last)

    def add(self, n: int) -> None:
        self.done += n
        self.pace.add(n)
        now = time.monotonic()
        tenth = 10 * self.done // self.total if self.total else 0
        if tenth > self.tenth or now - self.last >= self.every:
            self.tenth = max(self.tenth, tenth)
            self._line(now)

    def finish(self) -> None:
        """A last line where the total was unknown (a known total ends on its 100 % line)."""
        if not self.total:
            self._line(time.monotonic())

    def _line(self, now: float) -> None:
        self.last = now
        pace = self.pace.text(self.unit, now)
        if self.total:
            pct = 100 * self.done // self.total
            job_log(f"{self.what}: {self.done:,} of {self.total:,} {self.unit} ({pct} %), {pace}")
        else:
            job_log(f"{self.what}: {self.done:,} {self.unit}, {pace}")
