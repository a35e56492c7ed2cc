"""The reference algorithms and baselines: faithfulness invariants, determinism, known behaviour."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.algorithms.contextual_bilateral_trade import (
    EllipsoidParams,
    EllipsoidPricing,
    OneBitGlobalBudgetReduction,
    OneBitParams,
    PricingPolicy,
    ScoutingLeastSquares,
    ScoutingParams,
)
from iclrbench.baselines.contextual_bilateral_trade import (
    BestFixedPriceInHindsight,
    FixedPriceExploreThenCommit,
    RandomPrice,
)
from iclrbench.core import config as cfg
from iclrbench.core.config import NoParams
from iclrbench.envs.contextual_bilateral_trade import PRICE_GRID, BilateralMarket, BilateralTradeConfig


def setup(seed: int = 0, **overrides: object) -> tuple[BilateralTradeConfig, BilateralMarket]:
    config = cfg.build(BilateralTradeConfig, {"d": 4, "horizon": 3000, **overrides})
    return config, BilateralMarket(config, np.random.default_rng(seed))


def inside(theta: np.ndarray, centre: np.ndarray, shape: np.ndarray) -> float:
    diff = theta - centre
    return float(diff @ np.linalg.solve(shape, diff))


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**31), st.integers(2, 10))
def test_ellipsoids_always_contain_the_true_valuation_vectors(seed: int, d: int) -> None:
    config, m = setup(seed, d=d, horizon=2000)
    algo = EllipsoidPricing(EllipsoidParams(), config, np.random.default_rng(0))
    algo.play(m)
    bank = algo.sets
    assert bank.cuts.sum() > 0
    assert inside(m.phi, bank.centre[0, 0], bank.shape[0, 0]) <= 1 + 1e-6
    assert inside(m.psi, bank.centre[0, 1], bank.shape[0, 1]) <= 1 + 1e-6


def test_play_batched_and_step_by_step_post_identical_prices() -> None:
    config = cfg.build(BilateralTradeConfig, {"d": 5, "horizon": 4000})
    seeds = [0, 1, 2, 3, 4]
    alone = [BilateralMarket(config, np.random.default_rng(s)) for s in seeds]
    batch = [BilateralMarket(config, np.random.default_rng(s)) for s in seeds]
    steps = [BilateralMarket(config, np.random.default_rng(s)) for s in seeds[:2]]
    for m in alone:
        EllipsoidPricing(EllipsoidParams(), config, None).play(m)  # type: ignore[arg-type]
    EllipsoidPricing.play_batch([EllipsoidPricing(EllipsoidParams(), config, None) for _ in seeds], batch)  # type: ignore[arg-type]
    for m in steps:
        PricingPolicy.play(EllipsoidPricing(EllipsoidParams(), config, None), m)  # type: ignore[arg-type]
    for a, b in zip(alone, batch, strict=True):
        assert np.array_equal(a.p, b.p)
    for a, s in zip(alone, steps, strict=False):
        assert np.array_equal(a.p, s.p)


def test_ellipsoid_stops_cutting_and_earns_almost_all_gain() -> None:
    config, m = setup(1, d=3, horizon=20000)
    EllipsoidPricing(EllipsoidParams(), config, None).play(m)  # type: ignore[arg-type]
    out = m.outcome()
    assert out["regret"][-10000:].sum() < 0.01 * out["gft"][-10000:].sum()


def test_one_bit_reduction_never_runs_a_deficit_and_learns() -> None:
    config, m = setup(2, feedback="one-bit", budget_balance="global", horizon=20000)
    algo = OneBitGlobalBudgetReduction(OneBitParams(), config, np.random.default_rng(0))
    algo.play(m)
    out = m.outcome()
    assert np.cumsum(out["profit"]).min() >= -1e-12
    assert algo.probes > 0 and algo.margin_rounds > 0
    assert inside(m.phi, algo.sets.centre[0, 0], algo.sets.shape[0, 0]) <= 1 + 1e-6
    assert out["regret"][-5000:].mean() < out["regret"][:5000].mean()


def test_scouting_estimates_converge_to_the_true_midpoint() -> None:
    config, m = setup(3, noise=0.1, horizon=30000)
    ScoutingLeastSquares(ScoutingParams(), config, np.random.default_rng(0)).play(m)
    tail = slice(20000, 30000)
    midpoint = 0.5 * (m.mean_s[tail] + m.mean_b[tail])
    exploiting = m.p[tail]
    assert np.median(np.abs(exploiting - midpoint)) < 0.03


def test_fixed_price_learner_finds_a_near_best_fixed_price() -> None:
    config, m = setup(4, horizon=30000)
    FixedPriceExploreThenCommit(NoParams(), config, np.random.default_rng(0)).play(m)
    _, oracle_market = setup(4, horizon=30000)
    BestFixedPriceInHindsight(NoParams(), config, np.random.default_rng(0)).play(oracle_market)
    assert abs(m.p[-1] - oracle_market.p[-1]) < 0.1


def test_oracle_price_is_best_on_its_grid() -> None:
    config, m = setup(5, horizon=1000)
    BestFixedPriceInHindsight(NoParams(), config, np.random.default_rng(0)).play(m)
    best = m.outcome()["regret"].sum()
    for price in PRICE_GRID[::20]:
        _, other = setup(5, horizon=1000)
        other.post(np.full(1000, price))
        assert other.outcome()["regret"].sum() >= best - 1e-9


@pytest.mark.parametrize("cls", [RandomPrice, ScoutingLeastSquares, OneBitGlobalBudgetReduction])
def test_same_seed_same_prices(cls: type[PricingPolicy]) -> None:
    overrides = (
        {"feedback": "one-bit", "budget_balance": "global"} if cls is OneBitGlobalBudgetReduction else {}
    )
    prices = []
    for _ in range(2):
        config, m = setup(6, horizon=2000, **overrides)
        params = cls.Params()
        cls(params, config, np.random.default_rng(11)).play(m)
        prices.append(m.p.copy())
    assert np.array_equal(prices[0], prices[1])


def test_a_policy_without_act_says_so() -> None:
    config, m = setup(horizon=10)
    with pytest.raises(TypeError, match="must implement act/update or override play"):
        PricingPolicy(NoParams(), config, np.random.default_rng(0)).play(m)
