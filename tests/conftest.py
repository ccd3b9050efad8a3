"""Every test under tests/workflow/ runs Snakemake or a job in a subprocess (and the fault
suite kills them): mark it ``slow`` so ``pytest -m "not slow"`` gives a quick run.

The two longest files run first (`make test` spreads files over one worker a core,
pytest-xdist's ``--dist loadfile``): the paper-shape smoke (about 16 minutes, both cores) and
the one-node Slurm tests (about 15, mostly waiting on the scheduler) start side by side and
the short files fill in behind them, instead of one of the two starting last."""

from __future__ import annotations

from pathlib import Path

import pytest

WORKFLOW = Path(__file__).parent / "workflow"
SLOW_DIRS = (WORKFLOW,)
LONGEST_FIRST = (WORKFLOW / "test_smoke.py", WORKFLOW / "test_slurm.py")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(item.path.is_relative_to(d) for d in SLOW_DIRS):
            item.add_marker(pytest.mark.slow)
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path, len(rank)))  # stable: the rest keep order


@pytest.fixture
def job_lines():
    """The messages ``fedrepro.logs.job_log`` writes while the test runs (round lines, run
    headers, progress), caught on its logger whatever module bound the function."""
    import logging

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            out.append(record.getMessage())

    out: list[str] = []
    logger = logging.getLogger("fedrepro.job")
    handler, level = Catch(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield out
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
