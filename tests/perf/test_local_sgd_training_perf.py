"""One EDiT sync round across 2 gloo workers (10 local steps, then the layer-wise sync) against synchronous
data parallel over the same 10 steps (an all-reduce every step), side by side: each benchmark is the whole
run (processes started, rendezvous, training, sync); ``extra_info`` holds the bytes each worker sent and
the wall milliseconds of EDiT's sync forward pass."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from iclrbench.algorithms.local_sgd_training import EDiT
from iclrbench.baselines.local_sgd_training import SynchronousDDP
from iclrbench.benchmarks.local_sgd_training import LocalSGDTask, launch
from iclrbench.core import config as cfg

pytestmark = pytest.mark.long  # process start-up dominates: ~10 s
CONFIG = LocalSGDTask().make_config("small", {"steps": 11.25, "warmup_steps": 0, "step_jitter": 0.0})
FIGURES: dict[str, float] = {}


def _run(cls: type) -> dict:
    algorithm = cls(cfg.build(cls.Params, {}), CONFIG, np.random.default_rng(0))
    return launch(CONFIG, 0, dataclasses.asdict(algorithm.sync_spec()))


def test_one_edit_sync_round(benchmark) -> None:  # type: ignore[no-untyped-def]
    result = benchmark.pedantic(lambda: _run(EDiT), rounds=1, iterations=1)
    assert result["syncs"] == 1
    FIGURES["edit_bytes"] = result["bytes"]
    benchmark.extra_info["bytes per worker"] = result["bytes"]
    benchmark.extra_info["sync wall ms"] = round(result["sync_wall_ms"], 2)


def test_ten_ddp_steps(benchmark) -> None:  # type: ignore[no-untyped-def]
    result = benchmark.pedantic(lambda: _run(SynchronousDDP), rounds=1, iterations=1)
    assert result["steps"] == [10, 10]
    benchmark.extra_info["bytes per worker"] = result["bytes"]
    if "edit_bytes" in FIGURES:
        benchmark.extra_info["ddp / edit bytes"] = round(result["bytes"] / FIGURES["edit_bytes"], 3)
        assert result["bytes"] >= 10 * FIGURES["edit_bytes"]
