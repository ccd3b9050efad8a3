"""Every test under tests/workflow/ runs Snakemake or a job in a subprocess (and the fault
suite kills them): mark it ``slow`` so ``pytest -m "not slow"`` gives a quick run."""

from __future__ import annotations

from pathlib import Path

import pytest

SLOW_DIRS = (Path(__file__).parent / "workflow",)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(item.path.is_relative_to(d) for d in SLOW_DIRS):
            item.add_marker(pytest.mark.slow)


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
