"""The market and its gymnasium environment: invariants, known answers, determinism, bad input."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import iclrbench  # noqa: F401  (registers the gymnasium ids)
from iclrbench.core import config as cfg
from iclrbench.envs.contextual_bilateral_trade import BilateralMarket, BilateralTradeConfig, expected_gft


def market(seed: int = 0, **overrides: object) -> BilateralMarket:
    config = cfg.build(BilateralTradeConfig, {"d": 4, "horizon": 500, **overrides})
    return BilateralMarket(config, np.random.default_rng(seed))


def test_gymnasium_id_passes_check_env() -> None:
    env = gym.make("iclrbench/ContextualBilateralTrade-v0", d=5, horizon=40)
    check_env(env.unwrapped)
    for kwargs in ({"noise": 0.1}, {"feedback": "one-bit", "budget_balance": "global"}):
        check_env(gym.make("iclrbench/ContextualBilateralTrade-v0", horizon=30, **kwargs).unwrapped)


def test_gym_episode_truncates_at_the_horizon_and_regret_is_nonnegative() -> None:
    env = gym.make("iclrbench/ContextualBilateralTrade-v0", d=3, horizon=25)
    obs, _ = env.reset(seed=1)
    assert obs.shape == (3,)
    regrets, steps, truncated = [], 0, False
    while not truncated:
        obs, _reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert not terminated and {"seller", "buyer", "trade"} <= info.keys()
        regrets.append(info["regret"])
        steps += 1
    assert steps == 25 and min(regrets) >= -1e-12


def test_gym_env_rejects_a_bad_config() -> None:
    from iclrbench.core.errors import UserError

    with pytest.raises(UserError, match="feedback"):
        gym.make("iclrbench/ContextualBilateralTrade-v0", feedback="three-bit")


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31), st.integers(2, 12), st.sampled_from([0.0, 0.05, 0.1]))
def test_contexts_are_unit_norm_and_valuations_in_unit_interval(seed: int, d: int, noise: float) -> None:
    m = market(seed, d=d, noise=noise, horizon=200)
    assert np.allclose(np.linalg.norm(m.contexts, axis=1), 1.0)
    assert np.allclose(m.contexts[:, 0], np.sqrt(0.5))
    for values in (m._s, m._b, m.mean_s, m.mean_b):
        assert values.min() >= 0.0 and values.max() <= 1.0
    assert np.linalg.norm(m.phi) <= 1.0 and np.linalg.norm(m.psi) <= 1.0


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from([0.0, 0.03, 0.1]), st.floats(0.0, 1.0))
def test_regret_is_nonnegative_for_any_budget_balanced_price(seed: int, noise: float, price: float) -> None:
    m = market(seed, noise=noise, horizon=300)
    m.post(np.full(300, price))
    assert m.outcome()["regret"].min() >= -1e-12


def test_noiseless_regret_is_the_cards_definition() -> None:
    m = market(3)
    prices = np.random.default_rng(0).random(500)
    m.post(prices)
    out = m.outcome()
    s, b = m.mean_s, m.mean_b
    gft = np.where((s <= prices) & (b >= prices), b - s, 0.0)
    assert np.allclose(out["regret"], np.maximum(b - s, 0) - gft)
    assert np.allclose(out["gft"], gft)


def test_expected_gft_matches_monte_carlo() -> None:
    rng = np.random.default_rng(0)
    mean_s, mean_b, noise, p, q = 0.4, 0.55, 0.1, 0.47, 0.5
    s = mean_s + rng.uniform(-noise, noise, 2_000_000)
    b = mean_b + rng.uniform(-noise, noise, 2_000_000)
    monte_carlo = np.mean(np.where((s <= p) & (b >= q), b - s, 0.0))
    assert expected_gft(np.array(p), np.array(q), mean_s, mean_b, noise) == pytest.approx(
        monte_carlo, abs=2e-4
    )


@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 1.0), st.floats(-0.6, 0.6), st.floats(0.005, 0.1))
def test_midpoint_is_the_best_price_under_symmetric_noise(mean_s: float, gap: float, noise: float) -> None:
    """The benchmark's closed form: no price on a fine grid beats the midpoint of the expected values."""
    grid = np.linspace(-0.5, 1.5, 8001)
    mid = np.array(mean_s + gap / 2)
    best_on_grid = expected_gft(grid, grid, mean_s, mean_s + gap, noise).max()
    assert best_on_grid <= expected_gft(mid, mid, mean_s, mean_s + gap, noise) + 1e-12


def test_same_seed_same_market_and_different_seed_different_market() -> None:
    a, b, c = market(7, noise=0.1), market(7, noise=0.1), market(8, noise=0.1)
    assert np.array_equal(a.contexts, b.contexts) and np.array_equal(a._s, b._s)
    assert not np.array_equal(a.contexts, c.contexts)


def test_post_enforces_order_horizon_and_strong_budget_balance() -> None:
    m = market(horizon=10)
    with pytest.raises(ValueError, match="must be equal"):
        m.post([0.5], [0.6])
    m.post(np.full(8, 0.5))
    with pytest.raises(ValueError, match="past the horizon"):
        m.post(np.full(3, 0.5))
    with pytest.raises(RuntimeError, match="posted 8 of 10"):
        m.outcome()
    m.post([np.nan, 0.5])
    with pytest.raises(ValueError, match="not finite"):
        m.outcome()


def test_one_bit_feedback_hides_the_two_bits() -> None:
    m = market(feedback="one-bit", budget_balance="global")
    fb = m.post([0.2, 0.5], [0.8, 0.5])
    assert fb.seller is None and fb.buyer is None and fb.trade.shape == (2,)
