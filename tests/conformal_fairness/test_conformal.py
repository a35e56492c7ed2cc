"""The conformal math (iclrbench.algorithms.conformal_fairness.conformal): scores, q_hat, the fairness
filters, the vectorised lambda search against the paper code's loop, and split / Mondrian CP against
crepes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.algorithms.conformal_fairness import conformal as cp
from iclrbench.baselines import conformal_fairness as baselines


def _problem(seed: int, n: int = 300, k: int = 3, g: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores from Dirichlet probabilities, labels drawn from them, groups that shift the labels."""
    rng = np.random.default_rng(seed)
    groups = rng.integers(g, size=n)
    probs = np.vstack([rng.dirichlet(np.ones(k) * (0.5 + 1.5 * gi)) for gi in groups])
    labels = np.array([rng.choice(k, p=p) for p in probs])
    return cp.aps_scores(probs, rng.uniform(size=n)), labels, groups


def test_q_hat_is_the_conformal_order_statistic() -> None:
    scores = np.arange(1, 101) / 100.0  # 0.01 .. 1.00
    assert cp.conformal_quantile(scores, 0.1) == pytest.approx(0.91)  # ceil(101 * 0.9) = 91st
    assert cp.conformal_quantile(scores[:5], 0.1) == math.inf  # ceil(6 * 0.9) = 6 > 5
    assert cp.conformal_quantile(scores[:9], 0.1) == pytest.approx(0.09)  # ceil(10 * 0.9) = 9


@given(st.integers(20, 400), st.sampled_from([0.05, 0.1, 0.2]), st.integers(0, 10_000))
@settings(max_examples=25, deadline=None)
def test_split_cp_covers_at_least_1_minus_alpha(n: int, alpha: float, seed: int) -> None:
    """Marginal coverage over many exchangeable draws lies in [1 - alpha, 1 - alpha + 1/(n+1)] (Vovk),
    up to the Monte Carlo error of 4000 draws."""
    rng = np.random.default_rng(seed)
    cal, test = rng.random((4000, n)), rng.random(4000)
    q = np.array([cp.conformal_quantile(row, alpha) for row in cal])
    coverage = float((test <= q).mean())
    slack = 4 * math.sqrt(alpha * (1 - alpha) / 4000)
    assert 1 - alpha - slack <= coverage <= 1 - alpha + 1 / (n + 1) + slack


@given(st.integers(0, 10_000))
@settings(max_examples=30, deadline=None)
def test_aps_scores_are_cumulative_probabilities(seed: int) -> None:
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(5), size=20)
    s = cp.aps_scores(probs)  # u = 1: the probability of the label and every label ranked above it
    assert np.all((s >= 0) & (s <= 1 + 1e-12))
    order = np.argsort(-probs, axis=1, kind="stable")
    ranked = np.take_along_axis(s, order, axis=1)
    assert np.allclose(ranked, np.minimum(np.cumsum(np.take_along_axis(probs, order, 1), axis=1), 1))
    assert np.allclose(cp.tps_scores(probs), 1 - probs)


def test_sets_grow_with_the_threshold() -> None:
    s, _, _ = _problem(0)
    small, big = cp.prediction_sets(s, 0.3), cp.prediction_sets(s, 0.7)
    assert np.all(big >= small) and big.sum() > small.sum()


@pytest.mark.parametrize("metric", cp.FILTERS)
@given(seed=st.integers(0, 10_000), c=st.sampled_from([0.05, 0.1, 0.2]))
@settings(max_examples=8, deadline=None)
def test_vectorised_search_equals_the_loop(metric: str, seed: int, c: float) -> None:
    s, labels, groups = _problem(seed, n=120)
    c = 0.8 if metric == "disparate_impact" else c
    kwargs = {"alpha": 0.1, "c": c, "metric": metric, "n_groups": 2}
    fast = cp.fair_thresholds(s, labels, groups, **kwargs)
    slow = cp.fair_thresholds_loop(s, labels, groups, **kwargs)
    assert np.array_equal(fast[0], slow[0]) and fast[1] == slow[1] and np.array_equal(fast[2], slow[2])


@pytest.mark.parametrize("metric", cp.FILTERS)
def test_lambda_hat_is_never_below_q_hat_and_meets_the_target_on_calibration(metric: str) -> None:
    for seed in range(5):
        s, labels, groups = _problem(seed)
        c = 0.8 if metric == "disparate_impact" else 0.1
        lam, q_hat, feasible = cp.fair_thresholds(
            s, labels, groups, alpha=0.1, c=c, metric=metric, n_groups=2
        )
        assert np.all(lam >= q_hat)
        # where feasible, the calibration-set rates themselves (inside the bounds) meet the target
        # (predictive parity too: the test-time |PPV - prior| spread is at most the signed one bracketed)
        if feasible.all():
            sets = cp.prediction_sets(s, lam)
            violation = cp.fairness_violation(metric, sets, labels, groups, 3, 2)
            assert cp.satisfied(metric, violation, c)


def test_fairness_violation_of_a_known_example() -> None:
    # two groups of four points, binary labels; label 1 is in the set of 3/4 of group 0 and 1/4 of group 1
    sets = np.array([[1, 1], [1, 1], [1, 1], [1, 0], [1, 1], [1, 0], [1, 0], [1, 0]], bool)
    labels = np.array([1, 1, 0, 0, 1, 0, 0, 1])
    groups = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    assert cp.fairness_violation("demographic_parity", sets, labels, groups, 2, 2) == pytest.approx(0.5)
    # true-positive rates: group 0: 2/2, group 1: 1/2
    assert cp.fairness_violation("equal_opportunity", sets, labels, groups, 2, 2) == pytest.approx(0.5)
    # false-positive rates: group 0: 1/2, group 1: 0/2
    assert cp.fairness_violation("predictive_equality", sets, labels, groups, 2, 2) == pytest.approx(0.5)
    # coverage of the true label: group 0: 4/4, group 1: 3/4 (its last point's label 1 is left out)
    assert cp.fairness_violation("overall_accuracy_equality", sets, labels, groups, 2, 2) == 0.25
    # P(1 in C): 3/4 vs 1/4 -> ratio 1/3
    assert cp.fairness_violation("disparate_impact", sets, labels, groups, 2, 2) == pytest.approx(2 / 3)
    assert not cp.satisfied("disparate_impact", 2 / 3, 0.8) and cp.satisfied("demographic_parity", 0.05, 0.1)


def test_an_unattainable_target_keeps_every_label() -> None:
    s, labels, groups = _problem(1, n=60)
    lam, _q_hat, feasible = cp.fair_thresholds(
        s, labels, groups, alpha=0.1, c=1e-4, metric="demographic_parity", n_groups=2
    )
    assert not feasible[1:].any()
    assert np.all(lam[1:] == np.inf)  # every set holds every positive label, whatever its score
    assert cp.prediction_sets(s + 1.0, lam)[:, 1:].all()


def test_an_infinite_q_hat_keeps_every_label() -> None:
    """Too few calibration points for 1 - alpha (ceil((n+1)(1-alpha)) > n): q_hat and lam_hat are inf."""
    s, labels, groups = _problem(2, n=50)
    lam, q_hat, _ = cp.fair_thresholds(
        s, labels, groups, alpha=0.01, c=0.1, metric="demographic_parity", n_groups=2
    )
    assert q_hat == np.inf and np.all(lam == np.inf)


def test_batch_gcp_covers_each_group_at_1_minus_alpha() -> None:
    """At the pinball-loss optimum, each group's calibration coverage is 1 - alpha within
    (parameters) / (group size): the first-order condition of the LP (Jung et al., Thm 4.1)."""
    rng = np.random.default_rng(3)
    n = 2000
    groups = rng.integers(3, size=n)
    true = rng.random(n) ** (1 + groups)  # group-dependent score distributions
    scores = true[:, None]
    indicators = np.eye(3)[groups]
    theta = baselines.batch_gcp_thresholds(scores, np.zeros(n, int), indicators, alpha=0.1)
    f = theta[0] + indicators @ theta[1:]
    for g in range(3):
        in_g = groups == g
        assert abs((true[in_g] <= f[in_g] + 1e-9).mean() - 0.9) <= 4 / in_g.sum() + 1e-9


def test_split_and_mondrian_cp_match_crepes() -> None:
    """Same scores, same sets as crepes's ConformalClassifier, standard and Mondrian, with its unsmoothed
    p-values ((#{cal >= s} + 1) / (n + 1) >= alpha is the same rule as s <= q_hat)."""
    from crepes import ConformalClassifier

    s, labels, groups = _problem(7, n=500)
    cal, test = np.arange(250), np.arange(250, 500)
    true = cp.true_label_scores(s[cal], labels[cal])

    standard = ConformalClassifier().fit(true)
    ours = cp.prediction_sets(s[test], cp.conformal_quantile(true, 0.1))
    theirs = standard.predict_set(s[test], confidence=0.9, smoothing=False).astype(bool)
    assert np.array_equal(ours, theirs)

    mondrian = ConformalClassifier().fit(true, bins=groups[cal])
    q = baselines.mondrian_thresholds(s[cal], labels[cal], groups[cal], 0.1, 2)
    ours = s[test] <= q[groups[test]][:, None]
    theirs = mondrian.predict_set(s[test], bins=groups[test], confidence=0.9, smoothing=False).astype(bool)
    assert np.array_equal(ours, theirs)


def test_predictive_parity_of_a_known_example_is_ppv_less_prior() -> None:
    # group 0: label 1 held by points 0, 1, 3 (two of them Y = 1), prior 2/4 -> |2/3 - 1/2| = 1/6
    # group 1: label 1 held by points 4, 7 (both Y = 1), prior 2/4 -> |1 - 1/2| = 1/2
    sets = np.array([[1, 1], [1, 1], [1, 0], [1, 1], [0, 1], [1, 0], [1, 0], [0, 1]], bool)
    labels = np.array([1, 1, 0, 0, 1, 0, 0, 1])
    groups = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    rate, n = cp.group_coverages("predictive_parity", sets, labels, groups, 1, 2)
    assert rate == pytest.approx([1 / 6, 1 / 2]) and n.tolist() == [4, 4]
    assert cp.fairness_violation("predictive_parity", sets, labels, groups, 2, 2) == pytest.approx(1 / 3)


def test_predictive_parity_bracket_holds_the_calibration_rate() -> None:
    # the Bayes bracket of PPV - prior contains the calibration set's own PPV - prior at every candidate
    s, labels, groups = _problem(3, n=200)
    lams = np.quantile(s[:, 1], [0.2, 0.5, 0.8])
    for g in range(2):
        in_g = groups == g
        lower, upper = cp._pp_bounds(s[in_g, 1], labels[in_g] == 1, lams)
        for lam, lo, hi in zip(lams, lower, upper, strict=True):
            holds = s[in_g, 1] <= lam
            ppv = (holds & (labels[in_g] == 1)).sum() / holds.sum()
            assert lo <= ppv - (labels[in_g] == 1).mean() <= hi
