"""Snakemake `script:` entry: one item (table or figure) from its manifest, built by its
kind's registered builder."""

from importlib import import_module
from pathlib import Path

from fedrepro.experiments.items import ITEM_KINDS
from fedrepro.logs import log_to
from fedrepro.report.results import check_inputs

sm = snakemake  # noqa: F821 (injected by Snakemake)
with log_to(sm.log[0]):
    manifest = sm.params.manifest
    check_inputs([manifest], sm.input)
    module, function = ITEM_KINDS[manifest["kind"]].builder.split(":")
    out = Path(sm.output[0]).with_suffix("")
    for path in getattr(import_module(module), function)(manifest, out):
        print(path)
