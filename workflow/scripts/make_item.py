"""Snakemake `script:` entry: one item (table or figure) from its manifest, built by its
kind's registered builder."""

from importlib import import_module
from pathlib import Path

from fedrepro.experiments.items import ITEM_KINDS
from fedrepro.logs import log_to
from fedrepro.report.results import result_files

sm = snakemake  # noqa: F821 (injected by Snakemake)
with log_to(sm.log[0]):
    manifest = sm.params.manifest
    missing = sorted(set(result_files(manifest)) - set(sm.input))
    if missing:  # the report reads only what the rule lists as input
        raise RuntimeError(f"manifest names files the rule does not list: {missing}")
    module, function = ITEM_KINDS[manifest["kind"]].builder.split(":")
    out = Path(sm.output[0]).with_suffix("")
    for path in getattr(import_module(module), function)(manifest, out):
        print(path)
