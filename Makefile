# Set-up is a stamp file: `make setup` reinstalls only when pyproject.toml or constraints.txt change.
# Every pip command goes through constraints.txt (torch pinned to the CPU wheel 2.13.0).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PIP := $(BIN)/python -m pip
export PIP_CONSTRAINT := $(CURDIR)/constraints.txt
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# packages whose declared dependencies are broken or huge: installed alone, their modules read selectively
NO_DEPS_PACKAGES := pytorch-holo==0.0.5

.PHONY: setup demo test perf lint format clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet -c constraints.txt -e '.[dev,all]'
	$(PIP) install --quiet -c constraints.txt --no-deps $(NO_DEPS_PACKAGES)
	@touch $(STAMP)

demo: setup
	$(BIN)/bench demo -j 2

lint: setup
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

test: lint
	$(BIN)/python -m pytest

perf: setup
	$(BIN)/python -m pytest tests/perf --benchmark-enable --benchmark-only

format: setup
	$(BIN)/ruff format src tests
	$(BIN)/ruff check --fix src tests

clean:
	rm -rf $(VENV) .iclrbench leaderboard.html .pytest_cache .ruff_cache .benchmarks
