"""Snakemake `script:` entry: the measured step times alone (`snakemake calibrate`)."""

from fedrepro.bench.gpu_check_page import write_steps
from fedrepro.logs import log_to

sm = snakemake  # noqa: F821 (injected by Snakemake)
with log_to(sm.log[0]):
    n = write_steps(sm.output[0], sm.input.steps, sm.params.jobs)
    print(f"calibration: {n} run families' steps timed: {sm.output[0]}")
