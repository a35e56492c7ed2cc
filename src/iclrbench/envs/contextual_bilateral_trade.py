"""Contextual online bilateral trade (Gaucher, Bernasconi, Castiglioni, Celli, Perchet, ICLR 2025, Sec. 2).

Each round t a context x_t in R^d arrives (unit norm, first coordinate the constant 1/sqrt(2)); the seller
values the item at s_t = x_t . phi (+ noise), the buyer at b_t = x_t . psi (+ noise), both in [0, 1].
The learner posts a price p_t to the seller and q_t to the buyer; trade happens iff s_t <= p_t and
q_t <= b_t, with gain from trade GFT_t = (b_t - s_t) 1{trade} and profit q_t - p_t. Feedback is two-bit
(1{s_t <= p_t}, 1{b_t >= q_t}) or one-bit (1{trade}). Strong budget balance requires p_t = q_t every round;
global budget balance only that the total profit over the horizon is >= 0.

Regret is measured against the best context-dependent price in hindsight (the paper's benchmark): per
round, max_p E[GFT(p, p) | x_t] - E[GFT(p_t, q_t) | x_t]. With no noise the expectation is the realised
value, so regret = sum_t (b_t - s_t)^+ - sum_t GFT_t, exactly the card's definition; with noise it is the
pseudo-regret, computed in closed form for the uniform noise used here (less variance, same rate).

:class:`BilateralMarket` is the batch interface the suite's algorithms use (post many rounds at once, in
order, each once); :class:`ContextualBilateralTradeEnv` is the same market as a gymnasium environment.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from iclrbench.core.config import param

SQRT_HALF = float(np.sqrt(0.5))
#: the spread of valuations around their context-free level; keeps every valuation in [0, 1]
VALUE_SPREAD = 0.25
#: price grid on which the best fixed price in hindsight is searched
PRICE_GRID = np.linspace(0.0, 1.0, 401)


@dataclasses.dataclass(frozen=True)
class BilateralTradeConfig:
    """One instance of the contextual bilateral trade problem."""

    d: int = param(8, "context dimension (including the constant feature)", low=2, high=256)
    horizon: int = param(100_000, "number of rounds T", low=10, high=10_000_000)
    noise: float = param(
        0.0, "half-width of the i.i.d. uniform valuation noise (0 = noiseless)", low=0.0, high=0.1
    )
    feedback: str = param("two-bit", "what the learner observes", choices=("two-bit", "one-bit"))
    budget_balance: str = param(
        "strong", "strong: p = q each round; global: total profit >= 0", choices=("strong", "global")
    )


@dataclasses.dataclass(frozen=True)
class Feedback:
    """What the learner sees for a block of rounds. Two-bit: ``seller`` = 1{s <= p}, ``buyer`` =
    1{b >= q}; one-bit: only ``trade``. Fields it may not see are ``None``."""

    trade: np.ndarray
    seller: np.ndarray | None = None
    buyer: np.ndarray | None = None


def _unit_rows(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    v = rng.normal(size=(n, k))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def expected_gft(
    p: np.ndarray, q: np.ndarray, mean_s: np.ndarray, mean_b: np.ndarray, noise: float
) -> np.ndarray:
    """E[(b - s) 1{s <= p} 1{b >= q}] for s = mean_s + U[-noise, noise], b likewise, independent.

    = P(s <= p) E[b 1{b >= q}] - P(b >= q) E[s 1{s <= p}], each term in closed form for uniform noise.
    """
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    if noise == 0.0:
        return np.where((mean_s <= p) & (mean_b >= q), mean_b - mean_s, 0.0)
    lo_s, hi_s, lo_b, hi_b = mean_s - noise, mean_s + noise, mean_b - noise, mean_b + noise
    width = 2.0 * noise
    p_s = np.clip((p - lo_s) / width, 0.0, 1.0)
    top = np.clip(p, lo_s, hi_s)
    m_s = (top**2 - lo_s**2) / (2.0 * width)  # E[s 1{s <= p}]
    p_b = np.clip((hi_b - q) / width, 0.0, 1.0)
    bottom = np.clip(q, lo_b, hi_b)
    m_b = (hi_b**2 - bottom**2) / (2.0 * width)  # E[b 1{b >= q}]
    return p_s * m_b - p_b * m_s


class BilateralMarket:
    """The hidden instance (phi, psi, contexts, valuations) and the record of posted prices.

    Algorithms read ``contexts`` (i.i.d., independent of valuations and of past prices) and call
    :meth:`post` for consecutive blocks of rounds. Valuations are private to the market; only oracles
    call :meth:`hindsight`.
    """

    def __init__(self, config: BilateralTradeConfig, rng: np.random.Generator) -> None:
        self.config = config
        d, horizon = config.d, config.horizon
        # Valuation levels: sellers around 0.4, buyers around 0.6, so trade is usually but not always
        # worth it; ||phi||, ||psi|| <= 1 so the unit ball is a valid prior for the ellipsoid method.
        level_s, level_b = rng.uniform(0.35, 0.45), rng.uniform(0.55, 0.65)
        direction = _unit_rows(rng, 2, d - 1)
        self.phi = np.concatenate([[level_s / SQRT_HALF], VALUE_SPREAD / SQRT_HALF * direction[0]])
        self.psi = np.concatenate([[level_b / SQRT_HALF], VALUE_SPREAD / SQRT_HALF * direction[1]])
        z = _unit_rows(rng, horizon, d - 1)
        contexts = np.empty((horizon, d))
        contexts[:, 0] = SQRT_HALF
        contexts[:, 1:] = SQRT_HALF * z
        contexts.setflags(write=False)
        self.contexts = contexts
        self.mean_s = contexts @ self.phi
        self.mean_b = contexts @ self.psi
        if config.noise > 0:
            noise = rng.uniform(-config.noise, config.noise, size=(2, horizon))
            self._s, self._b = self.mean_s + noise[0], self.mean_b + noise[1]
        else:
            self._s, self._b = self.mean_s, self.mean_b
        self.p = np.full(horizon, np.nan)
        self.q = np.full(horizon, np.nan)
        self.next_round = 0

    @property
    def horizon(self) -> int:
        return self.config.horizon

    @property
    def done(self) -> bool:
        return self.next_round == self.horizon

    def post(self, p: Any, q: Any | None = None) -> Feedback:
        """Post prices for the next ``len(p)`` rounds; returns their feedback.

        Under strong budget balance ``q`` may be omitted (q = p) and must equal ``p`` if given.
        """
        p = np.atleast_1d(np.asarray(p, dtype=float))
        if q is None:
            q = p
        else:
            q = np.atleast_1d(np.asarray(q, dtype=float))
            if self.config.budget_balance == "strong" and not np.array_equal(p, q):
                raise ValueError("strong budget balance: the seller and buyer prices must be equal")
        start, stop = self.next_round, self.next_round + p.shape[0]
        if q.shape != p.shape or p.ndim != 1:
            raise ValueError("p and q must be 1-d arrays of the same length")
        if stop > self.horizon:
            raise ValueError(f"posting rounds {start}..{stop - 1} past the horizon {self.horizon}")
        # Finiteness is checked once, in outcome(): a NaN price fails the run there.
        self.p[start:stop], self.q[start:stop] = p, q
        self.next_round = stop
        seller = self._s[start:stop] <= p
        buyer = self._b[start:stop] >= q
        trade = seller & buyer
        if self.config.feedback == "one-bit":
            return Feedback(trade=trade)
        return Feedback(trade=trade, seller=seller, buyer=buyer)

    def hindsight(self) -> dict[str, Any]:
        """The hidden instance, for oracles only: expected valuations and the noise level."""
        return {"mean_s": self.mean_s, "mean_b": self.mean_b, "noise": self.config.noise}

    def best_expected_gft(self) -> np.ndarray:
        """max_p E[GFT(p, p) | x_t] per round: the benchmark's per-round value.

        With the same symmetric noise on both sides, E[GFT(m + u)] = E[GFT(m - u)] around the midpoint
        m = (E s + E b) / 2, and m is the global maximum (checked against a fine price grid in the tests),
        so the benchmark is E[GFT(m, m)] in closed form.
        """
        if self.config.noise == 0.0:
            return np.maximum(self.mean_b - self.mean_s, 0.0)
        mid = 0.5 * (self.mean_s + self.mean_b)
        return expected_gft(mid, mid, self.mean_s, self.mean_b, self.config.noise)

    def outcome(self) -> dict[str, Any]:
        """Per-round arrays of the finished game: regret, realised GFT and profit."""
        if not self.done:
            raise RuntimeError(f"the algorithm posted {self.next_round} of {self.horizon} rounds")
        if not (np.isfinite(self.p).all() and np.isfinite(self.q).all()):
            raise ValueError("the algorithm posted a price that is not finite")
        trade = (self._s <= self.p) & (self._b >= self.q)
        gft = np.where(trade, self._b - self._s, 0.0)
        profit = np.where(trade, self.q - self.p, 0.0)
        expected = expected_gft(self.p, self.q, self.mean_s, self.mean_b, self.config.noise)
        regret = self.best_expected_gft() - expected
        return {"regret": regret, "gft": gft, "profit": profit, "trade": trade}


def _gym_env_class() -> type:
    """Built on first use so that ``import iclrbench`` does not pay for gymnasium."""
    import gymnasium as gym
    from gymnasium import spaces

    class ContextualBilateralTradeEnv(gym.Env):
        """Gymnasium view of :class:`BilateralMarket`: one round per step.

        Observation: the context x_t (shape (d,), entries in [-1, 1]). Action: (p_t, q_t) in [0, 1]^2;
        under strong budget balance the buyer's price is set to the seller's (q_t := p_t). Reward: the
        realised gain from trade. ``info`` holds the feedback the learner may use (``seller``/``buyer``
        bits for two-bit, ``trade`` for one-bit), the profit and the round's regret. The episode is
        truncated after ``horizon`` rounds.
        """

        metadata = {"render_modes": []}  # noqa: RUF012  (gymnasium's own convention)

        def __init__(
            self,
            d: int = 8,
            horizon: int = 1000,
            noise: float = 0.0,
            feedback: str = "two-bit",
            budget_balance: str = "strong",
        ) -> None:
            from iclrbench.core import config as cfg

            self.config = cfg.build(
                BilateralTradeConfig,
                {
                    "d": d,
                    "horizon": horizon,
                    "noise": noise,
                    "feedback": feedback,
                    "budget_balance": budget_balance,
                },
            )
            self.observation_space = spaces.Box(-1.0, 1.0, shape=(d,), dtype=np.float64)
            self.action_space = spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float64)
            self.market: BilateralMarket | None = None
            self._best: np.ndarray | None = None

        def reset(
            self, *, seed: int | None = None, options: dict[str, Any] | None = None
        ) -> tuple[np.ndarray, dict[str, Any]]:
            super().reset(seed=seed)
            self.market = BilateralMarket(self.config, self.np_random)
            self._best = self.market.best_expected_gft()
            return self.market.contexts[0].copy(), {}

        def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
            if self.market is None or self._best is None:
                raise RuntimeError("call reset() before step()")
            if self.market.done:
                raise RuntimeError("the episode is over; call reset()")
            p, q = np.clip(np.asarray(action, dtype=float).reshape(2), 0.0, 1.0)
            if self.config.budget_balance == "strong":
                q = p
            t = self.market.next_round
            fb = self.market.post([p], [q])
            trade = bool(fb.trade[0])
            m = self.market
            gain = float(m._b[t] - m._s[t]) if trade else 0.0
            expected = expected_gft(p, q, m.mean_s[t], m.mean_b[t], self.config.noise)
            info: dict[str, Any] = {
                "trade": trade,
                "profit": float(q - p) if trade else 0.0,
                "regret": float(self._best[t] - expected),
            }
            if fb.seller is not None and fb.buyer is not None:
                info["seller"], info["buyer"] = bool(fb.seller[0]), bool(fb.buyer[0])
            truncated = m.done
            obs = m.contexts[min(m.next_round, m.horizon - 1)].copy()
            return obs, gain, False, truncated, info

    return ContextualBilateralTradeEnv


def __getattr__(name: str) -> Any:
    if name == "ContextualBilateralTradeEnv":
        return _gym_env_class()
    raise AttributeError(name)
