"""Snakemake `script:` entry: one paper figure (png, pdf) from its item manifest."""

from pathlib import Path

from fedrepro.report.figures import make_figure

sm = snakemake  # noqa: F821 (injected by Snakemake)
out = str(Path(sm.output.png).with_suffix(""))
make_figure(sm.params.manifest, sm.params.runs, sm.params.partitions, out)
