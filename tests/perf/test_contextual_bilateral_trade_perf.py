"""Speed of contextual-bilateral-trade's hot path, against the plain per-step numpy loop
(``../shared/peers/bilateral_trade_loop.py``), at d = 8, T = 100,000.

Figures come from ``make perf`` (pytest-benchmark); ``extra_info["runs_per_second"]`` is the comparable
number: the peer does one run per call, ours one run (alone) or 16 seeds as one batched computation.
Each of ours is a whole run: market drawn, game played, regret computed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from iclrbench.algorithms.contextual_bilateral_trade import (
    EllipsoidParams,
    EllipsoidPricing,
    ScoutingLeastSquares,
)
from iclrbench.core import catalog
from iclrbench.core.seeding import rng_for

PEER = Path(__file__).resolve().parents[3] / "shared" / "peers" / "bilateral_trade_loop.py"
D, HORIZON, SEEDS = 8, 100_000, 16


def load_peer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bilateral_trade_loop", PEER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def task():  # type: ignore[no-untyped-def]
    return catalog.get_task("contextual-bilateral-trade")


@pytest.mark.skipif(not PEER.exists(), reason=f"the peer script is not beside this checkout ({PEER})")
def test_peer_per_step_loop(benchmark) -> None:  # type: ignore[no-untyped-def]
    peer = load_peer()
    benchmark.group = "bilateral-trade d=8 T=1e5"
    result = benchmark.pedantic(peer.run, args=(D, HORIZON, 0), rounds=3, iterations=1)
    assert result[HORIZON] > 0
    benchmark.extra_info["runs_per_call"] = 1


def test_ours_one_run(benchmark, task) -> None:  # type: ignore[no-untyped-def]
    config = task.make_config("small", {"d": D, "horizon": HORIZON})

    def one() -> float:
        algo = EllipsoidPricing(EllipsoidParams(), config, rng_for(0, task.id, "ellipsoid-sbb"))
        return task.evaluate(algo, config, 0).metrics["regret"]

    benchmark.group = "bilateral-trade d=8 T=1e5"
    assert benchmark.pedantic(one, rounds=3, iterations=1) > 0
    benchmark.extra_info["runs_per_call"] = 1


def test_ours_batched_seeds(benchmark, task) -> None:  # type: ignore[no-untyped-def]
    config = task.make_config("small", {"d": D, "horizon": HORIZON})
    seeds = list(range(SEEDS))

    def batch() -> list[float]:
        algos = [
            EllipsoidPricing(EllipsoidParams(), config, rng_for(s, task.id, "ellipsoid-sbb")) for s in seeds
        ]
        return [o.metrics["regret"] for o in task.evaluate_many(algos, config, seeds)]

    benchmark.group = "bilateral-trade d=8 T=1e5"
    regrets = benchmark.pedantic(batch, rounds=3, iterations=1)
    assert len(regrets) == SEEDS and min(regrets) > 0
    benchmark.extra_info["runs_per_call"] = SEEDS


def test_scouting_noisy_run(benchmark, task) -> None:  # type: ignore[no-untyped-def]
    config = task.make_config("small", {"noise": 0.1})

    def one() -> float:
        algo = ScoutingLeastSquares(ScoutingLeastSquares.Params(), config, rng_for(0, task.id, "scouting-ls"))
        return task.evaluate(algo, config, 0).metrics["regret"]

    benchmark.group = "bilateral-trade noisy d=8 T=1e5"
    assert benchmark.pedantic(one, rounds=3, iterations=1) > 0
