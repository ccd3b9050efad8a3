# The two set-up-and-go commands of the README. Each creates the environment first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK := requirements.lock
LOCK_TOOLS := .lock-tools
CONDA_ENV := envs/fedrepro.yaml

.PHONY: default test lock
default: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --cores all --report results/report.html --report-after-run

# Lint and format checks first (each fails the target), then the test suite. Snakemake 9
# `--lint` exits 1 when it prints any lint, so lints fail the target too. The suite runs one
# pytest-xdist worker a core, a test file to a worker, in collection order (tests/conftest.py
# puts the two longest files first: the smoke and the one-node Slurm tests).
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check Snakefile workflow/
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --lint
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -q -n auto --dist loadfile --no-loadscope-reorder

# The environment is requirements.lock, every package pinned with its hashes (resolved for
# Linux x86_64 and Python 3.11); the project itself goes on top, editable, adding nothing and
# built by the locked setuptools (no build isolation: nothing unpinned is fetched for it).
$(STAMP): pyproject.toml $(LOCK)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --require-hashes -r $(LOCK)
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Re-resolve requirements.lock after a change to pyproject.toml's pins (pip-tools in a venv of
# its own, against PyPI alone: PIP_CONFIG_FILE=/dev/null drops a machine's extra indexes;
# packages pyproject does not name keep their locked versions unless a new pin rules them out),
# then write its pins as the conda env's pip list (everything after `  - pip:`).
lock:
	$(PY) -m venv $(LOCK_TOOLS)
	$(LOCK_TOOLS)/bin/pip install --quiet pip-tools==7.6.2
	PIP_CONFIG_FILE=/dev/null \
	CUSTOM_COMPILE_COMMAND="make lock  (resolved on Linux x86_64: for that platform only)" \
		$(LOCK_TOOLS)/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
		--extra dev --no-emit-index-url --no-emit-find-links --output-file $(LOCK) pyproject.toml
	sed -i '/^  - pip:$$/q' $(CONDA_ENV)
	grep -oE '^[A-Za-z0-9._-]+==[^ ]+' $(LOCK) | sed 's/^/      - /' >> $(CONDA_ENV)
