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

.PHONY: install test lint demo bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(INSTALLED): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $@

install: $(INSTALLED)

lint: $(INSTALLED)
	$(BIN)/ruff check airflow_gang tests dags examples $(wildcard benchmarks scripts)
	$(BIN)/mypy airflow_gang
	$(BIN)/lint-imports

test: lint
	$(BIN)/pytest

demo: $(INSTALLED)
	@echo "# The seed scenario: six PyTorchJobs (Master + 1 Worker, 1 GPU each), gang-scheduled by Volcano."
	@echo "# These are the PodGroup + PyTorchJob manifests the operator submits for each job."
	$(BIN)/airflow-gang render --name seed --count 6 --workers 1 --gpus 1 --cpu 2 --memory 8Gi

BENCHMARKS := $(wildcard benchmarks/bench_*.py)

bench: $(INSTALLED)
	@test -n "$(BENCHMARKS)" || { echo "no benchmarks/bench_*.py yet"; exit 0; }
	@for script in $(BENCHMARKS); do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) .airflow .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
