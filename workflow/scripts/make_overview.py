"""Snakemake `script:` entry: the report's first page (how each paper reproduces)."""

from pathlib import Path

from fedrepro.logs import log_to
from fedrepro.report.overview import make_overview

sm = snakemake  # noqa: F821 (injected by Snakemake)
with log_to(sm.log[0]):
    out = Path(sm.output.csv).with_suffix("")
    for path in make_overview(sm.params.spec, sm.input.contents, sm.input.cost, out):
        print(path)
