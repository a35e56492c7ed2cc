from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.core import stats


def test_iqm_discards_the_outer_quartiles() -> None:
    assert stats.iqm(np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 1000.0])) == 3.5


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=30))
def test_bootstrap_ci_brackets_the_sample_mean(values: list[float]) -> None:
    lo, hi = stats.stratified_bootstrap_ci(np.array(values), reps=500)
    mean = float(np.mean(values))
    assert lo <= mean + 1e-9 and mean - 1e-9 <= hi
    assert min(values) - 1e-9 <= lo <= hi <= max(values) + 1e-9


def test_bootstrap_ci_covers_the_true_mean_at_the_nominal_rate() -> None:
    rng = np.random.default_rng(0)
    covered = 0
    for trial in range(200):
        sample = rng.normal(1.0, 1.0, size=30)
        lo, hi = stats.stratified_bootstrap_ci(sample, reps=1000, seed=trial)
        covered += lo <= 1.0 <= hi
    assert covered / 200 >= 0.90  # nominal 0.95; percentile intervals run a little narrow at n = 30


def test_stratified_resampling_keeps_strata_apart() -> None:
    # two strata with no spread inside each: every resample has the same overall mean
    scores = np.column_stack([np.zeros(5), np.full(5, 10.0)])
    assert stats.stratified_bootstrap_ci(scores) == (5.0, 5.0)


def test_band_has_the_curve_shape_and_orders() -> None:
    curves = np.random.default_rng(1).normal(size=(6, 40)).cumsum(axis=1)
    mean, lo, hi = stats.bootstrap_band(curves)
    assert mean.shape == lo.shape == hi.shape == (40,)
    assert np.all(lo <= mean + 1e-12) and np.all(mean <= hi + 1e-12)


def test_probability_of_improvement() -> None:
    assert stats.probability_of_improvement(np.array([2.0, 3.0]), np.array([0.0, 1.0])) == 1.0
    assert stats.probability_of_improvement(np.array([2.0, 3.0]), np.array([0.0, 1.0]), False) == 0.0
    assert stats.probability_of_improvement(np.array([1.0]), np.array([1.0])) == 0.5
