"""Baselines for contextual bilateral trade (TASKS.md card; Gaucher et al., ICLR 2025, Sec. 1.2).

- ``random-price``: p = q ~ U[0, 1] each round.
- ``etc-least-squares``: explore-then-commit: N = ceil(c d^{1/3} T^{2/3}) scouting rounds at uniform
  prices, one least-squares fit, then the estimated midpoint forever.
- ``fixed-price-etc``: a non-contextual learner (Cesa-Bianchi et al., "A regret analysis of bilateral
  trade", EC 2021): explore a grid of K = ceil(T^{1/3}) prices for ceil(T^{2/3}) rounds, estimate
  E[GFT(p)] = P(s <= p) E[(b - p)^+] + P(b >= p) E[(p - s)^+] from the two bits, commit to its argmax.
- ``best-fixed-price`` (oracle): the single price maximising expected gain from trade in hindsight.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from iclrbench.algorithms.contextual_bilateral_trade import (
    TASK,
    PricingPolicy,
    fit_midpoint_weights,
    uniform_scouting_targets,
)
from iclrbench.core.algorithm import register_algorithm
from iclrbench.core.config import param
from iclrbench.envs.contextual_bilateral_trade import (
    PRICE_GRID,
    BilateralMarket,
    BilateralTradeConfig,
    expected_gft,
)


def _needs_two_bits(config: BilateralTradeConfig) -> str | None:
    return None if config.feedback == "two-bit" else "needs two-bit feedback"


@register_algorithm(task=TASK, name="random-price", role="baseline")
class RandomPrice(PricingPolicy):
    """A uniformly random price, p = q ~ U[0, 1], every round."""

    def act(self, x: np.ndarray) -> tuple[float, float]:
        price = float(self.rng.random())
        return price, price

    def play(self, market: BilateralMarket) -> None:
        market.post(self.rng.random(market.horizon))


@dataclasses.dataclass(frozen=True)
class EtcParams:
    explore_scale: float = param(1.0, "N = ceil(c d^(1/3) T^(2/3)) exploration rounds", low=0.0)
    ridge: float = param(1.0, "ridge penalty of the least-squares fit", low=1e-9)


@register_algorithm(task=TASK, name="etc-least-squares", role="baseline")
class ExploreThenCommitLeastSquares(PricingPolicy):
    """Explore at uniform prices for d^{1/3} T^{2/3} rounds, fit least squares once, then commit."""

    Params = EtcParams
    supports = classmethod(lambda cls, config: _needs_two_bits(config))

    def play(self, market: BilateralMarket) -> None:
        d, horizon = self.config.d, market.horizon
        n_explore = min(horizon, int(np.ceil(self.params.explore_scale * d ** (1 / 3) * horizon ** (2 / 3))))
        uniform = self.rng.random(n_explore)
        y_s, y_b = uniform_scouting_targets(market.post(uniform))
        xs = market.contexts[:n_explore]
        weights = fit_midpoint_weights(self.params.ridge * np.eye(d) + xs.T @ xs, xs.T @ y_s, xs.T @ y_b)
        if n_explore < horizon:
            market.post(np.clip(market.contexts[n_explore:] @ weights, 0.0, 1.0))


@register_algorithm(task=TASK, name="fixed-price-etc", role="baseline")
class FixedPriceExploreThenCommit(PricingPolicy):
    """Non-contextual: estimate E[GFT(p)] on a price grid from two-bit feedback, commit to the best."""

    supports = classmethod(lambda cls, config: _needs_two_bits(config))

    def play(self, market: BilateralMarket) -> None:
        horizon = market.horizon
        k = max(2, int(np.ceil(horizon ** (1 / 3))))
        n_explore = min(horizon, int(np.ceil(horizon ** (2 / 3))))
        grid = (np.arange(k) + 0.5) / k
        arm = self.rng.permutation(np.arange(n_explore) % k)
        feedback = market.post(grid[arm])
        assert feedback.seller is not None and feedback.buyer is not None
        pulls = np.maximum(np.bincount(arm, minlength=k), 1)
        sell = np.bincount(arm, weights=feedback.seller, minlength=k) / pulls  # P(s <= p_k)
        buy = np.bincount(arm, weights=feedback.buyer, minlength=k) / pulls  # P(b >= p_k)
        step = 1.0 / k
        # E[(b - p)^+] = int_p^1 P(b >= u) du and E[(p - s)^+] = int_0^p P(s <= u) du, midpoint rule
        upper = step * (np.cumsum(buy[::-1])[::-1] - 0.5 * buy)
        lower = step * (np.cumsum(sell) - 0.5 * sell)
        best = grid[int(np.argmax(sell * upper + buy * lower))]
        if n_explore < horizon:
            market.post(np.full(horizon - n_explore, best))


@register_algorithm(task=TASK, name="best-fixed-price", role="oracle")
class BestFixedPriceInHindsight(PricingPolicy):
    """Oracle: the one price (on a 401-point grid) with the most expected gain from trade in hindsight."""

    def play(self, market: BilateralMarket) -> None:
        hidden = market.hindsight()
        total = np.zeros(PRICE_GRID.size)
        for start in range(0, market.horizon, 4096):
            ms = hidden["mean_s"][start : start + 4096, None]
            mb = hidden["mean_b"][start : start + 4096, None]
            total += expected_gft(PRICE_GRID[None, :], PRICE_GRID[None, :], ms, mb, hidden["noise"]).sum(0)
        market.post(np.full(market.horizon, PRICE_GRID[int(np.argmax(total))]))
