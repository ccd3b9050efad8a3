"""Snakemake `script:` entry: one structure job (parameter or payload counts) as JSON."""

from fedrepro.logs import log_to
from fedrepro.structure import measure_structure

sm = snakemake  # noqa: F821 (injected by Snakemake)
with log_to(sm.log[0]):
    result = measure_structure(sm.params.spec, sm.output[0])
    print(f"{len(result['rows'])} rows -> {sm.output[0]}")
