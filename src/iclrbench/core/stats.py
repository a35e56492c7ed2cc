"""Honest statistics over seeds (after rliable, Agarwal et al., NeurIPS 2021): the interquartile mean and
percentile confidence intervals from a stratified bootstrap, all vectorised over resamples.

Every function takes an explicit generator seed so the same runs always print the same intervals.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

DEFAULT_REPS = 2000


def iqm(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean: the mean of the middle 50% (scipy's trim_mean with 25% cut each side)."""
    from scipy.stats import trim_mean

    return trim_mean(np.asarray(values, dtype=float), 0.25, axis=axis)


def stratified_bootstrap_ci(
    scores: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
    *,
    reps: int = DEFAULT_REPS,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile (1 - alpha) CI of ``statistic`` over a (runs, strata) matrix of scores.

    Runs are resampled with replacement within each stratum (column) independently, as rliable does
    across tasks. ``statistic`` maps a (reps, runs, strata) array to (reps,); the default is the mean.
    A 1-d ``scores`` is one stratum.
    """
    x = np.asarray(scores, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    n, k = x.shape
    if n == 0:
        return float("nan"), float("nan")
    if n == 1:
        value = float(x.mean()) if statistic is None else float(statistic(x[None])[0])
        return value, value
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(reps, n, k))
    resampled = np.take_along_axis(np.broadcast_to(x, (reps, n, k)), idx, axis=1)
    stats = resampled.mean(axis=(1, 2)) if statistic is None else statistic(resampled)
    lo, hi = np.quantile(stats, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def bootstrap_band(
    curves: np.ndarray, *, reps: int = 1000, alpha: float = 0.05, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean curve and pointwise percentile bootstrap CI over runs, for a (runs, points) array."""
    y = np.asarray(curves, dtype=float)
    mean = y.mean(axis=0)
    if y.shape[0] < 2:
        return mean, mean.copy(), mean.copy()
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, y.shape[0], size=(reps, y.shape[0]))
    means = y[idx].mean(axis=1)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2], axis=0)
    return mean, lo, hi


def probability_of_improvement(x: np.ndarray, y: np.ndarray, higher_is_better: bool = True) -> float:
    """P(X > Y) + P(X = Y) / 2 over all pairs of runs (the Mann-Whitney statistic, as in rliable)."""
    a, b = np.asarray(x, dtype=float)[:, None], np.asarray(y, dtype=float)[None, :]
    if not higher_is_better:
        a, b = -a, -b
    return float(np.mean((a > b) + 0.5 * (a == b)))
