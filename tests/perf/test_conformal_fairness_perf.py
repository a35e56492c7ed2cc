"""Speed of Conformal Fairness's calibration (the lambda search): 10,000 calibration points, 10 classes,
two groups, demographic parity. The vectorised search (each group and label's scores sorted once, every
candidate located by searchsorted) against the paper code's loop over candidates (every group and label
re-selected and re-sorted per candidate), both over the paper code's ~1,000 thinned candidates, and the
vectorised one over every candidate too. ``make perf`` prints them; the note gives the ratio."""

from __future__ import annotations

import numpy as np
import pytest

from iclrbench.algorithms.conformal_fairness import conformal as cp

N, K = 10_000, 10
SEARCH = {"alpha": 0.1, "c": 0.1, "metric": "demographic_parity", "n_groups": 2}


@pytest.fixture(scope="module")
def calibration() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    groups = rng.integers(2, size=N)
    # group 1's probabilities are flatter: split CP's sets hold its labels at other rates, so the search
    # has to go past q_hat (checked below)
    probs = np.vstack([rng.dirichlet(np.ones(K) * (0.3 if g == 0 else 3.0)) for g in groups])
    labels = (probs.cumsum(1) > rng.random(N)[:, None]).argmax(1)
    return cp.aps_scores(probs, rng.uniform(size=N)), labels, groups


def test_vectorised_search_1000_candidates(benchmark, calibration) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "conformal-fairness lambda search, 10,000 x 10"
    lam, q_hat, _ = benchmark(cp.fair_thresholds, *calibration, max_candidates=1000, **SEARCH)
    assert np.all(lam >= q_hat) and np.any(lam > q_hat)  # the search moved past q_hat
    loop = cp.fair_thresholds_loop(*calibration, max_candidates=1000, **SEARCH)
    assert np.array_equal(lam, loop[0])


def test_loop_search_1000_candidates(benchmark, calibration) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "conformal-fairness lambda search, 10,000 x 10"
    lam, q_hat, _ = benchmark.pedantic(
        cp.fair_thresholds_loop, args=calibration, kwargs={"max_candidates": 1000, **SEARCH}, rounds=2
    )
    assert np.all(lam >= q_hat)


def test_vectorised_search_every_candidate(benchmark, calibration) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "conformal-fairness lambda search, 10,000 x 10"
    lam, q_hat, _ = benchmark(cp.fair_thresholds, *calibration, **SEARCH)
    benchmark.extra_info["candidates"] = len(cp.candidate_thresholds(calibration[0], q_hat))
    assert np.all(lam >= q_hat)
