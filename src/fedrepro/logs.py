"""A job's log file: where a Snakemake ``script:`` job's output and traceback go."""

from __future__ import annotations

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
