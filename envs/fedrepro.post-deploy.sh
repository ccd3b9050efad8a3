#!/usr/bin/env bash
# Run by Snakemake inside the new env (`--sdm conda`): install the fedrepro package itself,
# not editable, from the repository this file sits in (its pinned dependencies are already
# in fedrepro.yaml).
set -euo pipefail
python -m pip install --no-deps "$(cd "$(dirname "$0")/.." && pwd)"
