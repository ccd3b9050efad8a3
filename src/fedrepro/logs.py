"""A job's log: where a Snakemake ``script:`` job's output and traceback go, and the lines
a training or adaptation job writes as it works."""

from __future__ import annotations

import logging
import sys
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
