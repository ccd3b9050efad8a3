"""Snakemake `script:` entry: one paper table (md, tex, csv, html) from its item manifest."""

from pathlib import Path

from fedrepro.report.tables import make_table

sm = snakemake  # noqa: F821 (injected by Snakemake)
make_table(sm.params.manifest, sm.params.runs, str(Path(sm.output.md).with_suffix("")))
