# The two set-up commands of the README: `make demo` (the main job on the embedded local stack)
# and `make test` (lint, types, every test with the coverage floor). Both install what they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint types unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gco local demo

lint: $(STAMP)
	$(BIN)/ruff check gco tests benchmarks lambdas stacks gpu_runner app.py
	$(BIN)/ruff format --check gco

types: $(STAMP)
	$(BIN)/mypy

test: lint types
	$(BIN)/python -m pytest --cov=gco --cov-report=term --cov-fail-under=90 -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python benchmarks/store_fencing.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage
