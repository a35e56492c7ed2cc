"""The one decision rule every claim uses: a verdict with a controlled error rate at 3-10 seeds.

A claim is a statement about a quantity measured once per seed: a metric ("d_sg <= 0.2"), a per-seed
difference between two algorithms on the same environment ("GameOpt beats random search"), or a per-seed
statistic such as a log-log slope ("slope in [0.55, 0.8]"). The rule:

- the quantity's two-sided 95% Student-t interval is computed over seeds (for two algorithms: on the
  per-seed differences where both ran the same seeds, since the task gives both the same environment for
  a seed -- a paired interval; else Welch's unpaired interval). A one-sample quantity whose values are
  all positive (a regret, a time, a set size, a loss, an FD: skewed metrics) gets the hull of that
  interval and the generalized interval of a log-normal mean (:func:`iclrbench.core.stats.mean_intervals`):
  Student-t alone said "mean <= bound" for a true mean on the bound 16-18% of the time on log-normal(0, 1)
  data; the hull keeps it under 2.5% (tests/core/test_skewed_statistics.py);
- ``reproduced`` when the whole interval lies on the claim's side of its bound, ``not_reproduced`` when
  it lies wholly on the opposite side, ``inconclusive`` otherwise (and from fewer than 2 seeds).
  Each way is a one-sided test at alpha / 2 = 0.025: two identical algorithms are called "A beats B" at
  most 2.5% of the time and "B beats A" at most 2.5%, so either verdict at most 5% (measured in
  tests/core/test_decision.py and tests/core/test_skewed_statistics.py);
- a conjunction ("A beats both B and C", "d_sg <= 0.2 and >= 95% non-trivial") is ``reproduced`` only
  when every part is: an intersection-union test, valid at alpha with each part tested at alpha. It is
  ``not_reproduced`` when any part is; that direction is not corrected for the number of parts: when
  every part barely holds, a false ``not_reproduced`` can reach 1 - 0.975^k (about 5% at k = 2 parts,
  16% at k = 7), so read a conjunction's ``not_reproduced`` with its parts' figures.

The figures (estimate, interval, p-value, seeds, method) go into the claim's ``measured`` dict.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from iclrbench.core import stats
from iclrbench.core.jsonsafe import finite
from iclrbench.core.task import Verdict, mean_of_ok_runs

if TYPE_CHECKING:
    from iclrbench.core.result import RunResult

ALPHA = 0.05
Side = Literal[">", ">=", "<", "<="]
_OPPOSITE = {">": "<=", ">=": "<", "<": ">=", "<=": ">"}


def _fig(x: float) -> float | None:
    """A figure for ``measured``: 4 significant digits; NaN and infinities become None (strict JSON)."""
    return finite(float(f"{x:.4g}"))


_COMPARE = {">": np.greater, ">=": np.greater_equal, "<": np.less, "<=": np.less_equal}


def _verdicts(low: np.ndarray, high: np.ndarray, side: str, bound: float) -> np.ndarray:
    """Element-wise verdicts of intervals [low, high] on ``quantity side bound`` (NaN: inconclusive)."""
    holds, fails = _COMPARE[side], _COMPARE[_OPPOSITE[side]]
    return np.where(
        holds(low, bound) & holds(high, bound),
        "reproduced",
        np.where(fails(low, bound) & fails(high, bound), "not_reproduced", "inconclusive"),
    )


def _t_intervals(
    estimate: np.ndarray, se: np.ndarray, df: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """Student-t intervals; no spread at all (a deterministic count) gives the point itself."""
    from scipy import stats as sps  # here: bench list never loads scipy

    half = np.where(se > 0, sps.t.ppf(1 - alpha / 2, df) * se, 0.0)
    return estimate - half, estimate + half


def threshold_verdicts(
    values: np.ndarray, side: Side, bound: float, alpha: float = ALPHA, *, skew_guard: bool = True
) -> np.ndarray:
    """:func:`threshold`'s verdicts for many data sets at once: ``values`` is (..., seeds)."""
    x = np.asarray(values, dtype=float)
    n = x.shape[-1]
    if n < 2:
        return np.full(x.shape[:-1], "inconclusive")
    if skew_guard:
        low, high = stats.mean_intervals(x, alpha)
    else:
        se = x.std(axis=-1, ddof=1) / math.sqrt(n)
        low, high = _t_intervals(x.mean(axis=-1), se, np.asarray(n - 1), alpha)
    return _verdicts(low, high, side, bound)


def welch_verdicts(
    a: np.ndarray, b: np.ndarray, side: Side, margin: float = 0.0, alpha: float = ALPHA
) -> np.ndarray:
    """:func:`compare`'s unpaired verdicts for many data sets at once: ``a``, ``b`` are (..., seeds)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    na, nb = x.shape[-1], y.shape[-1]
    if na < 2 or nb < 2:
        return np.full(np.broadcast_shapes(x.shape[:-1], y.shape[:-1]), "inconclusive")
    va, vb = x.var(axis=-1, ddof=1) / na, y.var(axis=-1, ddof=1) / nb
    se = np.sqrt(va + vb)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(se > 0, (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1)), 1.0)
    low, high = _t_intervals(x.mean(axis=-1) - y.mean(axis=-1), se, df, alpha)
    return _verdicts(low, high, side, margin)


@dataclasses.dataclass(frozen=True)
class Evidence:
    """One tested statement: ``quantity side bound`` judged on the quantity's interval."""

    verdict: Verdict
    quantity: str
    side: str
    bound: float
    estimate: float
    low: float
    high: float
    p_value: float
    seeds: tuple[int, ...]
    method: str
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The figures for a claim's ``measured`` dict (JSON-safe): ``verdict``, ``claim`` (the statement
        tested), ``effect`` (the quantity's estimate: for two algorithms, the mean difference), ``interval``
        ([low, high]), ``p_value`` (two-sided, of quantity = bound), ``seeds`` (an int, or one per
        group when unpaired), ``method``, and ``reason`` where no interval could be formed."""
        out: dict[str, Any] = {
            "verdict": self.verdict,
            "claim": f"{self.quantity} {self.side} {self.bound:g}",
            "effect": _fig(self.estimate),
            "interval": [_fig(self.low), _fig(self.high)],
            "p_value": _fig(self.p_value),
            "seeds": list(self.seeds) if len(self.seeds) > 1 else self.seeds[0] if self.seeds else 0,
            "method": self.method,
        }
        if self.reason:
            out["reason"] = self.reason
        return out


def _no_interval(
    quantity: str, side: str, bound: float, estimate: float, seeds: tuple[int, ...], method: str, reason: str
) -> Evidence:
    nan = float("nan")
    return Evidence("inconclusive", quantity, side, bound, estimate, nan, nan, nan, seeds, method, reason)


def _from_t(
    quantity: str,
    side: Side,
    bound: float,
    estimate: float,
    se: float,
    df: float,
    seeds: tuple[int, ...],
    method: str,
    alpha: float,
    positive: np.ndarray | None = None,
) -> Evidence:
    lo, hi = _t_intervals(np.asarray(estimate), np.asarray(se), np.asarray(df), alpha)
    low, high = float(lo), float(hi)
    no_spread_p = 1.0 if estimate == bound else 0.0
    from scipy import stats as sps  # here: bench list never loads scipy

    p = float(2 * sps.t.sf(abs(estimate - bound) / se, df)) if se > 0 else no_spread_p
    if positive is not None:  # the hull with the log-normal mean's interval: its bound is the looser of both
        glo, ghi = stats.lognormal_mean_intervals(positive, alpha)
        low, high = min(low, float(glo)), max(high, float(ghi))
        p = max(p, _lognormal_p(positive, bound))
        method = f"{method}, widened to the log-normal mean's generalized interval (values all positive)"
    if not all(math.isfinite(v) for v in (estimate, low, high)):
        return _no_interval(quantity, side, bound, estimate, seeds, method, "a value is not finite")
    verdict = str(_verdicts(np.asarray(low), np.asarray(high), side, bound))
    reason = ""
    if positive is not None and verdict == "inconclusive" and str(_verdicts(lo, hi, side, bound)) != verdict:
        needed = _seeds_needed(positive, side, bound, alpha)
        reason = (
            "positive, possibly skewed values: Student-t alone would decide, the log-normal interval "
            + (f"would from about {needed} seeds at this spread" if needed else "not below 100 seeds")
        )
    return Evidence(verdict, quantity, side, bound, estimate, low, high, p, seeds, method, reason)  # type: ignore[arg-type]


def _seeds_needed(values: np.ndarray, side: Side, bound: float, alpha: float, most: int = 100) -> int | None:
    """The fewest seeds at which the log-normal mean's generalized interval, with the logs' mean and spread
    of ``values``, lies wholly on one side of ``bound`` (how many seeds would settle an inconclusive
    claim); ``None`` if not up to ``most``."""
    logs = np.log(values)
    m, s = float(logs.mean()), float(logs.std(ddof=1))
    rng = np.random.default_rng(0)
    z = rng.standard_normal(stats.GCI_DRAWS)
    for n in range(values.size + 1, most + 1):
        u = rng.chisquare(n - 1, stats.GCI_DRAWS)
        pivot = m - z * s / math.sqrt(n) / np.sqrt(u / (n - 1)) + 0.5 * s**2 * (n - 1) / u
        lo, hi = np.exp(np.quantile(pivot, [alpha / 2, 1 - alpha / 2]))
        if str(_verdicts(np.asarray(lo), np.asarray(hi), side, bound)) != "inconclusive":
            return n
    return None


def threshold(
    values: Sequence[float] | np.ndarray,
    side: Side,
    bound: float,
    *,
    quantity: str = "mean",
    alpha: float = ALPHA,
    skew_guard: bool = True,
) -> Evidence:
    """Judge ``mean(values) side bound`` on the (1 - alpha) interval of the mean over seeds: Student-t,
    widened (``skew_guard``) to hold the log-normal mean's generalized interval where every value is
    positive. Paired differences are judged without the guard: their sign is the claim, not a scale."""
    x = np.asarray(values, dtype=float).ravel()
    method = f"Student-t {1 - alpha:.0%} interval over seeds"
    if x.size < 2:
        est = float(x[0]) if x.size else float("nan")
        return _no_interval(
            quantity, side, bound, est, (int(x.size),), method, "fewer than 2 seeds: no interval"
        )
    se = float(x.std(ddof=1) / math.sqrt(x.size))
    positive = x if skew_guard and bool(np.all(x > 0) and np.all(np.isfinite(x))) else None
    return _from_t(
        quantity, side, bound, float(x.mean()), se, x.size - 1, (int(x.size),), method, alpha, positive
    )


def _lognormal_p(values: np.ndarray, bound: float, draws: int = stats.GCI_DRAWS) -> float:
    """Two-sided p-value of "log-normal mean = bound" from the generalized pivot's draws (the same draws
    as :func:`iclrbench.core.stats.lognormal_mean_intervals`)."""
    if bound <= 0:
        return 0.0  # a positive mean is never on a non-positive bound
    logs = np.log(values)
    n = logs.size
    m, s = float(logs.mean()), float(logs.std(ddof=1))
    rng = np.random.default_rng(0)
    z, u = rng.standard_normal(draws), rng.chisquare(n - 1, draws)
    pivot = m - z * s / math.sqrt(n) / np.sqrt(u / (n - 1)) + 0.5 * s**2 * (n - 1) / u
    below = float(np.mean(pivot <= math.log(bound)))
    return min(1.0, 2 * min(below, 1 - below))


def compare(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    side: Side = ">",
    margin: float = 0.0,
    *,
    paired: bool,
    scale_b: float = 1.0,
    quantity: str = "a - b",
    alpha: float = ALPHA,
) -> Evidence:
    """Judge ``mean(a) - scale_b * mean(b) side margin``.

    ``paired``: ``a[i]`` and ``b[i]`` come from the same seed (same environment), so the interval is the
    Student-t interval of the per-seed differences. Otherwise Welch's interval (unequal variances,
    Welch-Satterthwaite degrees of freedom).
    """
    x, y = np.asarray(a, dtype=float).ravel(), scale_b * np.asarray(b, dtype=float).ravel()
    if paired:
        if x.size != y.size:
            raise ValueError(f"paired comparison of {x.size} and {y.size} values")
        ev = threshold(x - y, side, margin, quantity=quantity, alpha=alpha, skew_guard=False)
        return dataclasses.replace(ev, method=f"paired {ev.method}")
    method = f"Welch {1 - alpha:.0%} interval over seeds (unpaired)"
    if x.size < 2 or y.size < 2:
        sizes = (int(x.size), int(y.size))
        return _no_interval(
            quantity, side, margin, float("nan"), sizes, method, "fewer than 2 seeds in a group"
        )
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1)) if se > 0 else 1.0
    return _from_t(
        quantity, side, margin, float(x.mean() - y.mean()), se, df, (int(x.size), int(y.size)), method, alpha
    )


def metric_values(runs: Sequence[RunResult], metric: str) -> dict[int, float]:
    """Seed -> value of ``metric`` over the successful runs (NaN where a run lacks it)."""
    return {r.seed: float(r.metrics.get(metric, float("nan"))) for r in runs if r.status == "ok"}


def mean_figure(runs: Sequence[RunResult], metric: str) -> float:
    """:func:`~iclrbench.core.task.mean_of_ok_runs` to 4 decimals: a figure a claim reports beside its
    evidence (in ``measured``), not evidence itself."""
    return round(mean_of_ok_runs(runs, metric), 4)


def compare_runs(
    a: Sequence[RunResult],
    b: Sequence[RunResult],
    metric: str,
    side: Side = ">",
    margin: float = 0.0,
    *,
    paired: bool = True,
    scale_b: float = 1.0,
    quantity: str = "",
    metric_b: str | None = None,
    alpha: float = ALPHA,
) -> Evidence:
    """:func:`compare` on two groups of runs: paired on the seeds both groups ran (when ``paired`` and
    they share at least 2 seeds; the task must give both algorithms the same environment for a seed),
    else unpaired. Failed runs are left out."""
    va, vb = metric_values(a, metric), metric_values(b, metric_b or metric)
    shared = sorted(va.keys() & vb.keys())
    label = quantity or (f"{metric}: a - {scale_b:g} b" if scale_b != 1 else f"{metric}: a - b")
    if paired and len(shared) >= 2:
        x, y = [va[s] for s in shared], [vb[s] for s in shared]
        return compare(x, y, side, margin, paired=True, scale_b=scale_b, quantity=label, alpha=alpha)
    x, y = list(va.values()), list(vb.values())
    return compare(x, y, side, margin, paired=False, scale_b=scale_b, quantity=label, alpha=alpha)


def combine(parts: Mapping[str, Evidence], **extra: Any) -> tuple[Verdict, dict[str, Any]]:
    """All parts must hold: ``reproduced`` when every part is, ``not_reproduced`` when any part is,
    else ``inconclusive``. Returns the verdict and the ``measured`` dict (one entry per part, plus
    ``extra`` figures); the rule is named under ``"rule"``."""
    verdicts = [p.verdict for p in parts.values()]
    verdict: Verdict
    if verdicts and all(v == "reproduced" for v in verdicts):
        verdict = "reproduced"
    elif any(v == "not_reproduced" for v in verdicts):
        verdict = "not_reproduced"
    else:
        verdict = "inconclusive"
    measured: dict[str, Any] = {name: p.as_dict() for name, p in parts.items()}
    measured.update(extra)
    measured["rule"] = (
        f"each part's {1 - ALPHA:.0%} interval over seeds wholly on the claim's side (every part) or "
        "wholly on the other side (any part)"
    )
    return verdict, measured


def empty(reason: str, **extra: Any) -> tuple[Verdict, dict[str, Any]]:
    """``inconclusive`` with a reason (a group without successful runs, too few seeds, ...)."""
    return "inconclusive", {"reason": reason, **extra}
