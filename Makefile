# The two set-up-and-go commands of the README. Each creates the environment first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: default test
default: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --cores all --report results/report.html --report-after-run

# Lint and format checks first (each fails the target), then the test suite. Snakemake 9
# `--lint` exits 1 when it prints any lint, so lints fail the target too.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check Snakefile workflow/
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --lint
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -q

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)
