"""The reference algorithms of "Feature-Based Online Bilateral Trade" (Gaucher et al., ICLR 2025).

- :class:`EllipsoidPricing`: two-bit feedback, strong budget balance, O(d^2 log T) regret (Sec. 3): one
  ellipsoid knowledge set per valuation vector (phi, psi), central cuts while an interval is wider than
  epsilon = d^2 / T, the midpoint of the two intervals once they separate.
- :class:`ScoutingLeastSquares`: noisy valuations, O~(T^{2/3}) regret (Sec. 4): scouting rounds at a
  uniform random price give unbiased bits of each valuation (E[1 - 1{s <= U}] = s, E[1{b >= U}] = b for
  U ~ U[0, 1]); a least-squares fit of those bits on the context, refitted on doubling epochs, prices the
  other rounds at the estimated midpoint. Scouting probability eps_t = min(1, c (d / t)^{1/3}).
- :class:`OneBitGlobalBudgetReduction`: one-bit feedback with global budget balance (Sec. 5), reduced to
  the two-bit ellipsoid method: each cut the ellipsoid needs is bought with a one-sided probe (the other
  side priced where it surely accepts), paid for with profit earned first (separated rounds trade at
  (s_hi, b_lo) with a margin; margin rounds post m -+ delta when the budget cannot cover a probe).

Protocol of the task (``PricingPolicy``): ``play(market)`` posts a (p, q) pair for every round in order.
Per-step policies implement ``act``/``update`` and inherit ``play``; ours override ``play`` with an
event-driven loop that is exact -- the knowledge sets change only at cut rounds, so every round up to the
next cut is priced in one vectorised step -- and keep ``act``/``update`` for the gymnasium environment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from iclrbench.core.algorithm import Algorithm, register_algorithm
from iclrbench.core.config import param
from iclrbench.envs.contextual_bilateral_trade import BilateralMarket, BilateralTradeConfig, Feedback

TASK = "contextual-bilateral-trade"
NO_CUT, CUT_SELLER, CUT_BUYER = 0, 1, 2


class PricingPolicy(Algorithm):
    """Base of this task's algorithms: ``play(market)`` must post prices for all ``market.horizon`` rounds.

    A per-step policy implements ``act(x) -> (p, q)`` and ``update(x, p, q, feedback)`` (feedback arrays
    of length 1) and inherits the loop below.
    """

    config: BilateralTradeConfig

    def act(self, x: np.ndarray) -> tuple[float, float]:
        raise TypeError(f"{type(self).__name__} must implement act/update or override play")

    def update(self, x: np.ndarray, p: float, q: float, feedback: Feedback) -> None:
        """Learn from one round's feedback; the default learns nothing."""

    def play(self, market: BilateralMarket) -> None:
        for t in range(market.horizon):
            x = market.contexts[t]
            p, q = self.act(x)
            self.update(x, p, q, market.post([p], [q]))


class EllipsoidBank:
    """The seller's and the buyer's ellipsoid knowledge sets {theta : (theta - c)^T A^{-1} (theta - c) <= 1}
    for ``n`` independent games (seeds) at once, and the paper's decision rule on top of them.

    Reproducibility: a game gives bit-identical prices whether it is played alone, step by step, or
    batched with other games. BLAS may round a matrix product differently for different row counts, so
    contexts are always multiplied in tiles of exactly ``TILE`` rows (padded), and the remaining
    reductions use ``np.einsum``, whose result per element does not depend on the array's other sizes.
    """

    TILE = 64

    SELLER, BUYER = 0, 1

    def __init__(self, n: int, d: int, epsilon: float) -> None:
        self.d, self.epsilon = d, epsilon
        self.centre = np.zeros((n, 2, d))
        # the unit ball contains phi and psi (||phi||, ||psi|| <= 1)
        self.shape = np.tile(np.eye(d), (n, 2, 1, 1))
        self.cuts = np.zeros((n, 2), dtype=np.int64)

    def decide(self, games: np.ndarray, block: np.ndarray, valid: np.ndarray | None = None) -> dict[str, Any]:
        """For contexts ``block`` (L, C, d) of games ``games`` (L,): per row the cut it needs (NO_CUT /
        CUT_SELLER / CUT_BUYER), the posted price, the intervals and whether they are separated.

        The rule (Sec. 3): if s_hi < b_lo the intervals are separated and the price is their midpoint;
        else cut the seller's set at its centre while its interval is wider than epsilon, then the buyer's;
        else (both narrower than epsilon) post (s_hi + b_lo) / 2.
        """
        rows = block.shape[1]
        padded = -rows % self.TILE
        if padded:
            block = np.concatenate([block, np.zeros((block.shape[0], padded, self.d))], axis=1)
            valid = None if valid is None else np.pad(valid, ((0, 0), (0, padded)))
        mid = np.einsum("lcd,lkd->lkc", block, self.centre[games])
        half = np.sqrt(np.maximum(self._quadratic_forms(games, block), 0.0))
        s_mid, b_mid, s_half, b_half = mid[:, 0], mid[:, 1], half[:, 0], half[:, 1]
        s_hi, b_lo = s_mid + s_half, b_mid - b_half
        separated = s_hi < b_lo
        ok = ~separated if valid is None else valid & ~separated
        cut_s = ok & (2 * s_half >= self.epsilon)
        cut_b = ok & ~cut_s & (2 * b_half >= self.epsilon)
        decision = {
            "kind": np.where(cut_s, CUT_SELLER, np.where(cut_b, CUT_BUYER, NO_CUT)),
            "price": np.where(cut_s, s_mid, np.where(cut_b, b_mid, 0.5 * (s_hi + b_lo))),
            "separated": separated,
            "s_mid": s_mid,
            "b_mid": b_mid,
            "s_lo": s_mid - s_half,
            "s_hi": s_hi,
            "b_lo": b_lo,
            "b_hi": b_mid + b_half,
        }
        return {key: value[:, :rows] for key, value in decision.items()}

    def _quadratic_forms(self, games: np.ndarray, block: np.ndarray) -> np.ndarray:
        """x^T A x for every row of ``block`` (L, C, d), C a multiple of TILE, and both sets: (L, 2, C)."""
        n_games, rows, d = block.shape
        tiles = block.reshape(n_games, rows // self.TILE, 1, self.TILE, d)
        products = tiles @ self.shape[games][:, None]  # (L, tiles, 2, TILE, d)
        quad = np.einsum("lnkcd,lncd->lnkc", products, tiles[:, :, 0])
        return quad.transpose(0, 2, 1, 3).reshape(n_games, 2, rows)

    def learn(self, games: np.ndarray, kinds: np.ndarray, contexts: np.ndarray, accepted: np.ndarray) -> None:
        """Central cuts (the Loewner-John update, Grotschel-Lovasz-Schrijver) through each set's centre
        along x. A seller who sold at the centre price has s <= x.c: keep the lower half; a buyer who
        bought has b >= x.c: keep the upper half."""
        d = self.d
        sides = np.where(kinds == CUT_SELLER, self.SELLER, self.BUYER)
        keep_upper = np.where(sides == self.SELLER, ~accepted, accepted)
        a = self.shape[games, sides]
        ax = np.einsum("mde,me->md", a, contexts)
        g = ax / np.sqrt(np.maximum(np.einsum("md,md->m", contexts, ax), 1e-300))[:, None]
        self.centre[games, sides] += np.where(keep_upper, 1.0, -1.0)[:, None] * g / (d + 1)
        self.shape[games, sides] = d * d / (d * d - 1.0) * (a - 2.0 / (d + 1) * np.einsum("md,me->mde", g, g))
        np.add.at(self.cuts, (games, sides), 1)

    def learn_one(self, game: int, kind: int, x: np.ndarray, accepted: bool) -> None:
        self.learn(np.array([game]), np.array([kind]), x[None, :], np.array([accepted]))


def ellipsoid_epsilon(config: BilateralTradeConfig, scale: float) -> float:
    """epsilon = scale * d^2 / T: the width below which an interval is not cut any more (Sec. 3)."""
    return scale * config.d**2 / config.horizon


@dataclasses.dataclass(frozen=True)
class EllipsoidParams:
    epsilon_scale: float = param(1.0, "epsilon = epsilon_scale * d^2 / T (the paper: 1)", low=1e-9)


@register_algorithm(task=TASK, name="ellipsoid-sbb", role="reference")
class EllipsoidPricing(PricingPolicy):
    """Ellipsoid pricing, two-bit feedback, strong budget balance: O(d^2 log T) regret (Sec. 3, Thm 1)."""

    Params = EllipsoidParams

    def __init__(self, params: EllipsoidParams, config: BilateralTradeConfig, rng: np.random.Generator):
        super().__init__(params, config, rng)
        self.sets = EllipsoidBank(1, config.d, ellipsoid_epsilon(config, params.epsilon_scale))
        self._pending = NO_CUT

    @classmethod
    def supports(cls, config: BilateralTradeConfig) -> str | None:
        return None if config.feedback == "two-bit" else "needs two-bit feedback"

    def act(self, x: np.ndarray) -> tuple[float, float]:
        decision = self.sets.decide(np.zeros(1, dtype=np.int64), x[None, None, :])
        self._pending = int(decision["kind"][0, 0])
        price = float(decision["price"][0, 0])
        return price, price

    def update(self, x: np.ndarray, p: float, q: float, feedback: Feedback) -> None:
        bit = feedback.seller if self._pending == CUT_SELLER else feedback.buyer
        if self._pending != NO_CUT and bit is not None:
            self.sets.learn_one(0, self._pending, x, bool(bit[0]))

    def play(self, market: BilateralMarket) -> None:
        self.play_batch([self], [market])

    @classmethod
    def play_batch(cls, algorithms: Sequence[EllipsoidPricing], markets: Sequence[BilateralMarket]) -> None:
        """Play every market (one per seed) to the end, all advanced together.

        Knowledge sets change only at cut rounds, so each step prices, for every game, all rounds up to
        and including its next cut in one batched computation, then applies all the cuts at once.
        Decisions are exactly those of ``act``/``update`` round by round.
        """
        n, horizon = len(markets), markets[0].horizon
        first = algorithms[0]
        bank = EllipsoidBank(n, first.config.d, first.sets.epsilon)
        t, chunk = np.zeros(n, dtype=np.int64), 64
        while True:
            live = np.flatnonzero(t < horizon)
            if live.size == 0:
                break
            block = np.zeros((live.size, chunk, bank.d))
            valid = np.zeros((live.size, chunk), dtype=bool)
            for i, game in enumerate(live):
                rows = markets[game].contexts[t[game] : t[game] + chunk]
                block[i, : len(rows)], valid[i, : len(rows)] = rows, True
            decision = bank.decide(live, block, valid)
            kind = decision["kind"]
            has_event = kind.any(axis=1)
            last = np.where(has_event, (kind != NO_CUT).argmax(axis=1), valid.sum(axis=1) - 1)
            event_kind = kind[np.arange(live.size), last]
            accepted = np.zeros(live.size, dtype=bool)
            for i, game in enumerate(live):
                feedback = markets[game].post(decision["price"][i, : last[i] + 1])
                if has_event[i]:
                    answers = feedback.seller if event_kind[i] == CUT_SELLER else feedback.buyer
                    assert answers is not None  # two-bit feedback, checked by supports()
                    accepted[i] = answers[-1]
            t[live] += last + 1
            if has_event.any():
                ev = np.flatnonzero(has_event)
                bank.learn(live[ev], event_kind[ev], block[ev, last[ev]], accepted[ev])
                chunk = max(64, 2 * int(np.median(last[ev]) + 1))
            else:
                chunk = min(2 * chunk, 1 << 16)
        for i, algorithm in enumerate(algorithms):
            algorithm.sets.centre[0], algorithm.sets.shape[0] = bank.centre[i], bank.shape[i]
            algorithm.sets.cuts[0] = bank.cuts[i]


@dataclasses.dataclass(frozen=True)
class ScoutingParams:
    explore_scale: float = param(1.0, "c in the scouting probability min(1, c (d/t)^(1/3))", low=0.0)
    ridge: float = param(1.0, "ridge penalty of the least-squares fit", low=1e-9)


def uniform_scouting_targets(feedback: Feedback) -> tuple[np.ndarray, np.ndarray]:
    """Unbiased responses at a U[0, 1] price: E[1 - 1{s <= U}] = s and E[1{b >= U}] = b."""
    assert feedback.seller is not None and feedback.buyer is not None
    return 1.0 - feedback.seller, feedback.buyer.astype(float)


def fit_midpoint_weights(gram: np.ndarray, rhs_s: np.ndarray, rhs_b: np.ndarray) -> np.ndarray:
    """(theta_s + theta_b) / 2 from the ridge normal equations: the midpoint price is x . weights."""
    solution = np.linalg.solve(gram, np.stack([rhs_s, rhs_b], axis=1))
    return 0.5 * (solution[:, 0] + solution[:, 1])


@register_algorithm(task=TASK, name="scouting-ls", role="reference")
class ScoutingLeastSquares(PricingPolicy):
    """Scouting at uniform prices + least squares for noisy valuations: O~(T^{2/3}) regret (Sec. 4)."""

    Params = ScoutingParams

    @classmethod
    def supports(cls, config: BilateralTradeConfig) -> str | None:
        return None if config.feedback == "two-bit" else "needs two-bit feedback"

    def play(self, market: BilateralMarket) -> None:
        d, horizon, contexts = self.config.d, market.horizon, market.contexts
        gram = self.params.ridge * np.eye(d)
        rhs_s, rhs_b, weights = np.zeros(d), np.zeros(d), np.zeros(d)
        t = 0
        while t < horizon:
            stop = min(horizon, max(2 * t, 2 * d))  # doubling epochs: refit log2(T) times
            rounds = np.arange(t + 1, stop + 1)
            scout_prob = np.minimum(1.0, self.params.explore_scale * np.cbrt(d / rounds))
            scout = self.rng.random(rounds.size) < scout_prob
            uniform = self.rng.random(rounds.size)
            block = contexts[t:stop]
            price = np.where(scout, uniform, np.clip(block @ weights, 0.0, 1.0))
            feedback = market.post(price)
            y_s, y_b = uniform_scouting_targets(feedback)
            xs = block[scout]
            gram += xs.T @ xs
            rhs_s += xs.T @ y_s[scout]
            rhs_b += xs.T @ y_b[scout]
            weights = fit_midpoint_weights(gram, rhs_s, rhs_b)
            t = stop


@dataclasses.dataclass(frozen=True)
class OneBitParams:
    epsilon_scale: float = param(1.0, "epsilon = epsilon_scale * d^2 / T", low=1e-9)
    margin: float = param(
        0.1, "half-spread delta of profit-earning rounds (p = m - delta, q = m + delta)", low=0.0, high=0.5
    )


@register_algorithm(task=TASK, name="one-bit-gbb", role="reference")
class OneBitGlobalBudgetReduction(PricingPolicy):
    """One-bit feedback, global budget balance, by reduction to two-bit ellipsoid pricing (Sec. 5)."""

    Params = OneBitParams

    def __init__(self, params: OneBitParams, config: BilateralTradeConfig, rng: np.random.Generator):
        super().__init__(params, config, rng)
        self.sets = EllipsoidBank(1, config.d, ellipsoid_epsilon(config, params.epsilon_scale))
        self.profit = 0.0
        self.probes = self.margin_rounds = 0

    @classmethod
    def supports(cls, config: BilateralTradeConfig) -> str | None:
        return None if config.budget_balance == "global" else "needs global budget balance (p != q)"

    def _prices(self, decision: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Non-event rounds: separated intervals trade surely at (s_hi, b_lo), earning b_lo - s_hi;
        otherwise both intervals are narrower than epsilon and the SBB price is posted."""
        sep = decision["separated"]
        mid = 0.5 * (decision["s_hi"] + decision["b_lo"])
        return np.where(sep, decision["s_hi"], mid), np.where(sep, decision["b_lo"], mid)

    def _settle(self, p: np.ndarray, q: np.ndarray, feedback: Feedback) -> None:
        self.profit += float(np.sum(np.where(feedback.trade, q - p, 0.0)))

    def play(self, market: BilateralMarket) -> None:
        contexts, t, chunk, game = market.contexts, 0, 64, np.zeros(1, dtype=np.int64)
        while t < market.horizon:
            stop = min(market.horizon, t + chunk)
            decision = {key: v[0] for key, v in self.sets.decide(game, contexts[None, t:stop]).items()}
            p, q = self._prices(decision)
            events = np.flatnonzero(decision["kind"])
            k = int(events[0]) if events.size else -1
            if k < 0:
                self._settle(p, q, market.post(p, q))
                t, chunk = stop, min(2 * chunk, 1 << 16)
                continue
            if k > 0:
                self._settle(p[:k], q[:k], market.post(p[:k], q[:k]))
            self._event(market, contexts[t + k], {key: v[k] for key, v in decision.items()})
            t, chunk = t + k + 1, max(64, 2 * (k + 1))

    def _margin_prices(self, row: dict[str, Any]) -> tuple[float, float]:
        """A profit-earning round: p = m - delta, q = m + delta with m uniform over the prices at which
        a trade is still possible (between the lowest possible seller value and the highest buyer value,
        within [0, 1]); trade earns 2 delta."""
        delta = self.params.margin
        low = max(delta, min(max(float(row["s_lo"]), 0.0), 1.0) + delta)
        high = min(1.0 - delta, max(min(float(row["b_hi"]), 1.0), 0.0) - delta)
        m = self.rng.uniform(low, high) if low < high else self.rng.uniform(delta, 1.0 - delta)
        return m - delta, m + delta

    def _event(self, market: BilateralMarket, x: np.ndarray, row: dict[str, Any]) -> None:
        """A round where the ellipsoid method needs a bit: probe one side if the budget covers the worst
        case, else earn profit with a margin round."""
        kind, centre = int(row["kind"]), float(row["price"])
        # Valuations lie in [0, 1] (the model's assumption), so the other side's sure-accept price is
        # clipped into [0, 1]: it costs less and still surely accepts.
        if kind == CUT_SELLER:  # the buyer surely accepts q = max(b_lo, 0): trade <=> s <= centre
            p, q = centre, max(float(row["b_lo"]), 0.0)
        else:  # the seller surely accepts p = min(s_hi, 1): trade <=> b >= centre
            p, q = min(float(row["s_hi"]), 1.0), centre
        worst_cost = max(0.0, p - q)
        if self.profit - worst_cost >= 0.0:
            feedback = market.post([p], [q])
            self.sets.learn_one(0, kind, x, bool(feedback.trade[0]))
            self.probes += 1
        else:
            p, q = self._margin_prices(row)
            feedback = market.post([p], [q])
            self.margin_rounds += 1
        self._settle(np.array([p]), np.array([q]), feedback)
