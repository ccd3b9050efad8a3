"""A job's log: where a Snakemake ``script:`` job's output and traceback go, and the lines
a training or adaptation job writes as it works."""

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


class Progress:
    """Progress lines of a long step through ``job_log``: ``<what>: <done> of <total> <unit>
    (<pct> %)`` at each tenth of the total or after ``every`` seconds without a line,
    whichever comes first (a total of 0: unknown, by time only, and a last line on
    ``finish``). Downloads count bytes, preparation images."""

    def __init__(self, what: str, total: int, unit: str, every: float = 30.0) -> None:
        self.what, self.total, self.unit, self.every = what, total, unit, every
        self.done, self.tenth = 0, 0
        self.last = time.monotonic()

    def add(self, n: int) -> None:
        self.done += n
        tenth = 10 * self.done // self.total if self.total else 0
        if tenth > self.tenth or time.monotonic() - self.last >= self.every:
            self.tenth = max(self.tenth, tenth)
            self._line()

    def finish(self) -> None:
        """A last line where the total was unknown (a known total ends on its 100 % line)."""
        if not self.total:
            self._line()

    def _line(self) -> None:
        self.last = time.monotonic()
        if self.total:
            pct = 100 * self.done // self.total
            job_log(f"{self.what}: {self.done:,} of {self.total:,} {self.unit} ({pct} %)")
        else:
            job_log(f"{self.what}: {self.done:,} {self.unit}")
