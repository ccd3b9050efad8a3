# The two set-up-and-go commands of the README. Each creates the environment first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: default test
default: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --cores all --report results/report.html --report-after-run

test: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -q

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)
