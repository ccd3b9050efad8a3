"""Snakemake `script:` entry: the linear-probe table of every pretrained tiny backbone."""

from pathlib import Path

from fedrepro.logs import log_to
from fedrepro.report.probe import make_probe_table

sm = snakemake  # noqa: F821 (injected by Snakemake)
with log_to(sm.log[0]):
    for path in make_probe_table(list(sm.input), Path(sm.output.md).with_suffix("")):
        print(path)
