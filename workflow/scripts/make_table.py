"""Snakemake `script:` entry: one paper table (md, tex, csv, html) from its item manifest."""

from pathlib import Path

from fedrepro.report.parameters import make_parameter_table
from fedrepro.report.payload import make_payload_table
from fedrepro.report.tables import make_table

sm = snakemake  # noqa: F821 (injected by Snakemake)
out = str(Path(sm.output.md).with_suffix(""))
kind = sm.params.manifest["kind"]
if kind == "payload":
    make_payload_table(sm.params.manifest, out)
elif kind == "parameters":
    make_parameter_table(sm.params.manifest, out)
else:
    make_table(sm.params.manifest, sm.params.runs, out)
