"""Snakemake `script:` entry: a paper's claims table, on the paper's numbers and on ours."""

from pathlib import Path

from fedrepro.logs import log_to
from fedrepro.report.claims import make_claims
from fedrepro.report.results import check_inputs

sm = snakemake  # noqa: F821 (injected by Snakemake)
with log_to(sm.log[0]):
    spec = sm.params.spec
    check_inputs(sm.params.manifests.values(), sm.input)
    out = str(Path(sm.output.csv).with_suffix(""))
    title = f"Claims: {spec['paper']} ({spec['scale']} scale)"
    make_claims(spec["claims"], sm.params.manifests, spec["reported"], out, title)
