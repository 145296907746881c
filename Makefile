# airflow-gang developer entry points. Everything runs inside ./.venv, created on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# Extras to install: `dev` for tests and linters; CI adds `train` (torch, scikit-learn) for the
# real DDP example. EXTRAS=dev,train make test runs the training test too.
EXTRAS ?= dev
comma := ,
INSTALLED := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))
export AIRFLOW_HOME ?= $(CURDIR)/.airflow

.PHONY: install services test test-fast test-slow lint docs dist demo demo-train airflow bench screenshots clean

# setuptools >= 77 reads the PEP 639 license strings of our pyproject files; a venv's bundled one
# (65 on Python 3.11) cannot, and the wheel test builds without isolation.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip "setuptools>=77"

# The provider, and the repository's two other distributions: the embedded cluster (sim/) and
# the real-Airflow harness (stack/). `pip install airflow-gang` brings neither.
$(INSTALLED): pyproject.toml sim/pyproject.toml stack/pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]' -e ./sim -e ./stack
	touch $@

install: $(INSTALLED)

# System services the tests start but PyPI cannot bring: Debian's redis-server, the broker of the
# CeleryExecutor tests (installed with apt-get when run as root; otherwise it says what to install).
services:
	@bash scripts/install_services.sh

lint: $(INSTALLED)
	$(BIN)/ruff check airflow_gang sim stack tests dags examples $(wildcard benchmarks scripts)
	$(BIN)/mypy airflow_gang sim/gang_sim stack/gang_stack
	$(BIN)/lint-imports

# The documentation site (mkdocs-material + mkdocstrings) into site/; --strict: a broken link or
# reference, or any other warning, fails the build. Open site/index.html, or `$(BIN)/mkdocs serve`.
docs: $(INSTALLED)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Wheels and sdists of the three distributions (the provider, sim/, stack/) into dist/, checked
# with `twine check`.
dist: $(INSTALLED)
	$(BIN)/python scripts/build_dist.py

# Everything CI runs: lint, then every test but the `slow` ones, in two lanes (pytest-xdist, -n 2):
# the tests that wait on real Airflow processes beside all the others (tests/conftest.py).
test: lint services
	$(BIN)/pytest -m "not slow" -n 2

# The long ones left out of `make test` for CI's time budget: each has a faster twin there.
test-slow: $(INSTALLED) services
	$(BIN)/pytest -m slow

# Pure and provider-level tests (the `fast` tier, about two minutes on 2 cores) while developing;
# `make test` is what CI runs.
test-fast: $(INSTALLED)
	$(BIN)/pytest -m fast

# The seed scenario on the embedded cluster: six gang-scheduled PyTorchJobs, one timeline.
# ARGS="--kind trainjob" runs it with Kubeflow Trainer v2 TrainJobs; ARGS="--gang-scheduling disabled"
# shows the deadlock.
demo: $(INSTALLED)
	$(BIN)/python scripts/demo.py $(ARGS)

# retrain_daily with real 2-replica PyTorch DDP training on the simulator's process runtime.
demo-train: | $(BIN)/python
	$(MAKE) install EXTRAS=dev,train
	$(BIN)/python scripts/demo.py --train

# A full local Airflow (api-server, scheduler, dag-processor, triggerer) serving dags/ on the
# embedded cluster, until Ctrl-C; its home is .airflow-local/. ARGS="--port 8081" passes options.
airflow: $(INSTALLED)
	$(BIN)/airflow-gang airflow --home .airflow-local --dags dags $(ARGS)

# The Gang jobs page's screenshots in docs/screenshots, taken by the browser tests (headless
# Chromium) on the embedded cluster: the jobs page and a job's page, light and dark, with jobs in
# every phase (test_browser.py); the jobs after cleanup, a job's page after its admission timeout
# and a job stuck without gang scheduling (test_history.py, run whole: the stuck job is made by
# the test before the one that shows it). tests/docs/test_screenshots.py checks the list.
screenshots: $(INSTALLED)
	GANG_SCREENSHOTS_DIR=docs/screenshots $(BIN)/pytest tests/plugins/test_browser.py -k screenshots -q
	GANG_SCREENSHOTS_DIR=docs/screenshots $(BIN)/pytest tests/plugins/test_history.py -q

BENCHMARKS := $(wildcard benchmarks/bench_*.py)

bench: $(INSTALLED)
	@test -n "$(BENCHMARKS)" || { echo "no benchmarks/bench_*.py yet"; exit 0; }
	@for script in $(BENCHMARKS); do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) site dist .airflow .airflow-local .demo .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info sim/*.egg-info stack/*.egg-info
