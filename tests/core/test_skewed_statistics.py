"""Intervals and verdicts that keep their promise on skewed metrics (issue 38), by simulation: 4,000 data
sets a cell, vectorised, over normal, t(3), log-normal(0, 0.5) and log-normal(0, 1) data at 2, 3, 5 and 10
seeds.

- the mean's interval (:func:`iclrbench.core.stats.mean_intervals`) covers the true mean at least 0.93 of
  the time in every cell with 3 or more seeds;
- a one-sample claim at its boundary (the true mean on the bound) is called ``reproduced`` at most 5% of
  the time, either direction; so is a two-sample claim between two algorithms with the same mean, paired
  or Welch;
- the negative control: Student-t alone, the rule before, fails both on log-normal(0, 1) data.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from iclrbench.core import decision, stats
from iclrbench.core.task import DECISION_RULE, Claim

REPS = 4000
SEEDS = (2, 3, 5, 10)
#: name -> (a draw of shape (reps, n) from a generator, the true mean)
DISTRIBUTIONS = {
    "normal": (lambda g, shape: g.standard_normal(shape), 0.0),
    "t(3)": (lambda g, shape: g.standard_t(3, shape), 0.0),
    "lognormal(0, 0.5)": (lambda g, shape: g.lognormal(0.0, 0.5, shape), float(np.exp(0.125))),
    "lognormal(0, 1)": (lambda g, shape: g.lognormal(0.0, 1.0, shape), float(np.exp(0.5))),
}
CELLS = [(name, n) for name in DISTRIBUTIONS for n in SEEDS]


def _draw(name: str, n: int, seed: int = 0) -> tuple[np.ndarray, float]:
    draw, mean = DISTRIBUTIONS[name]
    return draw(np.random.default_rng([seed, n, len(name)]), (REPS, n)), mean


def _student_t(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = x.shape[-1]
    half = sps.t.ppf(0.975, n - 1) * x.std(axis=-1, ddof=1) / np.sqrt(n)
    return x.mean(axis=-1) - half, x.mean(axis=-1) + half


@pytest.mark.parametrize(("name", "n"), CELLS)
def test_the_mean_interval_covers_in_every_cell(name: str, n: int) -> None:
    x, mean = _draw(name, n)
    low, high = stats.mean_intervals(x)
    coverage = float(np.mean((low <= mean) & (mean <= high)))
    if n >= 3:
        assert coverage >= 0.93, f"{name}, {n} seeds: coverage {coverage:.3f}"
    else:  # two seeds: reported, not promised (the README says so)
        assert coverage >= 0.90, f"{name}, {n} seeds: coverage {coverage:.3f}"


@pytest.mark.parametrize(("name", "n"), [c for c in CELLS if c[1] >= 3])
@pytest.mark.parametrize("side", ["<=", ">="])
def test_a_one_sample_claim_at_its_boundary_is_rarely_reproduced(name: str, n: int, side: str) -> None:
    x, mean = _draw(name, n, seed=1)
    verdicts = decision.threshold_verdicts(x, side, mean)  # type: ignore[arg-type]
    false = float(np.mean(verdicts == "reproduced"))
    assert false <= 0.05, f"{name}, {n} seeds, mean {side} its own value: reproduced {false:.3f}"


@pytest.mark.parametrize(("name", "n"), [c for c in CELLS if c[1] >= 3])
@pytest.mark.parametrize("side", [">", "<"])
def test_two_algorithms_with_the_same_mean_are_rarely_called_apart(name: str, n: int, side: str) -> None:
    a, _ = _draw(name, n, seed=2)
    b, _ = _draw(name, n, seed=3)
    paired = decision.threshold_verdicts(a - b, side, 0.0, skew_guard=False)  # type: ignore[arg-type]
    welch = decision.welch_verdicts(a, b, side)  # type: ignore[arg-type]
    for how, verdicts in (("paired", paired), ("Welch", welch)):
        false = float(np.mean(verdicts == "reproduced"))
        assert false <= 0.05, f"{name}, {n} seeds, {how} 'a {side} b': reproduced {false:.3f}"


def test_the_one_verdict_judge_agrees_with_the_vectorised_one() -> None:
    x, mean = _draw("lognormal(0, 1)", 5, seed=4)
    for row in x[:200]:
        one = decision.threshold(row, "<=", mean).verdict
        assert one == str(decision.threshold_verdicts(row[None], "<=", mean)[0])


def test_an_inconclusive_skewed_claim_says_how_many_seeds_would_do() -> None:
    evidence = decision.threshold([1.1, 0.9, 1.3], "<=", 2.0)  # Student-t alone: [0.60, 1.60], reproduced
    assert evidence.verdict == "inconclusive"
    assert "seeds" in evidence.reason and "would from about" in evidence.reason


# the negative control: the rule this replaces fails exactly where the issue measured it -------------------
def test_student_t_alone_fails_on_lognormal_data() -> None:
    x, mean = _draw("lognormal(0, 1)", 5)
    low, high = _student_t(x)
    assert float(np.mean((low <= mean) & (mean <= high))) < 0.90
    assert float(np.mean(high < mean)) > 0.10  # "mean <= bound" reproduced for a mean on the bound


def test_the_rule_change_gives_every_claim_a_new_stored_version() -> None:
    claim = Claim("c", "s", requests=lambda budget: [], judge=lambda groups: ("inconclusive", {}), version=3)
    assert DECISION_RULE == 2
    assert claim.stored_version == 1003 and claim.stored_version % 1000 == claim.version
