"""Split conformal prediction and Conformal Fairness (Vadlamani et al., "A generic framework for conformal
fairness", ICLR 2025), in numpy over whole calibration sets.

Conventions (section 3 of the paper): a score ``S[i, y]`` is large when label ``y`` conforms badly to
point ``i``; the prediction set at thresholds ``lam`` (one per label) is ``C(x) = {y : S[x, y] <= lam[y]}``.

Conformal Fairness (section 4, Algorithm 1): for each positive label ``y`` and each group ``g`` the fairness
filter selects calibration points (:data:`FILTERS`); the share of them whose set contains ``y`` at a
candidate ``lam`` is bracketed by the finite-sample interval ``[k/(n+1), (k+1)/(n+1)]`` (``k`` of the ``n``
selected scores at or below ``lam``, the exchangeability bound of Lemma 4.1); a ``lam`` is fair for ``y``
when the widest gap between groups, ``max_g upper - min_g lower``, is at most ``c`` (for disparate impact:
``min_g lower / max_g upper >= c``; for predictive parity the bracket of ``PPV - prior`` the paper's code
builds by Bayes from three such intervals, :func:`_pp_bounds`). The class-wise ``lam_hat[y]`` is the
smallest fair candidate at or above the split-CP quantile ``q_hat``, so marginal coverage is never given
up (Theorem 4.2).

:func:`fair_thresholds` evaluates every candidate at once: each (group, label) selection is sorted once and
every candidate is located by ``searchsorted``. :func:`fair_thresholds_loop` is the paper code's loop
(one pass over groups and labels per candidate, re-selecting and re-sorting each time), kept to check and to
time the vectorised one against.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from iclrbench.envs.conformal_fairness import FILTERS, positive_labels

Array = np.ndarray


# ---------------------------------------------------------------------------------------------- scores
def tps_scores(probs: Array) -> Array:
    """Threshold score (Sadinle et al. 2019): ``1 - p_y(x)``."""
    return 1.0 - np.asarray(probs, dtype=np.float64)


def aps_scores(probs: Array, u: Array | None = None) -> Array:
    """Adaptive prediction sets score (Romano et al. 2020): the probability of the labels ranked above
    ``y`` plus ``u * p_y`` (``u`` uniform per point: randomised APS; ``u = 1``: deterministic)."""
    p = np.asarray(probs, dtype=np.float64)
    order = np.argsort(-p, axis=1, kind="stable")
    sorted_p = np.take_along_axis(p, order, axis=1)
    above = np.cumsum(sorted_p, axis=1) - sorted_p
    u = np.ones(len(p)) if u is None else np.asarray(u, dtype=np.float64)
    out = np.empty_like(p)
    np.put_along_axis(out, order, above + u[:, None] * sorted_p, axis=1)
    return np.minimum(out, 1.0)


SCORES: dict[str, Callable[..., Array]] = {"tps": tps_scores, "aps": aps_scores}


def scores(name: str, probs: Array, rng: np.random.Generator) -> Array:
    """The named score of ``probs``; APS draws its per-point ``u`` from ``rng``."""
    if name == "aps":
        return aps_scores(probs, rng.uniform(size=len(probs)))
    if name == "tps":
        return tps_scores(probs)
    raise ValueError(f"unknown score {name!r}; choose one of {', '.join(SCORES)}")


# --------------------------------------------------------------------------------------------- split CP
def conformal_quantile(true_scores: Array, alpha: float) -> float:
    """``q_hat``: the ``ceil((n + 1)(1 - alpha))``-th smallest calibration score (Vovk et al. 2005; the
    exact order statistic, one below the paper code's ``torch.quantile(..., "higher")``), or ``inf``
    when that rank exceeds ``n`` (every set is then every label)."""
    s = np.sort(np.asarray(true_scores, dtype=np.float64))
    k = math.ceil((len(s) + 1) * (1 - alpha))
    return float("inf") if k > len(s) or len(s) == 0 else float(s[k - 1])


def true_label_scores(score: Array, labels: Array) -> Array:
    return np.take_along_axis(score, np.asarray(labels)[:, None], axis=1)[:, 0]


def prediction_sets(score: Array, thresholds: Array | float) -> Array:
    """Boolean (n, K): label ``y`` is in point ``i``'s set when ``score[i, y] <= thresholds[y]``."""
    return score <= np.broadcast_to(np.asarray(thresholds, dtype=np.float64), score.shape[1:])


# ------------------------------------------------------------------------------------ fairness measures
def _selection(metric: str, labels: Array, y: int) -> Array | None:
    """Which points a gap metric's coverage for label ``y`` is taken over (None: all of the group)."""
    if metric == "equal_opportunity":
        return labels == y
    if metric == "predictive_equality":
        return labels != y
    return None


def group_coverages(
    metric: str, sets: Array, labels: Array, groups: Array, y: int, n_groups: int
) -> tuple[Array, Array]:
    """Per group, the empirical rate the metric equalises for label ``y`` on (test) points, and how many
    points it was taken over (0 where the group selected none: the rate is then NaN)."""
    if metric == "overall_accuracy_equality":
        hit = true_label_scores(sets.astype(np.int8), labels).astype(bool)
        chosen = np.ones(len(labels), bool)
    elif metric == "predictive_parity":
        return _ppv_less_prior(sets, labels, groups, y, n_groups)
    else:
        hit = sets[:, y]
        chosen = np.ones(len(labels), bool) if (sel := _selection(metric, labels, y)) is None else sel
    n = np.bincount(groups[chosen], minlength=n_groups)
    k = np.bincount(groups[chosen & hit], minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return k / n, n


def _ppv_less_prior(sets: Array, labels: Array, groups: Array, y: int, n_groups: int) -> tuple[Array, Array]:
    """Predictive parity's per-group rate as the paper's code measures it (``utils.py``, its predictive
    parity branch): ``|PPV_g - prior_g|`` with ``PPV_g = TPR_g prior_g / P_g[y in C]`` (Bayes) and
    ``prior_g = P_g[Y = y]``; counts are the group's sizes (NaN where a group holds no set with ``y``)."""
    n = np.bincount(groups, minlength=n_groups)
    positives = np.bincount(groups[labels == y], minlength=n_groups)
    holds = np.bincount(groups[sets[:, y]], minlength=n_groups)
    hits = np.bincount(groups[sets[:, y] & (labels == y)], minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        prior = positives / n
        ppv = (hits / positives) * prior / (holds / n)
        rate = np.where(holds > 0, np.abs(ppv - prior), np.nan)
    return rate, n


def fairness_violation(
    metric: str, sets: Array, labels: Array, groups: Array, n_classes: int, n_groups: int
) -> float:
    """The test-time violation (lower is better): the largest over positive labels of the max-min gap
    between groups' rates (equalized odds: the larger of its two gaps); for disparate impact
    ``1 - min_g / max_g`` of P[y in C | g]. Groups with no selected test point are left out."""
    worst = 0.0
    parts = ("equal_opportunity", "predictive_equality") if metric == "equalized_odds" else (metric,)
    for y in positive_labels(metric, n_classes):
        for part in parts:
            base = "demographic_parity" if part == "disparate_impact" else part
            rate, _ = group_coverages(base, sets, labels, groups, y, n_groups)
            rate = rate[np.isfinite(rate)]
            if len(rate) < 2:
                continue
            if part == "disparate_impact":
                gap = 1.0 - (rate.min() / rate.max() if rate.max() > 0 else 1.0)
            else:
                gap = float(rate.max() - rate.min())
            worst = max(worst, gap)
    return float(worst)


def satisfied(metric: str, violation: float, c: float) -> bool:
    """Whether a violation meets the target: ``<= c`` for gaps, ``<= 1 - c`` for disparate impact."""
    return violation <= (1 - c if metric == "disparate_impact" else c) + 1e-12


# ---------------------------------------------------------------------------------- lambda search
def candidate_thresholds(cal_score: Array, q_hat: float, max_candidates: int | None = None) -> Array:
    """Candidate ``lam``: ``q_hat`` and every distinct calibration score above it (thinned to at most
    about ``max_candidates`` evenly spaced ones when given, as the paper's code keeps ~500-1000), ending at
    ``inf`` (every set holds every label: the fallback where no finite candidate is fair)."""
    if not math.isfinite(q_hat):
        return np.array([math.inf])
    values = np.unique(cal_score[np.isfinite(cal_score)])
    values = values[values > q_hat]
    if max_candidates is not None and len(values) > max_candidates:
        step = -(-len(values) // max_candidates)
        values = np.append(values[::step], values[-1])
    return np.concatenate([[q_hat], values, [math.inf]])


def _rate_bounds(sorted_scores: Array, lams: Array) -> tuple[Array, Array]:
    """For every candidate, the interval ``[k/(n+1), (k+1)/(n+1)]`` (capped at 1) on the share of a
    selection whose scores are ``<= lam`` (``n = 0``: the vacuous [0, 1])."""
    n = len(sorted_scores)
    k = np.searchsorted(sorted_scores, lams, side="right")
    return k / (n + 1), np.minimum((k + 1) / (n + 1), 1.0)


def _fair_mask(lower: Array, upper: Array, metric: str, c: float) -> Array:
    """(G, L) bounds -> (L,) whether each candidate meets the target."""
    if metric == "disparate_impact":
        with np.errstate(invalid="ignore", divide="ignore"):
            return lower.min(0) / upper.max(0) >= c - 1e-12
    return upper.max(0) - lower.min(0) <= c + 1e-12


def _pp_bounds(scores_y: Array, hit: Array, lams: Array) -> tuple[Array, Array]:
    """Predictive parity in one group, bracketed as the paper's code does (``_satisfies_lambda_pp``): by
    Bayes, ``PPV = TPR prior / P[y in C]``, from the brackets of the true-positive rate (the equal
    opportunity selection), of ``P[y in C]`` (the demographic parity one) and of the prior ``P[Y = y]``
    (``[k/(n+1), (k+1)/(n+1)]`` each), and the quantity bracketed is ``PPV - prior``:
    ``[TPR_lo prior_lo / DP_hi - prior_hi, TPR_hi prior_hi / DP_lo - prior_lo]`` (``inf`` where no point's
    set holds ``y``: such a candidate is never fair)."""
    n = len(scores_y)
    tpr_lo, tpr_hi = _rate_bounds(np.sort(scores_y[hit]), lams)
    dp_lo, dp_hi = _rate_bounds(np.sort(scores_y), lams)
    prior_lo = hit.sum() / (n + 1)
    prior_hi = prior_lo + 1 / (n + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ppv_hi = np.where(dp_lo > 0, tpr_hi * prior_hi / dp_lo, np.inf)
        ppv_lo = tpr_lo * prior_lo / dp_hi
    return ppv_lo - prior_hi, ppv_hi - prior_lo


def _label_passes(
    metric: str, cal_score: Array, labels: Array, groups: Array, y: int, n_groups: int, lams: Array, c: float
) -> Array:
    """(L,) for label ``y``: every candidate's verdict under ``metric``, vectorised over candidates."""
    if metric == "equalized_odds":
        return _label_passes("equal_opportunity", cal_score, labels, groups, y, n_groups, lams, c) & (
            _label_passes("predictive_equality", cal_score, labels, groups, y, n_groups, lams, c)
        )
    lower, upper = np.empty((n_groups, len(lams))), np.empty((n_groups, len(lams)))
    base = "demographic_parity" if metric == "disparate_impact" else metric
    for g in range(n_groups):
        in_g = groups == g
        if base == "predictive_parity":
            lower[g], upper[g] = _pp_bounds(cal_score[in_g, y], labels[in_g] == y, lams)
            continue
        if base == "overall_accuracy_equality":
            chosen = true_label_scores(cal_score[in_g], labels[in_g])
        else:
            sel = _selection(base, labels, y)
            chosen = cal_score[in_g if sel is None else in_g & sel, y]
        lower[g], upper[g] = _rate_bounds(np.sort(chosen), lams)
    return _fair_mask(lower, upper, metric, c)


def fair_thresholds(
    cal_score: Array,
    labels: Array,
    groups: Array,
    *,
    alpha: float,
    c: float,
    metric: str,
    n_groups: int,
    max_candidates: int | None = None,
) -> tuple[Array, float, Array]:
    """Conformal Fairness's class-wise thresholds (Algorithm 1).

    Returns ``(lam_hat, q_hat, feasible)``: ``lam_hat[y]`` the smallest candidate ``>= q_hat`` that is fair
    for ``y`` (label 0 and labels not enforced keep ``q_hat``; overall accuracy equality sets one ``lam``
    for all labels); ``feasible[y]`` False where no candidate is fair, ``lam_hat[y]`` then being ``inf``
    (every set holds ``y``)."""
    labels, groups = np.asarray(labels), np.asarray(groups)

    def verdicts(lams: Array, enforced: list[int]) -> Array:
        return np.stack(
            [_label_passes(metric, cal_score, labels, groups, y, n_groups, lams, c) for y in enforced], axis=1
        )

    return _lambda_search(cal_score, labels, alpha, metric, max_candidates, verdicts)


def _lambda_search(
    cal_score: Array,
    labels: Array,
    alpha: float,
    metric: str,
    max_candidates: int | None,
    verdicts: Callable[[Array, list[int]], Array],
) -> tuple[Array, float, Array]:
    """The step both searches share: ``verdicts(candidates, enforced labels)`` is the (L, labels) table of
    which candidate is fair for which label; each label takes its first fair candidate, else ``inf``."""
    n_classes = cal_score.shape[1]
    q_hat = conformal_quantile(true_label_scores(cal_score, labels), alpha)
    lams = candidate_thresholds(cal_score, q_hat, max_candidates)
    enforced = positive_labels(metric, n_classes)
    table = np.asarray(verdicts(lams, enforced), dtype=bool).reshape(len(lams), len(enforced))
    lam_hat, feasible = np.full(n_classes, q_hat), np.ones(n_classes, bool)
    for j, y in enumerate(enforced):
        ok = table[:, j]
        chosen = lams[int(np.argmax(ok))] if ok.any() else lams[-1]
        if metric == "overall_accuracy_equality":  # one threshold for every label
            lam_hat[:], feasible[:] = chosen, bool(ok.any())
        else:
            lam_hat[y], feasible[y] = chosen, bool(ok.any())
    return lam_hat, q_hat, feasible


def _rates_by_counting(
    metric: str, cal_score: Array, labels: Array, groups: Array, y: int, g: int, lam: float
) -> tuple[float, float]:
    """One group's bracket at one ``lam``, counted point by point as the paper's code does (the filter
    rebuilt, the selection re-sliced and compared with ``lam``): written apart from the vectorised path
    so that each checks the other."""
    in_g = groups == g
    if metric == "predictive_parity":  # Bayes from three brackets, point by point (see _pp_bounds)
        n, positive = int(in_g.sum()), in_g & (labels == y)
        m, tp = int(positive.sum()), int((positive & (cal_score[:, y] <= lam)).sum())
        held = int((in_g & (cal_score[:, y] <= lam)).sum())
        prior_lo, prior_hi = m / (n + 1), (m + 1) / (n + 1)
        tpr_lo, tpr_hi = tp / (m + 1), min((tp + 1) / (m + 1), 1.0)
        dp_lo, dp_hi = held / (n + 1), min((held + 1) / (n + 1), 1.0)
        ppv_hi = tpr_hi * prior_hi / dp_lo if dp_lo > 0 else math.inf
        return tpr_lo * prior_lo / dp_hi - prior_hi, ppv_hi - prior_lo
    if metric == "overall_accuracy_equality":
        chosen = cal_score[in_g, labels[in_g]] if in_g.any() else np.empty(0)
    elif metric == "equal_opportunity":
        chosen = cal_score[in_g & (labels == y), y]
    elif metric == "predictive_equality":
        chosen = cal_score[in_g & (labels != y), y]
    else:  # demographic parity, disparate impact
        chosen = cal_score[in_g, y]
    n, k = len(chosen), int((chosen <= lam).sum())
    return k / (n + 1), min((k + 1) / (n + 1), 1.0)


def _fair_by_counting(
    metric: str, cal_score: Array, labels: Array, groups: Array, y: int, n_groups: int, lam: float, c: float
) -> bool:
    if metric == "equalized_odds":
        return all(
            _fair_by_counting(part, cal_score, labels, groups, y, n_groups, lam, c)
            for part in ("equal_opportunity", "predictive_equality")
        )
    bounds = [_rates_by_counting(metric, cal_score, labels, groups, y, g, lam) for g in range(n_groups)]
    lowest, highest = min(b[0] for b in bounds), max(b[1] for b in bounds)
    if metric == "disparate_impact":
        return highest > 0 and lowest / highest >= c - 1e-12
    return highest - lowest <= c + 1e-12


def fair_thresholds_loop(
    cal_score: Array,
    labels: Array,
    groups: Array,
    *,
    alpha: float,
    c: float,
    metric: str,
    n_groups: int,
    max_candidates: int | None = None,
) -> tuple[Array, float, Array]:
    """:func:`fair_thresholds` as the paper's code computes it: candidate by candidate, every label and
    group's points re-selected and counted. Same result; kept as the independent reference the
    vectorised search is checked and timed against (tests/perf)."""
    labels, groups = np.asarray(labels), np.asarray(groups)

    def verdicts(lams: Array, enforced: list[int]) -> Array:
        # every candidate judged, as the paper's code stacks a verdict per candidate before taking the first
        return np.array(
            [
                [_fair_by_counting(metric, cal_score, labels, groups, y, n_groups, lam, c) for y in enforced]
                for lam in lams
            ]
        )

    return _lambda_search(cal_score, labels, alpha, metric, max_candidates, verdicts)


def coverage_and_size(sets: Array, labels: Array) -> tuple[float, float]:
    """Marginal coverage (the share of sets holding the true label) and mean set size."""
    covered = true_label_scores(sets.astype(np.int8), labels).astype(bool)
    return float(covered.mean()), float(sets.sum(1).mean())


__all__: Sequence[str] = (
    "FILTERS",
    "aps_scores",
    "conformal_quantile",
    "coverage_and_size",
    "fair_thresholds",
    "fair_thresholds_loop",
    "fairness_violation",
    "positive_labels",
    "prediction_sets",
    "tps_scores",
)
