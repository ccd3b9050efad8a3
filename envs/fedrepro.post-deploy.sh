#!/usr/bin/env bash
# Run by Snakemake in the new env (`--software-deployment-method conda`): installs the fedrepro
# package itself, editable, so that every job imports the library as the repository holds it
# when the job runs. Snakemake keys an env on fedrepro.yaml and this script, never on src/: a
# plain install would go on running the library of the day the env was built. Snakemake runs
# a copy of this file kept beside the env (under its conda prefix), from its working
# directory, the repository; the dependencies, pinned, are in the env already (fedrepro.yaml),
# the build backend (setuptools) among them, so nothing is fetched here.
# An env points at the checkout that built it: give each checkout its own conda prefix (the
# default, .snakemake/conda, is inside the checkout).
set -euo pipefail
if [[ ! -f envs/fedrepro.post-deploy.sh || ! -f pyproject.toml ]]; then
  echo "fedrepro.post-deploy.sh: run it from the repository (Snakemake's working directory), not $PWD" >&2
  exit 1
fi
python -m pip install --no-deps --no-build-isolation -e "$PWD"
