"""Known answers of the auditing arithmetic: Clopper-Pearson, mu-GDP, the empirical lower bound."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from iclrbench.benchmarks.dp_hidden_state_audit import (
    audit_lower_bound,
    audit_mu_lower,
    best_threshold,
    clopper_pearson_upper,
    gdp_delta,
    gdp_epsilon,
    mu_for_epsilon,
)


@given(st.integers(1, 100_000))
def test_clopper_pearson_at_zero_errors_is_its_closed_form(n: int) -> None:
    assert clopper_pearson_upper(np.array([0]), n)[0] == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-9)


@settings(max_examples=30)
@given(st.integers(1, 500), st.floats(0.0, 1.0))
def test_clopper_pearson_upper_is_above_the_rate(n: int, fraction: float) -> None:
    k = int(fraction * n)
    upper = clopper_pearson_upper(np.array([k]), n)[0]
    assert k / n <= upper <= 1.0


@settings(max_examples=30)
@given(st.floats(0.05, 8.0), st.sampled_from([1e-5, 1e-3]))
def test_gdp_epsilon_inverts_delta(mu: float, delta: float) -> None:
    eps = gdp_epsilon(mu, delta)
    if eps > 0:
        assert gdp_delta(eps, mu) == pytest.approx(delta, rel=1e-6, abs=1e-12)
    assert mu_for_epsilon(eps, delta) == pytest.approx(mu, rel=1e-6) if eps > 0.01 else True


def test_gdp_epsilon_grows_with_mu_and_matches_a_reference_value() -> None:
    values = [gdp_epsilon(mu, 1e-5) for mu in (0.5, 1.0, 2.0, 4.0)]
    assert values == sorted(values)
    # mu = 1 at delta = 1e-5: delta(eps) = Phi(-eps + 1/2) - e^eps Phi(-eps - 1/2)
    eps = values[1]
    assert norm.cdf(-eps + 0.5) - math.exp(eps) * norm.cdf(-eps - 0.5) == pytest.approx(1e-5, rel=1e-6)


def test_accountant_closed_form_agrees_with_opacus_prv() -> None:
    """Known batches: n Gaussian mechanisms compose to mu = sqrt(n) / sigma exactly."""
    from opacus.accountants import PRVAccountant, RDPAccountant

    sigma, steps, delta = 8.0, 250, 1e-5
    prv, rdp = PRVAccountant(), RDPAccountant()
    for acc in (prv, rdp):
        acc.history = [(sigma, 1.0, steps)]
    closed = gdp_epsilon(math.sqrt(steps) / sigma, delta)
    assert prv.get_epsilon(delta) == pytest.approx(closed, rel=0.02)
    assert rdp.get_epsilon(delta) >= closed  # RDP is an upper bound, looser


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
def test_lower_bound_on_gaussian_scores_is_below_and_close_to_the_truth(mu: float) -> None:
    rng = np.random.default_rng(0)
    n = 200_000
    mu_hat, eps_hat = audit_lower_bound(rng.normal(mu, 1, n), rng.normal(0, 1, n), 1e-5)
    eps_true = gdp_epsilon(mu, 1e-5)
    assert mu_hat <= mu and eps_hat <= eps_true
    assert eps_hat >= 0.85 * eps_true


def test_lower_bound_is_zero_when_worlds_are_identical() -> None:
    rng = np.random.default_rng(1)
    mu_hat, eps_hat = audit_lower_bound(rng.normal(size=1000), rng.normal(size=1000), 1e-5)
    assert eps_hat < 0.5 and mu_hat < 0.5


def _excess_rates(runs: int, mu: float, repetitions: int = 1000) -> tuple[float, float]:
    """P(mu_lower > mu) over audits of Gaussian scores with known mu, for the held-out bound and for
    the best-of-all-thresholds figure on the same runs. epsilon(mu) is increasing, so this is also
    P(eps_lower > eps)."""
    rng = np.random.default_rng(runs + int(100 * mu))
    scores_in, scores_out = (
        rng.normal(mu, 1.0, (repetitions, runs)),
        rng.normal(0.0, 1.0, (repetitions, runs)),
    )
    valid = audit_mu_lower(scores_in, scores_out)
    naive = np.maximum(best_threshold(scores_in, scores_out)[1], 0.0)
    return float(np.mean(valid > mu)), float(np.mean(naive > mu))


@pytest.mark.parametrize("mu", [1.0, 2.0])
def test_held_out_bound_exceeds_the_true_epsilon_at_most_6_percent_of_the_time_at_1000_runs(
    mu: float,
) -> None:
    valid, naive = _excess_rates(1000, mu)
    assert valid <= 0.06, valid
    assert naive > 0.06, naive  # the best threshold on the same runs is not a 95% bound (the test can fail)


@pytest.mark.slow
@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
def test_held_out_bound_exceeds_the_true_epsilon_at_most_6_percent_of_the_time_at_5000_runs(
    mu: float,
) -> None:
    valid, naive = _excess_rates(5000, mu)
    assert valid <= 0.06, valid
    assert naive > 0.06, naive


def test_best_threshold_handles_ties_and_batches() -> None:
    rng = np.random.default_rng(3)
    scores_in, scores_out = (
        np.round(rng.normal(1.0, 1.0, (4, 300)), 1),
        np.round(rng.normal(size=(4, 300)), 1),
    )
    thresholds, mus = best_threshold(scores_in, scores_out)
    for i in range(4):  # the batch equals one audit at a time, and the threshold's counts give its mu
        t, m = best_threshold(scores_in[i], scores_out[i])
        assert (t, m) == (thresholds[i], mus[i])
        fp, fn = int((scores_out[i] >= t).sum()), int((scores_in[i] < t).sum())
        fpr, fnr = (
            clopper_pearson_upper(np.array([fp]), 300)[0],
            clopper_pearson_upper(np.array([fn]), 300)[0],
        )
        assert m == pytest.approx(norm.ppf(1 - fpr) - norm.ppf(fnr))
